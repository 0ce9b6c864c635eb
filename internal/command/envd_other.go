//go:build !linux

package command

import (
	"fmt"
	"io"
	"runtime"
)

// Envd is the `envd` subcommand: the daemon inside sandbox containers,
// which are Linux. Other builds carry the provider and the server only.
func Envd(_ []string, _, stderr io.Writer) int {
	fmt.Fprintf(stderr, "envd: runs inside Linux sandbox containers only; this is a %s/%s build (the server copies a linux build of this binary into containers)\n", runtime.GOOS, runtime.GOARCH)
	return 1
}
