package localserver

import (
	"strings"
	"testing"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
)

func TestHostRootWarning(t *testing.T) {
	for _, tc := range []struct {
		name    string
		userns  bool
		runtime engine.Runtime
		warns   bool
	}{
		{"runc without a user namespace", false, engine.Runtime{Name: "runc"}, true},
		{"runc with a user namespace", true, engine.Runtime{Name: "runc"}, false},
		{"gVisor", false, engine.Runtime{Name: "runsc", GVisor: true}, false},
		{"gVisor with a user namespace", true, engine.Runtime{Name: "runsc", GVisor: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := hostRootWarning(engine.EngineInfo{UserNamespace: tc.userns, Runtime: tc.runtime})
			if (got != "") != tc.warns {
				t.Fatalf("warning %q, want one: %v", got, tc.warns)
			}
			if tc.warns && !strings.Contains(got, "--userns-remap") {
				t.Errorf("the warning does not say how to separate them: %q", got)
			}
		})
	}
}

func TestSudoWarning(t *testing.T) {
	for _, tc := range []struct {
		name    string
		runtime engine.Runtime
		warns   bool
	}{
		{"runc", engine.Runtime{Name: "runc"}, false},
		{"gVisor with --allow-suid", engine.Runtime{Name: "runsc", GVisor: true, AllowSuid: true}, false},
		{"gVisor without --allow-suid", engine.Runtime{Name: "runsc", GVisor: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := sudoWarning(engine.EngineInfo{Runtime: tc.runtime})
			if (got != "") != tc.warns {
				t.Fatalf("warning %q, want one: %v", got, tc.warns)
			}
			if tc.warns && !strings.Contains(got, "--allow-suid") {
				t.Errorf("the warning does not name the flag: %q", got)
			}
		})
	}
}
