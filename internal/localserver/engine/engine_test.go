package engine

import "testing"

func TestSetuidAllowed(t *testing.T) {
	runc, runsc, runscNoSuid := Runtime{Name: "runc"}, Runtime{Name: "runsc", GVisor: true, AllowSuid: true}, Runtime{Name: "runsc", GVisor: true}
	for _, tc := range []struct {
		name    string
		runtime Runtime
		userns  bool
		network string
		want    bool
	}{
		{"runc: root is the host's", runc, false, NetworkNone, false},
		{"runc in a user namespace", runc, true, NetworkNone, true},
		{"gVisor", runsc, false, NetworkNone, true},
		{"gVisor in a user namespace", runsc, true, NetworkNone, true},
		{"gVisor without --allow-suid", runscNoSuid, false, NetworkNone, false},
		{"gVisor without --allow-suid in a user namespace", runscNoSuid, true, NetworkNone, false},
		{"the host's network: the host's user namespace", runc, true, NetworkHost, false},
		{"gVisor on the host's network", runsc, false, NetworkHost, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SetuidAllowed(tc.runtime, tc.userns, tc.network); got != tc.want {
				t.Errorf("SetuidAllowed = %v, want %v", got, tc.want)
			}
		})
	}
}
