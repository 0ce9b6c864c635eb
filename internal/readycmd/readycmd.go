// Package readycmd writes the ready commands of the E2B SDK's helpers
// (waitForPort, waitForURL, waitForProcess, waitForFile, waitForTimeout):
// shell commands a build runs until they exit 0 to decide that a sandbox
// started from it is ready. Each function returns exactly the string the
// JavaScript SDK's helper of that name returns, so a template defined with
// the provider and one defined with the SDK hash and build alike.
//
// Source: e2b-dev/E2B, packages/js-sdk/src/template/readycmd.ts at commit
// 706c55329540101d3572694ee47022c14285b79f (its latest change, "consolidate
// shell quoting"), and shellQuote in packages/js-sdk/src/utils.ts at commit
// 88f41f392722a2f56971ea6c1084f0fc574ef1f4; both unchanged at b8029973aa7d.
package readycmd

import (
	"strconv"
	"strings"
)

// DefaultStatusCode is the HTTP status WaitForURL waits for when the SDK's
// helper is given none.
const DefaultStatusCode = 200

// WaitForPort waits until something listens on port (TCP or UDP), matching
// the port exactly.
func WaitForPort(port int64) string {
	return `[ -n "$(ss -Htuln sport = :` + strconv.FormatInt(port, 10) + `)" ]`
}

// WaitForURL waits until url answers with the HTTP status statusCode.
func WaitForURL(url string, statusCode int64) string {
	return `curl -s -o /dev/null -w "%{http_code}" ` + Quote(url) + ` | grep -q "` + strconv.FormatInt(statusCode, 10) + `"`
}

// WaitForProcess waits until a process whose name matches name runs (pgrep).
func WaitForProcess(name string) string {
	return "pgrep " + Quote(name) + " > /dev/null"
}

// WaitForFile waits until path is a regular file.
func WaitForFile(path string) string {
	return "[ -f " + Quote(path) + " ]"
}

// WaitForTimeout waits ms milliseconds, in whole seconds rounded down and
// at least one.
func WaitForTimeout(ms int64) string {
	seconds := ms / 1000
	if ms < 0 && ms%1000 != 0 {
		seconds-- // floor, as Math.floor
	}
	return "sleep " + strconv.FormatInt(max(1, seconds), 10)
}

// Quote quotes s for a POSIX shell as the SDK's shellQuote, a port of
// Python's shlex.quote, does: ” for the empty string, s itself when it holds
// only ASCII letters, digits and @%+=:,./-_, else s in single quotes with
// each ' written as '"'"'.
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	if strings.IndexFunc(s, unsafe) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

func unsafe(r rune) bool {
	switch {
	case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		return false
	}
	return !strings.ContainsRune("_@%+=:,./-", r)
}
