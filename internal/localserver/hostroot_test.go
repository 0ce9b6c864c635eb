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
		runtime string
		warns   bool
	}{
		{"runc without a user namespace", false, "runc", true},
		{"runc with a user namespace", true, "runc", false},
		{"gVisor", false, "runsc", false},
		{"gVisor with a user namespace", true, "runsc", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := hostRootWarning(engine.EngineInfo{UserNamespace: tc.userns}, tc.runtime)
			if (got != "") != tc.warns {
				t.Fatalf("warning %q, want one: %v", got, tc.warns)
			}
			if tc.warns && !strings.Contains(got, "--userns-remap") {
				t.Errorf("the warning does not say how to separate them: %q", got)
			}
		})
	}
}
