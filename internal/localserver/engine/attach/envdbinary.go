package attach

import (
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// envdArches are the architectures a release carries envd for, by the
// names Docker gives them: `docker info` gives the kernel's (x86_64,
// aarch64), an image's configuration Go's (amd64, arm64).
var envdArches = map[string]string{
	"amd64": "amd64", "x86_64": "amd64",
	"arm64": "arm64", "aarch64": "arm64",
}

// elfArches are the Go architectures of envdArches by ELF machine.
var elfArches = map[elf.Machine]string{elf.EM_X86_64: "amd64", elf.EM_AARCH64: "arm64"}

// engineArch is the Go architecture of an engine that reports arch: the
// default of images that name none, and what the server needs envd for
// at start-up.
func engineArch(arch string) (string, error) {
	if goarch, ok := envdArches[arch]; ok {
		return goarch, nil
	}
	return "", fmt.Errorf("the Docker engine runs on %q: sandboxes run on amd64 (x86_64) and arm64 (aarch64) engines only", arch)
}

// imageEnvdArch is the architecture of the envd build that containers of
// an image built for imageArch (its configuration's Architecture) need:
// the engine's, engineArch, when the image names none.
func imageEnvdArch(imageArch, engineArch string) (string, error) {
	if imageArch == "" {
		return engineArch, nil
	}
	if arch, ok := envdArches[imageArch]; ok {
		return arch, nil
	}
	return "", fmt.Errorf("it is built for linux/%s, and envd runs on amd64 and arm64 only", imageArch)
}

// EnvdBinaryName is the file name of the envd build for arch that a
// release carries beside the provider binary.
func EnvdBinaryName(arch string) string { return "envd_linux_" + arch }

// envdFinder finds the envd build for an architecture (a Go one): the
// explicit one of it (--envd-binary) when given, else this executable
// when it is a Linux build of it, else EnvdBinaryName(arch) beside this
// executable.
type envdFinder struct {
	// explicit are the explicit builds by architecture; given lists them
	// as they were given, for errors.
	explicit map[string]string
	given    []string
	// self is this executable ("" when unknown), built for goos/goarch.
	self, goos, goarch string
}

// newEnvdFinder checks the explicit builds (each a Linux executable of an
// architecture envd is built for, one per architecture) before anything
// needs them: a wrong one is an error at start-up.
func newEnvdFinder(explicit []string, self, goos, goarch string) (envdFinder, error) {
	f := envdFinder{explicit: map[string]string{}, given: explicit, self: self, goos: goos, goarch: goarch}
	for _, p := range explicit {
		abs, err := filepath.Abs(p)
		if err != nil {
			return f, fmt.Errorf("--envd-binary %s: %w", p, err)
		}
		arch, err := elfArch(abs)
		if err != nil {
			return f, fmt.Errorf("--envd-binary %s cannot run in containers: %w", p, err)
		}
		if other, ok := f.explicit[arch]; ok {
			return f, fmt.Errorf("--envd-binary names two linux/%s builds, %s and %s: give one per architecture", arch, other, abs)
		}
		f.explicit[arch] = abs
	}
	return f, nil
}

// thisEnvdFinder is newEnvdFinder for this executable.
func thisEnvdFinder(explicit []string) (envdFinder, error) {
	self, err := os.Executable()
	if err != nil {
		self = "" // binary says so when it needs it
	}
	return newEnvdFinder(explicit, self, runtime.GOOS, runtime.GOARCH)
}

// binary is the envd build for containers of arch, or one error saying
// where it was looked for and what to do.
func (f envdFinder) binary(arch string) (string, error) {
	if p, ok := f.explicit[arch]; ok {
		return p, nil
	}
	var given string
	if len(f.given) > 0 {
		given = fmt.Sprintf(" (--envd-binary names none: %s)", strings.Join(f.given, ", "))
	}
	if f.self == "" {
		return "", fmt.Errorf("no envd build for linux/%s%s, and this executable cannot be found to look beside it: set --envd-binary to a linux/%s build of this provider", arch, given, arch)
	}
	if f.goos == "linux" && f.goarch == arch {
		return f.self, nil
	}
	beside := filepath.Join(filepath.Dir(f.self), EnvdBinaryName(arch))
	got, err := elfArch(beside)
	if err == nil && got != arch {
		err = fmt.Errorf("it is a linux/%s build", got)
	}
	if err != nil {
		return "", fmt.Errorf("no envd build for linux/%s%s: this server is a %s/%s build, so it needs %s beside it (every release archive carries it) or --envd-binary naming a linux/%s build of this provider: %s: %w",
			arch, given, f.goos, f.goarch, EnvdBinaryName(arch), arch, beside, err)
	}
	return beside, nil
}

// elfArch is the architecture of the Linux executable at path, one envd
// is built for.
func elfArch(path string) (string, error) {
	f, err := elf.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", errors.New("no such file")
	}
	if err != nil {
		return "", fmt.Errorf("not a Linux executable: %w", err)
	}
	defer f.Close()
	arch, ok := elfArches[f.Machine]
	if !ok {
		return "", fmt.Errorf("it is built for %s: envd runs on amd64 and arm64 only", f.Machine)
	}
	return arch, nil
}
