package engine

import (
	"fmt"
	"time"
)

// SandboxMetrics is one sample of a sandbox's resource use
// (design/e2b-api.md, "Metrics and logs").
type SandboxMetrics struct {
	Time       time.Time
	CPUCount   int32
	CPUUsedPct float64
	// Memory in bytes: used excludes the page cache, as `free` does.
	MemUsed, MemTotal, MemCache int64
	// DiskUsed is the size of the sandbox's file system (image and
	// changes); DiskTotal its disk limit, 0 when it has none.
	DiskUsed, DiskTotal int64
}

// LogLine is one line a sandbox's container wrote, with the time the
// engine received it.
type LogLine struct {
	Time time.Time
	Text string
}

// SandboxEnd is the end of a sandbox's container that the server did not
// cause: its processes exited (envd killed, the container's own deadline),
// the engine killed it, or someone removed it.
type SandboxEnd struct {
	SandboxID string
	// Removed tells a container removed ("destroy") from one that exited
	// ("die", with ExitCode).
	Removed  bool
	ExitCode string
}

// DiskOverrun is a container whose file system grew past its disk limit
// or its file limit, stopped for it, or, under a hard limit, one whose
// writes failed at it.
type DiskOverrun struct {
	// SandboxID is the sandbox's ID; empty for a build container.
	SandboxID string
	BuildID   string
	// Used and Limit are in bytes: the size of the container's file system
	// (image and changes) as the engine measured it, with Held, and its
	// limit.
	Used, Limit int64
	// Held is the part of Used held by files deleted but still open.
	Held int64
	// Files and FileLimit: the entries of the container's writable layer
	// (files it added, changed or deleted), when they passed FileLimit
	// (--inodes-per-sandbox).
	Files, FileLimit int64
	// Unmeasured: the container was stopped because it could not be
	// measured, and why.
	Unmeasured string
	// Hard: the limit is the storage driver's; the container was not
	// stopped, its writes past the limit failed.
	Hard bool
}

func (o *DiskOverrun) Error() string {
	what := "the sandbox's"
	if o.SandboxID == "" {
		what = "the build container's"
	}
	switch {
	case o.Unmeasured != "":
		return fmt.Sprintf("%s files could not be measured against its limits: %s: it was stopped", what, o.Unmeasured)
	case o.Files > 0:
		return fmt.Sprintf("%s files grew to %d, past the file limit of %d (--inodes-per-sandbox): it was stopped", what, o.Files, o.FileLimit)
	case o.Hard:
		return fmt.Sprintf("%s files reached the disk limit of %d MiB (%d MiB): writes past it failed", what, o.Limit>>20, o.Used>>20)
	case o.Held > 0:
		return fmt.Sprintf("%s files grew to %d MiB (%d MiB of them deleted but still open), past the disk limit of %d MiB: it was stopped", what, o.Used>>20, o.Held>>20, o.Limit>>20)
	}
	return fmt.Sprintf("%s files grew to %d MiB, past the disk limit of %d MiB: it was stopped", what, o.Used>>20, o.Limit>>20)
}
