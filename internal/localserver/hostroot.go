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
		info.Runtime.Name + " is not gVisor, so per-user kernel limits and any escape from the container are the host root's, " +
		"and sudo and other setuid programs do not work in sandboxes (they run with no-new-privileges). " +
		"See the security guide (docs/guides/sandbox-security.md)."
}

// sudoWarning is the start-up warning for a gVisor runtime that ignores
// the setuid bit (engine.Runtime.AllowSuid), so that sudo fails in
// sandboxes where E2B's works; empty otherwise.
func sudoWarning(info engine.EngineInfo) string {
	if !info.Runtime.GVisor || info.Runtime.AllowSuid {
		return ""
	}
	return "sudo and other setuid programs do not work in sandboxes: the gVisor runtime " + info.Runtime.Name +
		" runs without --allow-suid. Add it to the runtime's runtimeArgs in the engine's daemon.json (docs/guides/sandbox-security.md)."
}
