package localserver

import "github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"

// hostRootWarning is the start-up warning for sandboxes whose root is the
// host's root: neither a user namespace (the engine's --userns-remap) nor a
// gVisor runtime (a kernel of its own) separates them; empty when one does.
// runtime is the runtime the server's containers run with.
func hostRootWarning(info engine.EngineInfo, runtime string) string {
	if info.UserNamespace || runtime == gVisorRuntime {
		return ""
	}
	return "root in a sandbox is root of this host: the engine maps no user namespace (dockerd --userns-remap) and the runtime " +
		runtime + " is not gVisor, so per-user kernel limits and any escape from the container are the host root's. " +
		"See the security guide (docs/guides/sandbox-security.md)."
}

// gVisorRuntime is the name gVisor's runtime is registered under.
const gVisorRuntime = "runsc"
