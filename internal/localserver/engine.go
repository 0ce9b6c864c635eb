package localserver

import (
	"context"
	"net"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
)

// Engine is what the server needs to run builds and sandboxes, declared
// here where it is used; engine.Docker is the one in use, tests bring
// stand-ins.
type Engine interface {
	Info(ctx context.Context) (engine.EngineInfo, error)
	// Build blocks until the build ends. Cancelling ctx aborts it and
	// removes its container; failures are *engine.StepError where a step
	// is known.
	Build(ctx context.Context, spec engine.BuildSpec) (*engine.BuildResult, error)
	// StartSandbox is WarmSandbox then InitSandbox, leaving nothing behind
	// on error.
	StartSandbox(ctx context.Context, spec engine.SandboxSpec) (*engine.Sandbox, error)
	// WarmSandbox starts the sandbox's container and waits for its envd
	// without initialising it (the warm pool's containers); InitSandbox
	// hands its envd the token, env, user and workdir and starts the start
	// command.
	WarmSandbox(ctx context.Context, spec engine.SandboxSpec) (*engine.Sandbox, error)
	InitSandbox(ctx context.Context, spec engine.SandboxSpec) error
	// DialSandbox opens a stream to a port inside the sandbox (envd's, or
	// any a sandbox process listens on), for the sandbox proxy.
	DialSandbox(ctx context.Context, sandboxID string, port int) (net.Conn, error)
	// SetSandboxDeadline moves the time at which the sandbox's container
	// ends itself (SandboxSpec.EndAt), so that it ends on time even while
	// the server is down; a zero end clears it.
	SetSandboxDeadline(ctx context.Context, sandboxID string, end time.Time) error
	// PauseSandbox freezes the sandbox's processes, keeping their memory
	// and its file system; ResumeSandbox thaws them, or, when they are
	// gone (the engine restarted), boots the sandbox again from its file
	// system as spec says.
	PauseSandbox(ctx context.Context, sandboxID string) error
	ResumeSandbox(ctx context.Context, spec engine.SandboxSpec) error
	// SandboxMetrics samples the sandbox's CPU, memory and disk use.
	SandboxMetrics(ctx context.Context, sandboxID string) (engine.SandboxMetrics, error)
	// CommitSandbox commits the sandbox's file system as the image of a
	// template's build (a snapshot) and returns its reference.
	CommitSandbox(ctx context.Context, spec engine.SnapshotSpec) (string, error)
	// SandboxLogs returns the lines the sandbox's container wrote at or
	// after since (the zero time: all), oldest first; only among its last
	// lines when last > 0.
	SandboxLogs(ctx context.Context, sandboxID string, since time.Time, last int) ([]engine.LogLine, error)
	// EnforceDiskLimits stops the containers whose files grew past their
	// disk limit (a build then fails) and returns the sandboxes among them.
	EnforceDiskLimits(ctx context.Context) ([]engine.DiskOverrun, error)
	// StopSandbox removes the sandbox's container; an unknown ID is not an error.
	StopSandbox(ctx context.Context, sandboxID string) error
	// WatchSandboxEnds calls ended, until ctx ends, for each sandbox
	// container that exits or is removed other than by StopSandbox.
	WatchSandboxEnds(ctx context.Context, ended func(engine.SandboxEnd))
	// RemoveOrphans removes containers this server created that keepSandbox
	// does not claim (after a crash), including leftover build containers,
	// and the build images of this server that keepImage does not claim
	// (e.g. committed by a build the crash interrupted).
	RemoveOrphans(ctx context.Context, keepSandbox func(sandboxID string) bool, keepImage func(ref string) bool) error
	// RemoveImage removes a build's image when its template is deleted.
	RemoveImage(ctx context.Context, image string) error
}

var _ Engine = (*engine.Docker)(nil)
