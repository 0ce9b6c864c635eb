package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// seccompMode is the Seccomp field of /proc/self/status of the envd in rc:
// "2" (filter) when the container's seccomp profile binds its processes.
// gVisor enforces an OCI profile only when runsc runs with --oci-seccomp;
// without it, processes show 0 and every system call reaches gVisor's kernel.
func seccompMode(ctx context.Context, rc *runningContainer) (string, error) {
	status, err := rc.att.Envd().ReadFile(ctx, "/proc/self/status", "", 64<<10)
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if mode, ok := strings.CutPrefix(line, "Seccomp:"); ok {
			return strings.TrimSpace(mode), nil
		}
	}
	return "", errors.New("/proc/self/status has no Seccomp field")
}

// seccompWarning is the start-up warning for runtime when its containers'
// processes report seccomp mode (not 2: no filter), naming the flag that
// enforces it under gVisor; "" when the profile binds them.
func seccompWarning(runtime, mode string) string {
	if mode == "2" {
		return ""
	}
	return fmt.Sprintf("containers of runtime %s run without the server's seccomp profile (Seccomp: %s in /proc/self/status): "+
		"gVisor enforces it only with runsc's --oci-seccomp flag; add \"--oci-seccomp\" to the runtime's runtimeArgs in the engine's daemon.json (docs/guides/sandbox-security.md)", runtime, mode)
}
