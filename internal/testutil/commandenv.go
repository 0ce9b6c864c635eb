package testutil

import "testing"

// CommandEnv is the environment a test gives the commands it runs on this
// machine through envd (the envd server's Config.BaseEnv): HOME is a fresh
// empty directory, so a login shell (`/bin/bash -l`, how the SDKs and the
// provider run a command) reads no profile of the machine's user. Such a
// profile may do anything: on CI it ran `pyenv init`, whose lock, left by a
// shell killed mid-way, made every later `bash -l` wait 60 s.
func CommandEnv(t testing.TB) map[string]string {
	t.Helper()
	return map[string]string{"HOME": t.TempDir()}
}
