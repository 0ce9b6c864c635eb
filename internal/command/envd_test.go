package command

import (
	"io"
	"path/filepath"
	"testing"
)

func TestEnvdFlags(t *testing.T) {
	if code := Envd([]string{"--version"}, io.Discard, io.Discard); code != 0 {
		t.Errorf("--version exit code %d", code)
	}
	if code := Envd([]string{"--no-such-flag"}, io.Discard, io.Discard); code != 2 {
		t.Errorf("bad flag exit code %d, want 2", code)
	}
	if code := Envd([]string{"--listen", "unix://" + filepath.Join(t.TempDir(), "missing", "dir", "envd.sock")}, io.Discard, io.Discard); code != 1 {
		t.Errorf("unusable socket path exit code %d, want 1", code)
	}
}
