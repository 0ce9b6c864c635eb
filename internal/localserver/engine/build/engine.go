// Package build is E2B's build-step interpreter: it runs a template's
// steps (RUN, COPY, ENV, WORKDIR, USER), the start and ready commands and
// the layer cache's keys over the small Engine and Container interfaces it
// declares here, which package docker implements. It knows nothing of
// Docker's API: what it needs of an engine is below.
package build

import (
	"context"
	"io"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine/attach"
)

// Engine runs a build's containers and keeps its images.
type Engine interface {
	// BaseImage makes sure spec.BaseImage is present (pulling it when spec
	// allows, saying so through logf) and that an envd build can serve it,
	// before any container starts.
	BaseImage(ctx context.Context, spec engine.BuildSpec, logf func(format string, args ...any)) (Image, error)
	// Start starts a container of spec's build from the image from, with
	// its envd initialised (as root, with a token of its own) and
	// answering. prepare, when set, runs on the container before it starts
	// (only Exists and CopyTo work then). Every image committed from it
	// keeps the configuration of spec.BaseImage.
	Start(ctx context.Context, spec engine.BuildSpec, from string, prepare func(context.Context, Container) error) (Container, error)
	// CommitUnstarted commits the image from as ref, through a container
	// that is created, never started: its only layer is empty.
	CommitUnstarted(ctx context.Context, spec engine.BuildSpec, from, ref string) error
	// ImageRef is the image of a template's build.
	ImageRef(templateID, buildID string) string

	// CacheScope keeps apart the layer caches of servers sharing the
	// engine; it goes into every layer key.
	CacheScope() string
	// Layer returns the state kept with the cached layer of key, when
	// there is one.
	Layer(ctx context.Context, key string) (state []byte, ok bool, err error)
	// LayerRef is the image of the layer of key.
	LayerRef(key string) string
	// TouchLayer marks the layer of key as used now: the cache keeps the
	// most recently used.
	TouchLayer(ctx context.Context, key string)
}

// Image is what a build takes from its base image.
type Image struct {
	ID      string
	Env     map[string]string
	Workdir string
}

// Container is a build container.
type Container interface {
	// Envd is the container's envd client.
	Envd() *client.Client
	// Shell is how commands run in the container.
	Shell(ctx context.Context) (attach.Shell, error)
	// Exists tells whether path exists in the container's files.
	Exists(ctx context.Context, path string) (bool, error)
	// CopyTo extracts the tar archive content into the container at dir,
	// with the ownership and modes its headers give, confined to the
	// container's files. Once the container started, the files are
	// written from inside it, so that its next process sees them under
	// any runtime.
	CopyTo(ctx context.Context, dir string, content io.Reader) error
	// CommitLayer commits the container as the layer of key with state and
	// returns by how much the layer outgrew the image the container
	// started from.
	CommitLayer(ctx context.Context, key string, state []byte) (grown int64, err error)
	// CommitImage commits the container as the build's image ref.
	CommitImage(ctx context.Context, ref string) error
	// Overrun is why the engine stopped the container (its disk limit), or
	// that its files reached their hard disk limit; nil when neither.
	Overrun(ctx context.Context) *engine.DiskOverrun
	// Remove removes the container; a failure is the engine's to log.
	Remove(ctx context.Context)
}

// Options are the limits of the start and ready commands.
type Options struct {
	// ReadyTimeout bounds the ready command loop (design/e2b-api.md,
	// "Start and ready commands").
	ReadyTimeout time.Duration
	// ReadyInterval is the pause between ready command runs.
	ReadyInterval time.Duration
}
