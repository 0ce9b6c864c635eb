//go:build !linux

package command

import (
	"fmt"
	"os"
	"runtime"
)

// Envd is the `envd` subcommand: the daemon inside sandbox containers,
// which are Linux. Other builds carry the provider and the server only.
func Envd([]string) int {
	fmt.Fprintf(os.Stderr, "envd: runs inside Linux sandbox containers only; this is a %s/%s build (the server copies a linux build of this binary into containers)\n", runtime.GOOS, runtime.GOARCH)
	return 1
}
