// Package engine runs the local server's template builds and sandboxes as
// Docker containers with our envd inside. The API layer decides what to run
// and records results; this package only knows how to run it.
package engine

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
)

// BuildSpec is everything a build needs, already resolved by the API layer.
type BuildSpec struct {
	TemplateID string
	BuildID    string
	// BaseImage is the Docker image to start from: fromImage, or FromBuild.Image.
	BaseImage string
	// PullBase pulls BaseImage when it is absent (fromImage only).
	PullBase     bool
	RegistryAuth *e2bapi.FromImageRegistry
	// FromBuild is the ready build fromTemplate resolved to, whose final user,
	// workdir and env this build starts with; nil for fromImage.
	FromBuild *BuildResult
	// Force rebuilds every phase instead of starting from cached layers;
	// a step's own Force does so from that step on, as on E2B.
	Force bool
	Steps []e2bapi.TemplateStep
	// Archives maps each COPY step's filesHash to the stored archive on disk.
	Archives map[string]string
	StartCmd string
	ReadyCmd string
	CPUCount int32
	MemoryMB int32
	// Log receives every build log line in order, from one goroutine.
	Log func(e2bapi.BuildLogEntry)
}

// BuildResult is the state a finished build leaves for its sandboxes.
type BuildResult struct {
	// Image is the committed Docker image of the build.
	Image    string
	User     string
	Workdir  string
	Env      map[string]string
	StartCmd string
	ReadyCmd string
	// EnvdVersion is the envd protocol version sandboxes of this build speak.
	EnvdVersion string
}

// StepError is a build failure attributed to a step: "base", "1".."N"
// (1-based into BuildSpec.Steps) or "finalize".
type StepError struct {
	Step string
	Err  error
}

func (e *StepError) Error() string { return fmt.Sprintf("step %s: %v", e.Step, e.Err) }
func (e *StepError) Unwrap() error { return e.Err }

// SandboxSpec describes a sandbox to start from a ready build.
type SandboxSpec struct {
	SandboxID   string
	TemplateID  string
	BuildID     string
	Image       string
	User        string
	Workdir     string
	Env         map[string]string
	StartCmd    string
	AccessToken string
	CPUCount    int32
	MemoryMB    int32
	// EndAt, when set, is when the container ends itself, server or not;
	// SetSandboxDeadline moves it.
	EndAt time.Time
}

// Sandbox is a running sandbox container.
type Sandbox struct {
	ID          string
	ContainerID string
	EnvdVersion string
}

// EngineInfo is what the server logs at start-up about the engine it found.
type EngineInfo struct {
	ServerVersion string
	APIVersion    string
	Runtime       string
	OS            string
	// Arch is the engine's architecture, as the engine names it.
	Arch string
	// EnvdBinary is the envd build put into containers.
	EnvdBinary string
}

// Engine runs builds and sandboxes.
type Engine interface {
	Info(ctx context.Context) (EngineInfo, error)
	// Build blocks until the build ends. Cancelling ctx aborts it and
	// removes its container; failures are *StepError where a step is known.
	Build(ctx context.Context, spec BuildSpec) (*BuildResult, error)
	StartSandbox(ctx context.Context, spec SandboxSpec) (*Sandbox, error)
	// DialSandbox opens a stream to a port inside the sandbox (envd's
	// 49983, or any a sandbox process listens on), for the sandbox proxy.
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
	ResumeSandbox(ctx context.Context, spec SandboxSpec) error
	// SandboxMetrics samples the sandbox's CPU, memory and disk use.
	SandboxMetrics(ctx context.Context, sandboxID string) (SandboxMetrics, error)
	// CommitSandbox commits the sandbox's file system as the image of a
	// template's build (a snapshot) and returns its reference.
	CommitSandbox(ctx context.Context, spec SnapshotSpec) (string, error)
	// SandboxLogs returns the lines the sandbox's container wrote, oldest
	// first.
	SandboxLogs(ctx context.Context, sandboxID string) ([]LogLine, error)
	// StopSandbox removes the sandbox's container; an unknown ID is not an error.
	StopSandbox(ctx context.Context, sandboxID string) error
	// RemoveOrphans removes containers this server created that keepSandbox
	// does not claim (after a crash), including leftover build containers,
	// and the build images of this server that keepImage does not claim
	// (e.g. committed by a build the crash interrupted).
	RemoveOrphans(ctx context.Context, keepSandbox func(sandboxID string) bool, keepImage func(ref string) bool) error
	// RemoveImage removes a build's image when its template is deleted.
	RemoveImage(ctx context.Context, image string) error
}
