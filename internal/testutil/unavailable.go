package testutil

import (
	"os"
	"strings"
	"testing"
)

// A prerequisite the scripts failed to provide fails the run under EnvRequireAll
// (Missing); one this machine cannot provide at all (an unprivileged container
// cannot register binfmt_misc; an engine the run did not start keeps its own
// set-up) skips the test with the reason, also then (Unavailable), and
// scripts/test.sh lists those reasons under "not run on this machine".

// EnvOwnEngine is set by scripts/dockerd.sh when it started the Docker engine of
// DOCKER_HOST itself, set up as the tests need (--userns-remap, gVisor); unset,
// the engine is the machine's, whose set-up a test must not assume.
const EnvOwnEngine = "E2B_TEST_OWN_ENGINE"

// EnvHardDiskLimit is set by scripts/test.sh on the pass whose engine gives
// containers a hard disk limit (start_quota_dockerd in scripts/dockerd.sh):
// a test that finds only the watchdog there fails.
const EnvHardDiskLimit = "E2B_TEST_HARD_DISK_LIMIT"

// NotRunHere starts the skip message of a test this machine cannot run;
// scripts/test.sh collects the messages that start so from the test output.
const NotRunHere = "not run on this machine: "

// Unavailable skips the test, also under EnvRequireAll: the machine cannot
// provide what it needs. The reason must not hold a double quote, which the
// JSON test output escapes.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Skipf(NotRunHere+"%s: "+format, append([]any{t.Name()}, args...)...)
}

// EngineLacks reports that the Docker engine lacks a set-up the test needs:
// a missing prerequisite when the scripts started the engine (EnvOwnEngine),
// unavailable on the machine's own engine.
func EngineLacks(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv(EnvOwnEngine) != "" {
		Missing(t, format, args...)
	}
	Unavailable(t, format, args...)
}

// UnexpectedWarnings are the level=WARN lines of a log (slog's text format)
// that contain none of expected.
func UnexpectedWarnings(log string, expected ...string) []string {
	var lines []string
	for line := range strings.Lines(log) {
		if !strings.Contains(line, "level=WARN") {
			continue
		}
		known := false
		for _, e := range expected {
			known = known || strings.Contains(line, e)
		}
		if !known {
			lines = append(lines, strings.TrimSpace(line))
		}
	}
	return lines
}
