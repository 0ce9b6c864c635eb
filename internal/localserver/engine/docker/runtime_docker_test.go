package docker

import (
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	docker "github.com/docker/docker/client"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/testutil"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
)

// TestRuntimeOnTheEngine chooses runtimes on the real engine: auto takes
// gVisor when the engine offers it (scripts/dockerd.sh registers runsc)
// and warns with the reason when it does not; a runtime the engine lacks
// is an error naming it; a gVisor whose self-test fails (envd given no
// time to answer) is a fallback under auto and an error when named.
// Nothing of a failed start stays on the engine.
func TestRuntimeOnTheEngine(t *testing.T) {
	if dockerEnv.skip != "" {
		testutil.Missing(t, "%s", dockerEnv.skip)
	}
	cli, err := docker.NewClientWithOpts(docker.FromEnv, docker.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	info, err := cli.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	offered := offeredRuntimes(info.Runtimes)
	gvisor := gvisorRuntimes(info.DefaultRuntime, offered)
	// What the engine's first gVisor runtime is, --allow-suid included.
	firstGVisor := func() engine.Runtime {
		return engine.Runtime{Name: gvisor[0], GVisor: true, AllowSuid: offered[gvisor[0]].allowSuid}
	}

	start := func(t *testing.T, runtime string, envdTimeout time.Duration) (*Docker, string, error) {
		t.Helper()
		var log testutil.SyncBuffer
		instance := randomID("rt")
		d, err := NewDocker(t.Context(), DockerOptions{
			EnvdBinaries: []string{dockerEnv.envdBin}, Network: engine.NetworkNone, Runtime: runtime, EnvdStartTimeout: envdTimeout,
			LabelPrefix: "e2b-runtime-test", Instance: instance, Logger: slog.New(slog.NewTextHandler(&log, nil)),
		})
		if err == nil {
			t.Cleanup(func() { d.Close() })
			return d, log.String(), nil
		}
		// A failed start leaves neither a self-test container nor the
		// envd volume's holder.
		for _, label := range []string{"e2b-runtime-test.instance=" + instance, "e2b-runtime-test.envd-of=" + instance} {
			left, lerr := cli.ContainerList(t.Context(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", label))})
			if lerr != nil || len(left) > 0 {
				t.Errorf("a failed start left %d containers labelled %s (%v)", len(left), label, lerr)
			}
		}
		return nil, log.String(), err
	}
	runtimeOf := func(t *testing.T, d *Docker) engine.Runtime {
		t.Helper()
		info, err := d.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return info.Runtime
	}

	t.Run("auto", func(t *testing.T) {
		d, log, err := start(t, engine.RuntimeAuto, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := runtimeOf(t, d)
		if len(gvisor) > 0 {
			if got != firstGVisor() {
				t.Errorf("auto on an engine with %v chose %+v; log:\n%s", gvisor, got, log)
			}
			// The self-test reads the seccomp mode of a process under
			// gVisor: 2 only with runsc's --oci-seccomp.
			enforced := slices.Contains(info.Runtimes[gvisor[0]].Args, "--oci-seccomp")
			warned := strings.Contains(log, "level=WARN") && strings.Contains(log, "without the server's seccomp profile") && strings.Contains(log, "--oci-seccomp")
			if enforced == warned || strings.Count(log, "level=WARN") > 1 {
				t.Errorf("auto on an engine whose %s has args %v (seccomp enforced: %v): the log must warn of the seccomp profile exactly when it is not enforced:\n%s",
					gvisor[0], info.Runtimes[gvisor[0]].Args, enforced, log)
			}
			return
		}
		if got.Name != info.DefaultRuntime || got.GVisor || !strings.Contains(log, "offers no gVisor runtime") {
			t.Errorf("auto on an engine without gVisor chose %+v, want %s with a warning; log:\n%s", got, info.DefaultRuntime, log)
		}
	})
	t.Run("missing", func(t *testing.T) {
		if _, _, err := start(t, "no-such-runtime", 0); err == nil || !strings.Contains(err.Error(), `runtime "no-such-runtime": the Docker engine offers no runtime of that name`) {
			t.Errorf("error %v, want one naming the missing runtime", err)
		}
	})
	if len(gvisor) == 0 {
		t.Run("gVisor missing", func(t *testing.T) {
			if _, _, err := start(t, "runsc", 0); err == nil || !strings.Contains(err.Error(), `runtime "runsc"`) {
				t.Errorf("error %v, want one naming runsc", err)
			}
		})
		return
	}
	t.Run("gVisor named", func(t *testing.T) {
		d, _, err := start(t, gvisor[0], 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := runtimeOf(t, d); got != firstGVisor() {
			t.Errorf("chose %+v", got)
		}
	})
	t.Run("gVisor failing its self-test", func(t *testing.T) {
		d, log, err := start(t, engine.RuntimeAuto, time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if got := runtimeOf(t, d); got.Name != info.DefaultRuntime || !strings.Contains(log, "gVisor runtime "+gvisor[0]+" failed its self-test: envd did not answer") {
			t.Errorf("auto with a failing gVisor chose %+v, want %s with a warning; log:\n%s", got, info.DefaultRuntime, log)
		}
		if _, _, err := start(t, gvisor[0], time.Millisecond); err == nil || !strings.Contains(err.Error(), `runtime "`+gvisor[0]+`" failed its self-test`) {
			t.Errorf("a named gVisor failing its self-test: %v, want an error naming it", err)
		}
	})
}
