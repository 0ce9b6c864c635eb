package testutil

import "os"

// EnvRuntime names the OCI runtime the tests' local servers run their
// containers under (the server's --runtime): scripts/test.sh runs the main
// pass under runc and the second engine's pass under gVisor (runsc).
const EnvRuntime = "E2B_TEST_RUNTIME"

// Runtime is the runtime of EnvRuntime, runc when unset: an explicit one,
// so that a test never falls back silently to another.
func Runtime() string {
	if rt := os.Getenv(EnvRuntime); rt != "" {
		return rt
	}
	return "runc"
}
