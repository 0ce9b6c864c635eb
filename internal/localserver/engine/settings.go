package engine

import "errors"

// Network modes of sandbox and build containers.
const (
	// NetworkNone (the default) gives every container a network namespace
	// of its own, reached only through its channel.
	NetworkNone = "none"
	// NetworkHost shares the host's network: unsafe for untrusted code.
	NetworkHost = "host"
)

// RuntimeAuto chooses gVisor when the engine offers a gVisor runtime that
// passes the self-test, else the engine's default runtime (with a warning).
const RuntimeAuto = "auto"

// Runtime is the OCI runtime every sandbox and build container runs under.
type Runtime struct {
	// Name is the engine's name of the runtime ("runc", "runsc").
	Name string
	// GVisor tells whether it is gVisor's runsc: containers then have a
	// kernel of their own (design/local-server.md, "Runtimes").
	GVisor bool
	// AllowSuid tells whether gVisor runs setuid programs with their
	// owner's IDs: runsc ignores the setuid bit unless the engine
	// registered it with --allow-suid.
	AllowSuid bool
}

// Default limits of the engine's containers and caches.
const (
	// DefaultPidsLimit is the default cap on a container's processes.
	DefaultPidsLimit = 4096
	// DefaultDiskSizeMB is the default disk limit of a sandbox or build
	// container, the disk of E2B's base tier (10 GiB).
	DefaultDiskSizeMB = 10 << 10
	// DefaultInodesPerSandbox is the default file limit of a sandbox or
	// build container's writable layer (--inodes-per-sandbox): as many
	// inodes as mke2fs gives an ext4 file system of the default disk size
	// (one per 16 KiB), so that a template that fits such a disk never
	// meets it; the Debian image holds 8,954 files (docs/guides/
	// sandbox-security.md, "Disk and the engine's logs").
	DefaultInodesPerSandbox = DefaultDiskSizeMB << 20 / (16 << 10)
	// DefaultLayerCacheSize is how many build layer images a server keeps.
	DefaultLayerCacheSize = 100
)

// ErrPortNotRelayed is the answer for a port other than envd's in a
// host-network container: there the sandbox's loopback is the host's, and
// relaying to it would open every host loopback service to whoever can
// reach the sandbox proxy.
var ErrPortNotRelayed = errors.New("with host networking only envd's port is relayed; the sandbox's ports are the host's own")
