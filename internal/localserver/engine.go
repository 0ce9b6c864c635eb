package localserver

import (
	"context"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/api"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/builds"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine/docker"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/sandboxes"
)

// Engine is what the server's parts need of the engine, together: the
// builds', the sandboxes' and the proxy's interfaces, and the wiring's own
// (Info, RemoveOrphans). docker.Docker is the one in use; tests bring
// stand-ins.
type Engine interface {
	builds.Engine
	sandboxes.Engine
	api.Dialer
	Info(ctx context.Context) (engine.EngineInfo, error)
	// RemoveOrphans removes containers this server created that keepSandbox
	// does not claim (after a crash), including leftover build containers,
	// and the build images of this server that keepImage does not claim
	// (e.g. committed by a build the crash interrupted).
	RemoveOrphans(ctx context.Context, keepSandbox func(sandboxID string) bool, keepImage func(ref string) bool) error
}

var _ Engine = (*docker.Docker)(nil)
