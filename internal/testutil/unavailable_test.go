package testutil

import (
	"slices"
	"strings"
	"testing"
)

// TestUnavailableSkipsUnderRequireAll: what this machine cannot provide skips with the
// reason scripts/test.sh lists, even where a missing prerequisite would fail; so does
// an engine's set-up when the scripts did not start the engine.
func TestUnavailableSkipsUnderRequireAll(t *testing.T) {
	t.Setenv(EnvRequireAll, "1")
	t.Setenv(EnvOwnEngine, "")
	for name, skip := range map[string]func(testing.TB, string, ...any){"Unavailable": Unavailable, "EngineLacks": EngineLacks} {
		var inner *testing.T
		t.Run(name, func(t *testing.T) {
			inner = t
			skip(t, "no %s here", "binfmt_misc")
		})
		if !inner.Skipped() {
			t.Errorf("%s did not skip", name)
		}
	}
}

func TestUnexpectedWarnings(t *testing.T) {
	log := "time=1 level=INFO msg=doctor\n" +
		"time=2 level=WARN msg=\"root in a sandbox is root of this host: …\"\n" +
		"time=3 level=WARN msg=\"something else\"\n"
	got := UnexpectedWarnings(log, "root in a sandbox is root of this host")
	if len(got) != 1 || !strings.Contains(got[0], "something else") {
		t.Errorf("unexpected warnings = %q", got)
	}
	if got := UnexpectedWarnings(log, "root in a sandbox", "something"); !slices.Equal(got, nil) {
		t.Errorf("with both expected: %q", got)
	}
}
