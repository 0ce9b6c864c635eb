package localserver

import "github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"

// hostRootWarning is the start-up warning for sandboxes whose root is the
// host's root: neither a user namespace (the engine's --userns-remap) nor a
// gVisor runtime (a kernel of its own) separates them; empty when one does.
func hostRootWarning(info engine.EngineInfo) string {
	if info.UserNamespace || info.Runtime.GVisor {
		return ""
	}
	return "root in a sandbox is root of this host: the engine maps no user namespace (dockerd --userns-remap) and the runtime " +
		info.Runtime.Name + " is not gVisor, so per-user kernel limits and any escape from the container are the host root's. " +
		"See the security guide (docs/guides/sandbox-security.md)."
}
