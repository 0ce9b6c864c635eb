package docker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
)

// SandboxMetrics samples the container's CPU and memory from the engine's
// stats (two readings a second apart, for the CPU share) and its file
// system's size. The CPU share is of the sandbox's CPUs, as on E2B.
func (d *Docker) SandboxMetrics(ctx context.Context, sandboxID string) (engine.SandboxMetrics, error) {
	id, err := d.sandboxContainer(ctx, sandboxID)
	if err != nil {
		return engine.SandboxMetrics{}, err
	}
	insp, _, err := d.cli.ContainerInspectWithRaw(ctx, id, true)
	if err != nil {
		return engine.SandboxMetrics{}, fmt.Errorf("inspect sandbox %s: %w", sandboxID, err)
	}
	rd, err := d.cli.ContainerStats(ctx, id, false)
	if err != nil {
		return engine.SandboxMetrics{}, fmt.Errorf("stats of sandbox %s: %w", sandboxID, err)
	}
	defer rd.Body.Close()
	var st container.StatsResponse
	if err := json.NewDecoder(io.LimitReader(rd.Body, 1<<20)).Decode(&st); err != nil {
		return engine.SandboxMetrics{}, fmt.Errorf("stats of sandbox %s: %w", sandboxID, err)
	}
	m := metricsOf(st, insp)
	if insp.Config != nil {
		m.DiskTotal = diskLimit(insp.Config.Labels[d.labels.key(diskLimitLabel)])
	}
	if m.Time.IsZero() {
		m.Time = time.Now()
	}
	return m, nil
}

// metricsOf turns the engine's stats and inspection of a container into a
// sample.
func metricsOf(st container.StatsResponse, insp container.InspectResponse) engine.SandboxMetrics {
	m := engine.SandboxMetrics{Time: st.Read}
	cpus := float64(st.CPUStats.OnlineCPUs)
	if insp.HostConfig != nil && insp.HostConfig.NanoCPUs > 0 {
		cpus = float64(insp.HostConfig.NanoCPUs) / 1e9
	}
	m.CPUCount = int32(cpus)
	used := float64(st.CPUStats.CPUUsage.TotalUsage) - float64(st.PreCPUStats.CPUUsage.TotalUsage)
	system := float64(st.CPUStats.SystemUsage) - float64(st.PreCPUStats.SystemUsage)
	if used > 0 && system > 0 && st.CPUStats.OnlineCPUs > 0 && cpus > 0 {
		// system counts every host CPU; the share is of the sandbox's.
		m.CPUUsedPct = min(100, used/system*float64(st.CPUStats.OnlineCPUs)/cpus*100)
	}
	// cgroup v2 names the page cache "file", v1 "cache".
	cache := st.MemoryStats.Stats["file"]
	if cache == 0 {
		cache = st.MemoryStats.Stats["cache"]
	}
	m.MemCache = int64(cache)                            //nolint:gosec // bytes
	m.MemUsed = int64(st.MemoryStats.Usage) - m.MemCache //nolint:gosec // bytes
	m.MemTotal = int64(st.MemoryStats.Limit)             //nolint:gosec // bytes
	if insp.HostConfig != nil && insp.HostConfig.Memory > 0 {
		m.MemTotal = insp.HostConfig.Memory
	}
	if mb := envdMemoryLimitMB(insp.Config); mb > 0 {
		m.MemTotal = mb << 20 // the template's, without gVisor's headroom
	}
	m.MemUsed = max(0, m.MemUsed)
	if insp.SizeRootFs != nil {
		m.DiskUsed = *insp.SizeRootFs
	}
	return m
}

// maxLogBytes bounds what SandboxLogs reads of a container's output, and
// maxLogLine one line of it.
const (
	maxLogBytes = 16 << 20
	maxLogLine  = 16 << 10
)

// SandboxLogs returns what the sandbox's container wrote (envd's own log
// lines) at or after since (the zero time: all), oldest first, as the
// engine keeps it: while the container exists. last > 0 reads only the
// last lines of the log, which Docker finds from the end of its file.
func (d *Docker) SandboxLogs(ctx context.Context, sandboxID string, since time.Time, last int) ([]engine.LogLine, error) {
	id, err := d.sandboxContainer(ctx, sandboxID)
	if err != nil {
		return nil, err
	}
	opts := container.LogsOptions{ShowStdout: true, ShowStderr: true, Timestamps: true}
	if !since.IsZero() {
		opts.Since = since.Format(time.RFC3339Nano)
	}
	if last > 0 {
		opts.Tail = strconv.Itoa(last)
	}
	rc, err := d.cli.ContainerLogs(ctx, id, opts)
	if err != nil {
		return nil, fmt.Errorf("logs of sandbox %s: %w", sandboxID, err)
	}
	defer rc.Close()
	pr, pw := io.Pipe()
	go func() {
		_, err := stdcopy.StdCopy(pw, pw, io.LimitReader(rc, maxLogBytes))
		pw.CloseWithError(err)
	}()
	defer pr.Close()
	var out []engine.LogLine
	sc := bufio.NewScanner(pr)
	sc.Buffer(make([]byte, 64<<10), maxLogLine)
	for sc.Scan() {
		stamp, text, _ := strings.Cut(sc.Text(), " ")
		at, err := time.Parse(time.RFC3339Nano, stamp)
		if err != nil {
			continue
		}
		out = append(out, engine.LogLine{Time: at, Text: strings.TrimRight(text, "\r")})
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.ErrClosedPipe) {
		return out, fmt.Errorf("logs of sandbox %s: %w", sandboxID, err)
	}
	return out, nil
}
