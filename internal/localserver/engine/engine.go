// Package engine is what the local server and its engine share: the specs
// of builds, sandboxes and snapshots, what the engine reports back, and the
// vocabularies of the server's engine flags. It runs nothing: the Docker
// engine is package docker below it, E2B's build steps package build, and
// the channel to envd in every container package attach
// (design/local-server.md, "The engine's rooms").
package engine

import (
	"fmt"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
)

// BuildSpec is everything a build needs, already resolved by the API layer.
type BuildSpec struct {
	TemplateID string
	BuildID    string
	// BaseImage is the Docker image to start from: fromImage, or FromBuild.Image.
	BaseImage string
	// PullBase pulls BaseImage when it is absent (fromImage only).
	PullBase     bool
	RegistryAuth *e2b.FromImageRegistry
	// FromBuild is the ready build fromTemplate resolved to, whose final user,
	// workdir and env this build starts with; nil for fromImage.
	FromBuild *BuildResult
	// Force rebuilds every phase instead of starting from cached layers;
	// a step's own Force does so from that step on, as on E2B.
	Force bool
	Steps []e2b.TemplateStep
	// Archives maps each COPY step's filesHash to the stored archive on disk.
	Archives map[string]string
	StartCmd string
	ReadyCmd string
	CPUCount int32
	MemoryMB int32
	// Log receives every build log line in order, from one goroutine.
	Log func(e2b.BuildLogEntry)
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

// SnapshotSpec names a sandbox to commit as a build of a template.
type SnapshotSpec struct {
	SandboxID  string
	TemplateID string
	BuildID    string
	// Image is the image the sandbox runs (its build's), whose user,
	// command and entrypoint the snapshot keeps.
	Image string
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
	// Runtime is the runtime of the server's sandbox and build containers.
	Runtime Runtime
	OS      string
	// Arch is the engine's architecture, as the engine names it.
	Arch string
	// EnvdBinary is the envd build put into containers of the engine's
	// architecture (others get theirs when first needed).
	EnvdBinary string
	// UserNamespace tells whether the engine runs containers in a user
	// namespace of their own (dockerd --userns-remap), so that root in a
	// container is not root of the host.
	UserNamespace bool
	// Setuid tells whether setuid programs (sudo) work in the server's
	// containers (SetuidAllowed).
	Setuid bool
	// DiskLimit is how the disk limit of sandbox and build containers
	// holds: DiskLimitHard, DiskLimitWatchdog or DiskLimitNone.
	DiskLimit string
}

// How a container's disk limit holds (EngineInfo.DiskLimit).
const (
	// DiskLimitHard: the storage driver's quota; writes past it fail.
	DiskLimitHard = "hard"
	// DiskLimitWatchdog: a container that grew past it is stopped.
	DiskLimitWatchdog = "watchdog"
	// DiskLimitNone: no disk limit (--disk-size-mb -1).
	DiskLimitNone = "none"
)

// SetuidAllowed tells whether sandbox and build containers run without
// no-new-privileges, so that sudo and other setuid programs work as on
// E2B: only where root in a container is not root of the host, under
// gVisor (a kernel of its own; registered with --allow-suid, without which
// it ignores the setuid bit) or in a user namespace of the engine's, and
// not on the host's network (which runs in the host's user namespace).
func SetuidAllowed(runtime Runtime, userNamespace bool, network string) bool {
	if network == NetworkHost {
		return false
	}
	if runtime.GVisor {
		return runtime.AllowSuid
	}
	return userNamespace
}
