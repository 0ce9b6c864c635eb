package steps

import (
	"encoding/json"
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
