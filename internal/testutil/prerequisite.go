package testutil

import (
	"os"
	"testing"
)

// EnvRequireAll, when set, turns a missing test prerequisite into a
// failure. scripts/test.sh sets it: it installs every prerequisite, so a
// skip there would be a check that passes without checking.
const EnvRequireAll = "E2B_TEST_REQUIRE_ALL"

// Missing reports that a prerequisite of the test (a tool, an engine, an
// image) is absent: the test is skipped, or fails under EnvRequireAll.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv(EnvRequireAll) != "" {
		t.Fatalf("missing test prerequisite (%s is set): "+format, append([]any{EnvRequireAll}, args...)...)
	}
	t.Skipf(format, args...)
}
