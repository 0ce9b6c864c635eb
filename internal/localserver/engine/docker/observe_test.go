package docker

import (
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
)

func TestMetricsOf(t *testing.T) {
	read := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	size := int64(300 << 20)
	st := container.StatsResponse{Read: read}
	// Over the interval the host's 8 CPUs ran 8 s; the container used 1 s.
	st.PreCPUStats.CPUUsage.TotalUsage, st.CPUStats.CPUUsage.TotalUsage = 5e9, 6e9
	st.PreCPUStats.SystemUsage, st.CPUStats.SystemUsage = 100e9, 108e9
	st.CPUStats.OnlineCPUs = 8
	st.MemoryStats.Usage, st.MemoryStats.Limit = 200<<20, 8<<30
	st.MemoryStats.Stats = map[string]uint64{"file": 50 << 20}
	insp := container.InspectResponse{
		ContainerJSONBase: &container.ContainerJSONBase{
			HostConfig: &container.HostConfig{Resources: container.Resources{NanoCPUs: 2e9, Memory: 1 << 30}},
			SizeRootFs: &size,
		},
	}
	m := metricsOf(st, insp)
	// One CPU-second of the sandbox's two over a one-second interval: 50 %.
	want := engine.SandboxMetrics{Time: read, CPUCount: 2, CPUUsedPct: 50, MemUsed: 150 << 20, MemTotal: 1 << 30, MemCache: 50 << 20, DiskUsed: size}
	if m != want {
		t.Errorf("metricsOf = %+v, want %+v", m, want)
	}

	// Without limits: the host's CPUs and the engine's memory limit; cgroup
	// v1 names the cache "cache"; no previous reading gives no CPU share.
	st.PreCPUStats = container.CPUStats{}
	st.CPUStats.SystemUsage = 0
	st.MemoryStats.Stats = map[string]uint64{"cache": 20 << 20}
	m = metricsOf(st, container.InspectResponse{ContainerJSONBase: &container.ContainerJSONBase{HostConfig: &container.HostConfig{}}})
	if m.CPUCount != 8 || m.CPUUsedPct != 0 || m.MemTotal != 8<<30 || m.MemCache != 20<<20 || m.DiskUsed != 0 {
		t.Errorf("metricsOf without limits = %+v", m)
	}
}
