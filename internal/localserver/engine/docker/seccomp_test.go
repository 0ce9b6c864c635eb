package docker

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
)

// seccompProfile is the part of the profile's JSON the tests read.
type seccompProfile struct {
	DefaultAction string `json:"defaultAction"`
	Syscalls      []struct {
		Names  []string `json:"names"`
		Action string   `json:"action"`
	} `json:"syscalls"`
}

// The profile refuses what no rule allows and no rule names io_uring; it
// allows what containers need.
func TestSeccompProfile(t *testing.T) {
	var p seccompProfile
	if err := json.Unmarshal(seccompJSON, &p); err != nil {
		t.Fatal(err)
	}
	if p.DefaultAction != "SCMP_ACT_ERRNO" {
		t.Errorf("default action %q, want SCMP_ACT_ERRNO", p.DefaultAction)
	}
	allowed := map[string]bool{}
	for _, rule := range p.Syscalls {
		for _, name := range rule.Names {
			if strings.Contains(name, "io_uring") {
				t.Errorf("the profile names %s (action %s)", name, rule.Action)
			}
			if rule.Action == "SCMP_ACT_ALLOW" {
				allowed[name] = true
			}
		}
	}
	for _, name := range []string{"execve", "clone", "openat", "setuid", "chown", "inotify_init1", "socket"} {
		if !allowed[name] {
			t.Errorf("the profile does not allow %s", name)
		}
	}
}

// Every container the server creates gets the profile, as committed, with
// no-new-privileges, and a bounded json-file log.
func TestHostConfigHardening(t *testing.T) {
	opt, err := seccompOpt(false)
	if err != nil {
		t.Fatal(err)
	}
	hc := hostConfig(engine.NetworkNone, "", opt, false)
	if !slices.Contains(hc.SecurityOpt, "no-new-privileges") {
		t.Errorf("security options %q lack no-new-privileges", hc.SecurityOpt)
	}
	var sent, committed any
	for _, o := range hc.SecurityOpt {
		if raw, ok := strings.CutPrefix(o, "seccomp="); ok {
			if err := json.Unmarshal([]byte(raw), &sent); err != nil {
				t.Fatalf("the seccomp option: %v", err)
			}
			if strings.ContainsAny(raw, "\n\t") {
				t.Error("the seccomp option is not compact")
			}
		}
	}
	if err := json.Unmarshal(seccompJSON, &committed); err != nil {
		t.Fatal(err)
	}
	if sent == nil {
		t.Fatalf("no seccomp option in %q", hc.SecurityOpt)
	}
	sentJSON, _ := json.Marshal(sent)
	committedJSON, _ := json.Marshal(committed)
	if string(sentJSON) != string(committedJSON) {
		t.Error("the profile sent is not the committed one")
	}
	if lc := hc.LogConfig; lc.Type != "json-file" || lc.Config["max-size"] == "" || lc.Config["max-file"] == "" {
		t.Errorf("log configuration %+v is not bounded", lc)
	}
}

// For gVisor the profile differs in one rule only: clone3 is allowed, as
// runsc --oci-seccomp would answer its refusal with EPERM, not the ENOSYS
// after which glibc falls back to clone.
func TestSeccompOptForGVisor(t *testing.T) {
	decode := func(gvisor bool) seccompProfile {
		t.Helper()
		opt, err := seccompOpt(gvisor)
		if err != nil {
			t.Fatal(err)
		}
		var p seccompProfile
		if err := json.Unmarshal([]byte(strings.TrimPrefix(opt, "seccomp=")), &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	plain, gvisor := decode(false), decode(true)
	if len(plain.Syscalls) != len(gvisor.Syscalls) || plain.DefaultAction != gvisor.DefaultAction {
		t.Fatalf("the gVisor profile has %d rules, default %s; the plain one %d, %s", len(gvisor.Syscalls), gvisor.DefaultAction, len(plain.Syscalls), plain.DefaultAction)
	}
	changed := 0
	for i, rule := range gvisor.Syscalls {
		was := plain.Syscalls[i]
		if rule.Action == was.Action {
			continue
		}
		changed++
		if !slices.Equal(rule.Names, []string{"clone3"}) || was.Action != "SCMP_ACT_ERRNO" || rule.Action != "SCMP_ACT_ALLOW" {
			t.Errorf("rule %v: %s for gVisor, %s otherwise", rule.Names, rule.Action, was.Action)
		}
	}
	if changed != 1 {
		t.Errorf("%d rules differ for gVisor, want clone3's alone", changed)
	}
}
