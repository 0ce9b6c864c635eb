package steps

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestNormalize(t *testing.T) {
	for _, c := range []struct {
		in, want string
		known    bool
	}{
		{Run, Run, true},
		{Copy, Copy, true},
		{Env, Env, true},
		{Workdir, Workdir, true},
		{User, User, true},
		{"ADD", Copy, true},
		{"ARG", Env, true},
		{"run", "run", false},
		{"HEALTHCHECK", "HEALTHCHECK", false},
		{"", "", false},
	} {
		got, known := Normalize(c.in)
		if got != c.want || known != c.known {
			t.Errorf("Normalize(%q) = %q, %v; want %q, %v", c.in, got, known, c.want, c.known)
		}
	}
}

// The JSON names are the E2B API's.
func TestStepWireLayout(t *testing.T) {
	b, err := json.Marshal(Step{Type: Copy, Args: []string{"a", "/a", "", ""}, FilesHash: "h"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"type":"COPY","args":["a","/a","",""],"filesHash":"h","force":false}`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
	b, _ = json.Marshal(Step{Type: Run, Args: []string{"true"}})
	if want := `{"type":"RUN","args":["true"],"force":false}`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
}

// The constructors write the layout the API takes, and the accessors read it back.
func TestConstructorsAndAccessors(t *testing.T) {
	for _, c := range []struct {
		step Step
		want []string
	}{
		{NewRun(RunArgs{Command: "make"}), []string{"make"}},
		{NewRun(RunArgs{Command: "make", User: "builder"}), []string{"make", "builder"}},
		{NewCopy(CopyArgs{Src: "app", Dest: "/app"}), []string{"app", "/app", "", ""}},
		{NewCopy(CopyArgs{Src: "a.sh", Dest: "bin/", User: "u:g", Mode: "0755"}), []string{"a.sh", "bin/", "u:g", "0755"}},
		{NewEnv(EnvVar{"B", "2"}, EnvVar{"A", "1"}), []string{"B", "2", "A", "1"}},
		{NewWorkdir("/app"), []string{"/app"}},
		{NewUser("root"), []string{"root"}},
	} {
		if !slices.Equal(c.step.Args, c.want) {
			t.Errorf("%s args %q, want %q", c.step.Type, c.step.Args, c.want)
		}
	}
	if a := NewRun(RunArgs{Command: "make", User: "builder"}).RunArgs(); a != (RunArgs{"make", "builder"}) {
		t.Errorf("RunArgs = %+v", a)
	}
	// A COPY with fewer arguments (an older client) reads the missing ones as unset.
	if a := (Step{Type: Copy, Args: []string{"app", "/app"}}).CopyArgs(); a != (CopyArgs{Src: "app", Dest: "/app"}) {
		t.Errorf("CopyArgs = %+v", a)
	}
	if vars, err := NewEnv(EnvVar{"A", "1"}).EnvVars(); err != nil || !slices.Equal(vars, []EnvVar{{"A", "1"}}) {
		t.Errorf("EnvVars = %v, %v", vars, err)
	}
	if _, err := (Step{Type: Env, Args: []string{"A"}}).EnvVars(); err == nil || !strings.Contains(err.Error(), "key/value pairs") {
		t.Errorf("EnvVars of an odd list: %v, want an error", err)
	}
	if p := NewWorkdir("/app").WorkdirPath(); p != "/app" {
		t.Errorf("WorkdirPath = %q", p)
	}
	if u := (Step{Type: User, Args: []string{"dev", "true"}}).UserArgs(); u != (UserArgs{Name: "dev", Admin: true}) {
		t.Errorf("UserArgs = %+v", u)
	}
}

func TestDescribe(t *testing.T) {
	for _, c := range []struct {
		step Step
		want string
	}{
		{NewRun(RunArgs{Command: "make all"}), "RUN make all"},
		{NewRun(RunArgs{Command: "apt-get update", User: "root"}), "RUN apt-get update (as root)"},
		{NewCopy(CopyArgs{Src: "app", Dest: "/srv/"}), "COPY app /srv/"},
		{NewCopy(CopyArgs{Src: "a.sh", Dest: "bin/", User: "u:g", Mode: "0755"}), "COPY a.sh bin/ (owner u:g, mode 0755)"},
		{NewEnv(EnvVar{"A", "1"}, EnvVar{"B", "$A"}), "ENV A=1 B=$A"},
		{NewWorkdir("/app"), "WORKDIR /app"},
		{NewUser("dev"), "USER dev"},
	} {
		if got := c.step.Describe(); got != c.want {
			t.Errorf("Describe(%s %q) = %q, want %q", c.step.Type, c.step.Args, got, c.want)
		}
	}
}
