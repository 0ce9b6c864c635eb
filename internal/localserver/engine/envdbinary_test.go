package engine

import (
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeELF writes the header of a Linux executable for machine at path.
func writeELF(t *testing.T, path string, machine elf.Machine) {
	t.Helper()
	h := make([]byte, 64)
	copy(h, elf.ELFMAG)
	h[elf.EI_CLASS], h[elf.EI_DATA], h[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	binary.LittleEndian.PutUint16(h[16:], uint16(elf.ET_EXEC))
	binary.LittleEndian.PutUint16(h[18:], uint16(machine))
	binary.LittleEndian.PutUint32(h[20:], uint32(elf.EV_CURRENT))
	binary.LittleEndian.PutUint16(h[52:], 64) // e_ehsize
	if err := os.WriteFile(path, h, 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestEngineArch(t *testing.T) {
	for in, want := range map[string]string{"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"} {
		if got, err := engineArch(in); err != nil || got != want {
			t.Errorf("engineArch(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := engineArch("s390x"); err == nil || !strings.Contains(err.Error(), `"s390x"`) {
		t.Errorf("engineArch(s390x): %v, want an error naming it", err)
	}
}

// The server's own executable serves an engine of its architecture when
// it is a Linux build; otherwise the release's envd build beside it.
func TestEnvdBinaryBeside(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "terraform-provider-e2b_v1.2.3")
	writeELF(t, filepath.Join(dir, EnvdBinaryName("arm64")), elf.EM_AARCH64)
	writeELF(t, filepath.Join(dir, EnvdBinaryName("amd64")), elf.EM_AARCH64) // misnamed

	if got, err := envdBinaryBeside(self, "linux", "amd64", "amd64"); err != nil || got != self {
		t.Errorf("linux/amd64 server, amd64 engine: %q, %v; want itself", got, err)
	}
	for _, goos := range []string{"darwin", "windows", "linux"} {
		got, err := envdBinaryBeside(self, goos, "amd64", "arm64")
		if err != nil || got != filepath.Join(dir, "envd_linux_arm64") {
			t.Errorf("%s/amd64 server, arm64 engine: %q, %v; want envd_linux_arm64 beside it", goos, got, err)
		}
	}
	_, err := envdBinaryBeside(self, "darwin", "arm64", "amd64")
	if err == nil || !strings.Contains(err.Error(), "envd_linux_amd64 beside it") || !strings.Contains(err.Error(), "--envd-binary") {
		t.Errorf("a mismatched file beside: %v, want one error naming the file and the flag", err)
	}
	os.Remove(filepath.Join(dir, EnvdBinaryName("arm64")))
	if _, err := envdBinaryBeside(self, "windows", "amd64", "arm64"); err == nil || !strings.Contains(err.Error(), "windows/amd64 build: it needs envd_linux_arm64 beside it") {
		t.Errorf("no file beside: %v", err)
	}
}

// An explicit --envd-binary must be a Linux build for the engine.
func TestEnvdBinaryExplicit(t *testing.T) {
	dir := t.TempDir()
	arm := filepath.Join(dir, "arm")
	writeELF(t, arm, elf.EM_AARCH64)
	if got, err := EnvdBinaryFor("arm64", arm); err != nil || got != arm {
		t.Errorf("matching binary: %q, %v", got, err)
	}
	if _, err := EnvdBinaryFor("amd64", arm); err == nil || !strings.Contains(err.Error(), "EM_AARCH64") || !strings.Contains(err.Error(), "amd64") {
		t.Errorf("arm64 binary for an amd64 engine: %v", err)
	}
	script := filepath.Join(dir, "script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := EnvdBinaryFor("amd64", script); err == nil || !strings.Contains(err.Error(), "not a Linux executable") {
		t.Errorf("a script: %v", err)
	}
}
