package docker

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/system"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
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

// A gVisor runtime honours the setuid bit only when the engine passes it
// --allow-suid, however the flag is spelt.
func TestOfferedRuntimesAllowSuid(t *testing.T) {
	for _, tc := range []struct {
		name string
		rt   system.Runtime
		want bool
	}{
		{"runsc", system.Runtime{Path: "runsc", Args: []string{"--network=none", "--allow-suid"}}, true},
		{"runsc", system.Runtime{Path: "runsc", Args: []string{"-allow-suid=true"}}, true},
		{"runsc", system.Runtime{Path: "runsc", Args: []string{"--allow-suid", "--allow-suid=false"}}, false},
		{"runsc", system.Runtime{Path: "runsc", Args: []string{"--network=none"}}, false},
		{"runsc", system.Runtime{Path: "runsc", Args: []string{"allow-suid"}}, false}, // an argument, not a flag
		{"runc", system.Runtime{Path: "runc", Args: []string{"--allow-suid"}}, false},
	} {
		got := offeredRuntimes(map[string]system.RuntimeWithStatus{tc.name: {Runtime: tc.rt}})[tc.name].allowSuid
		if got != tc.want {
			t.Errorf("%s %v: allowSuid %v, want %v", tc.name, tc.rt.Args, got, tc.want)
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
		want                         engine.Runtime
		wantTested                   []string
		wantFallback, wantErr        string
	}{
		{name: "engine default", requested: "", defaultName: "runc", offered: withGVisor, want: engine.Runtime{Name: "runc"}},
		{name: "engine default is gVisor", requested: "", defaultName: "runsc", offered: withGVisor, want: engine.Runtime{Name: "runsc", GVisor: true}},
		{name: "auto without gVisor", requested: engine.RuntimeAuto, defaultName: "runc", offered: plain, want: engine.Runtime{Name: "runc"},
			wantFallback: "the Docker engine offers no gVisor runtime (runsc; it offers io.containerd.runc.v2, runc)"},
		{name: "auto with gVisor", requested: engine.RuntimeAuto, defaultName: "runc", offered: withGVisor,
			want: engine.Runtime{Name: "runsc", GVisor: true}, wantTested: []string{"runsc"}},
		{name: "auto, the default is gVisor", requested: engine.RuntimeAuto, defaultName: "gvisor-kvm", offered: withGVisor,
			want: engine.Runtime{Name: "gvisor-kvm", GVisor: true}, wantTested: []string{"gvisor-kvm"}},
		{name: "auto, runsc fails, another gVisor passes", requested: engine.RuntimeAuto, defaultName: "runc", offered: withGVisor, failing: []string{"runsc"},
			want: engine.Runtime{Name: "gvisor-kvm", GVisor: true}, wantTested: []string{"runsc", "gvisor-kvm"}},
		{name: "auto, every gVisor fails", requested: engine.RuntimeAuto, defaultName: "runc", offered: withGVisor, failing: []string{"runsc", "gvisor-kvm"},
			want: engine.Runtime{Name: "runc"}, wantTested: []string{"runsc", "gvisor-kvm"},
			wantFallback: "gVisor runtime runsc failed its self-test: sandbox did not start; gVisor runtime gvisor-kvm failed its self-test: sandbox did not start"},
		{name: "explicit gVisor", requested: "runsc", defaultName: "runc", offered: withGVisor,
			want: engine.Runtime{Name: "runsc", GVisor: true}, wantTested: []string{"runsc"}},
		{name: "explicit default, not tested", requested: "runc", defaultName: "runc", offered: withGVisor, want: engine.Runtime{Name: "runc"}},
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

func TestSeccompWarning(t *testing.T) {
	if w := seccompWarning("runsc", "2"); w != "" {
		t.Errorf("warning for a filtered process: %s", w)
	}
	if w := seccompWarning("runsc", "0"); !strings.Contains(w, "runtime runsc") || !strings.Contains(w, "Seccomp: 0") || !strings.Contains(w, `"--oci-seccomp"`) {
		t.Errorf("warning for an unfiltered process = %q, want the runtime, the mode and the flag named", w)
	}
}
