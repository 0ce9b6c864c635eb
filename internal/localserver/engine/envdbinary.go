package engine

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// envdArches are the engine architectures a release carries envd for, by
// the names `docker info` gives (Go's and the kernel's).
var envdArches = map[string]string{
	"amd64": "amd64", "x86_64": "amd64",
	"arm64": "arm64", "aarch64": "arm64",
}

// elfMachines are the ELF machines of envdArches' Go architectures.
var elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// engineArch is the Go architecture of an engine that reports arch.
func engineArch(arch string) (string, error) {
	if goarch, ok := envdArches[arch]; ok {
		return goarch, nil
	}
	return "", fmt.Errorf("the Docker engine runs on %q: sandboxes run on amd64 (x86_64) and arm64 (aarch64) engines only", arch)
}

// EnvdBinaryName is the file name of the envd build for arch that a
// release carries beside the provider binary.
func EnvdBinaryName(arch string) string { return "envd_linux_" + arch }

// EnvdBinaryFor finds the envd binary for a Linux engine of arch (a Go
// architecture): explicit when given (it must be a Linux build of arch),
// else this executable when it is one, else EnvdBinaryName(arch) beside
// it. What cannot serve the engine is one error saying what to do.
func EnvdBinaryFor(arch, explicit string) (string, error) {
	if explicit != "" {
		abs, err := filepath.Abs(explicit)
		if err != nil {
			return "", fmt.Errorf("--envd-binary %s: %w", explicit, err)
		}
		if err := checkLinuxBinary(abs, arch); err != nil {
			return "", fmt.Errorf("--envd-binary %s cannot run on the Docker engine: %w", explicit, err)
		}
		return abs, nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find this executable (set --envd-binary to a linux/%s build of it): %w", arch, err)
	}
	return envdBinaryBeside(self, runtime.GOOS, runtime.GOARCH, arch)
}

// envdBinaryBeside is EnvdBinaryFor without an explicit binary, for the
// executable self built for goos/goarch.
func envdBinaryBeside(self, goos, goarch, arch string) (string, error) {
	if goos == "linux" && goarch == arch {
		return self, nil
	}
	beside := filepath.Join(filepath.Dir(self), EnvdBinaryName(arch))
	if err := checkLinuxBinary(beside, arch); err != nil {
		return "", fmt.Errorf("the Docker engine runs linux/%s and this server is a %s/%s build: it needs %s beside it (every release archive carries it) or --envd-binary naming a linux/%s build of this provider: %w",
			arch, goos, goarch, EnvdBinaryName(arch), arch, err)
	}
	return beside, nil
}

// checkLinuxBinary checks that path is a static Linux executable of arch.
func checkLinuxBinary(path, arch string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("not a Linux executable: %w", err)
	}
	defer f.Close()
	if f.Machine != elfMachines[arch] {
		return fmt.Errorf("it is built for %s, the engine runs %s", f.Machine, arch)
	}
	return nil
}
