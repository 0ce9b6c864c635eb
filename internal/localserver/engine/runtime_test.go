package engine

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/system"
	docker "github.com/docker/docker/client"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/testutil"
)

func TestIsGVisor(t *testing.T) {
	for _, tc := range []struct {
		name string
		rt   system.Runtime
		want bool
	}{
		{"runsc", system.Runtime{Path: "runsc"}, true},
		{"gvisor", system.Runtime{Path: "/usr/local/bin/runsc"}, true},
		{"gvisor-shim", system.Runtime{Type: "io.containerd.runsc.v1"}, true},
		{"runc", system.Runtime{Path: "runc"}, false},
		{"io.containerd.runc.v2", system.Runtime{Type: "io.containerd.runc.v2"}, false},
		{"crun", system.Runtime{Path: "/usr/bin/crun"}, false},
	} {
		if got := isGVisor(tc.name, tc.rt); got != tc.want {
			t.Errorf("isGVisor(%q, %+v) = %v, want %v", tc.name, tc.rt, got, tc.want)
		}
	}
}

// chooseRuntime's cases, with a self-test that fails where the case needs
// it (a real engine's runsc passes; TestRuntimeOnTheEngine runs that).
func TestChooseRuntime(t *testing.T) {
	plain := map[string]offeredRuntime{"runc": {}, "io.containerd.runc.v2": {}}
	withGVisor := map[string]offeredRuntime{"runc": {}, "runsc": {gvisor: true}, "gvisor-kvm": {gvisor: true}}
	broken := errors.New("sandbox did not start")
	for _, tc := range []struct {
		name, requested, defaultName string
		offered                      map[string]offeredRuntime
		failing                      []string // runtimes whose self-test fails
		want                         Runtime
		wantTested                   []string
		wantFallback, wantErr        string
	}{
		{name: "engine default", requested: "", defaultName: "runc", offered: withGVisor, want: Runtime{Name: "runc"}},
		{name: "engine default is gVisor", requested: "", defaultName: "runsc", offered: withGVisor, want: Runtime{Name: "runsc", GVisor: true}},
		{name: "auto without gVisor", requested: RuntimeAuto, defaultName: "runc", offered: plain, want: Runtime{Name: "runc"},
			wantFallback: "the Docker engine offers no gVisor runtime (runsc; it offers io.containerd.runc.v2, runc)"},
		{name: "auto with gVisor", requested: RuntimeAuto, defaultName: "runc", offered: withGVisor,
			want: Runtime{Name: "runsc", GVisor: true}, wantTested: []string{"runsc"}},
		{name: "auto, the default is gVisor", requested: RuntimeAuto, defaultName: "gvisor-kvm", offered: withGVisor,
			want: Runtime{Name: "gvisor-kvm", GVisor: true}, wantTested: []string{"gvisor-kvm"}},
		{name: "auto, runsc fails, another gVisor passes", requested: RuntimeAuto, defaultName: "runc", offered: withGVisor, failing: []string{"runsc"},
			want: Runtime{Name: "gvisor-kvm", GVisor: true}, wantTested: []string{"runsc", "gvisor-kvm"}},
		{name: "auto, every gVisor fails", requested: RuntimeAuto, defaultName: "runc", offered: withGVisor, failing: []string{"runsc", "gvisor-kvm"},
			want: Runtime{Name: "runc"}, wantTested: []string{"runsc", "gvisor-kvm"},
			wantFallback: "gVisor runtime runsc failed its self-test: sandbox did not start; gVisor runtime gvisor-kvm failed its self-test: sandbox did not start"},
		{name: "explicit gVisor", requested: "runsc", defaultName: "runc", offered: withGVisor,
			want: Runtime{Name: "runsc", GVisor: true}, wantTested: []string{"runsc"}},
		{name: "explicit default, not tested", requested: "runc", defaultName: "runc", offered: withGVisor, want: Runtime{Name: "runc"}},
		{name: "explicit gVisor fails its self-test", requested: "runsc", defaultName: "runc", offered: withGVisor, failing: []string{"runsc"},
			wantTested: []string{"runsc"}, wantErr: `runtime "runsc" failed its self-test (a container of envd that answers through the server's channel): sandbox did not start`},
		{name: "explicit, missing", requested: "runsc", defaultName: "runc", offered: plain,
			wantErr: `runtime "runsc": the Docker engine offers no runtime of that name (it offers io.containerd.runc.v2, runc)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tested []string
			selfTest := func(_ context.Context, name string) error {
				tested = append(tested, name)
				if slices.Contains(tc.failing, name) {
					return broken
				}
				return nil
			}
			got, err := chooseRuntime(t.Context(), tc.requested, tc.defaultName, tc.offered, selfTest)
			if !slices.Equal(tested, tc.wantTested) {
				t.Errorf("self-tested %v, want %v", tested, tc.wantTested)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Runtime != tc.want || got.fallback != tc.wantFallback {
				t.Errorf("chose %+v (fallback %q), want %+v (fallback %q)", got.Runtime, got.fallback, tc.want, tc.wantFallback)
			}
		})
	}
}

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
	gvisor := gvisorRuntimes(info.DefaultRuntime, offeredRuntimes(info.Runtimes))

	start := func(t *testing.T, runtime string, envdTimeout time.Duration) (*Docker, string, error) {
		t.Helper()
		var log testutil.SyncBuffer
		instance := randomID("rt")
		d, err := NewDocker(t.Context(), DockerOptions{
			EnvdBinaries: []string{dockerEnv.envdBin}, Network: NetworkNone, Runtime: runtime, EnvdStartTimeout: envdTimeout,
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
	runtimeOf := func(t *testing.T, d *Docker) Runtime {
		t.Helper()
		info, err := d.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return info.Runtime
	}

	t.Run("auto", func(t *testing.T) {
		d, log, err := start(t, RuntimeAuto, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := runtimeOf(t, d)
		if len(gvisor) > 0 {
			if got != (Runtime{Name: gvisor[0], GVisor: true}) {
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
		if got := runtimeOf(t, d); got != (Runtime{Name: gvisor[0], GVisor: true}) {
			t.Errorf("chose %+v", got)
		}
	})
	t.Run("gVisor failing its self-test", func(t *testing.T) {
		d, log, err := start(t, RuntimeAuto, time.Millisecond)
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

func TestSeccompWarning(t *testing.T) {
	if w := seccompWarning("runsc", "2"); w != "" {
		t.Errorf("warning for a filtered process: %s", w)
	}
	if w := seccompWarning("runsc", "0"); !strings.Contains(w, "runtime runsc") || !strings.Contains(w, "Seccomp: 0") || !strings.Contains(w, `"--oci-seccomp"`) {
		t.Errorf("warning for an unfiltered process = %q, want the runtime, the mode and the flag named", w)
	}
}
