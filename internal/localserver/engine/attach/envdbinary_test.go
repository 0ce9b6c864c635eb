package attach

import (
	"debug/elf"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/testutil"
)

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

// A container gets envd for its image's architecture (an amd64 engine
// runs arm64 images under emulation), the engine's when the image names
// none.
func TestImageEnvdArch(t *testing.T) {
	for _, c := range []struct{ image, engine, want string }{
		{"arm64", "amd64", "arm64"},
		{"amd64", "arm64", "amd64"},
		{"", "arm64", "arm64"},
		{"", "amd64", "amd64"},
		{"aarch64", "amd64", "arm64"},
	} {
		if got, err := imageEnvdArch(c.image, c.engine); err != nil || got != c.want {
			t.Errorf("image %q on %s: %q, %v; want %q", c.image, c.engine, got, err, c.want)
		}
	}
	if _, err := imageEnvdArch("riscv64", "amd64"); err == nil || !strings.Contains(err.Error(), "linux/riscv64") {
		t.Errorf("a riscv64 image: %v, want an error naming its architecture", err)
	}
}

// Without --envd-binary the server's own executable serves its own
// architecture when it is a Linux build; otherwise the release's envd
// build beside it.
func TestEnvdFinderBeside(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "terraform-provider-e2b_v1.2.3")
	testutil.WriteELF(t, filepath.Join(dir, EnvdBinaryName("arm64")), elf.EM_AARCH64)
	testutil.WriteELF(t, filepath.Join(dir, EnvdBinaryName("amd64")), elf.EM_AARCH64) // misnamed
	find := func(goos, goarch, arch string) (string, error) {
		t.Helper()
		f, err := newEnvdFinder(nil, self, goos, goarch)
		if err != nil {
			t.Fatal(err)
		}
		return f.binary(arch)
	}

	if got, err := find("linux", "amd64", "amd64"); err != nil || got != self {
		t.Errorf("linux/amd64 server, amd64 containers: %q, %v; want itself", got, err)
	}
	for _, goos := range []string{"darwin", "windows", "linux"} {
		got, err := find(goos, "amd64", "arm64")
		if err != nil || got != filepath.Join(dir, "envd_linux_arm64") {
			t.Errorf("%s/amd64 server, arm64 containers: %q, %v; want envd_linux_arm64 beside it", goos, got, err)
		}
	}
	_, err := find("darwin", "arm64", "amd64")
	if err == nil || !strings.Contains(err.Error(), "envd_linux_amd64 beside it") || !strings.Contains(err.Error(), "--envd-binary") ||
		!strings.Contains(err.Error(), "linux/arm64 build") {
		t.Errorf("a mismatched file beside: %v, want one error naming the file, what it is and the flag", err)
	}
	os.Remove(filepath.Join(dir, EnvdBinaryName("arm64")))
	if _, err := find("windows", "amd64", "arm64"); err == nil || !strings.Contains(err.Error(), "windows/amd64 build, so it needs envd_linux_arm64 beside it") ||
		!strings.Contains(err.Error(), filepath.Join(dir, "envd_linux_arm64")+": no such file") {
		t.Errorf("no file beside: %v", err)
	}
}

// Explicit builds (--envd-binary) serve the architectures their files are
// for, one each, checked before anything needs them; the others fall back
// to the files beside the server.
func TestEnvdFinderExplicit(t *testing.T) {
	dir := t.TempDir()
	arm, amd := filepath.Join(dir, "arm"), filepath.Join(dir, "amd")
	testutil.WriteELF(t, arm, elf.EM_AARCH64)
	testutil.WriteELF(t, amd, elf.EM_X86_64)
	self := filepath.Join(t.TempDir(), "terraform-provider-e2b")

	f, err := newEnvdFinder([]string{amd, arm}, self, "linux", "amd64")
	if err != nil {
		t.Fatal(err)
	}
	for arch, want := range map[string]string{"amd64": amd, "arm64": arm} {
		if got, err := f.binary(arch); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", arch, got, err, want)
		}
	}

	// Only an arm64 build given: amd64 is this linux/amd64 executable, and
	// nothing serves riscv64.
	f, err = newEnvdFinder([]string{arm}, self, "darwin", "arm64")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.binary("amd64"); err == nil || !strings.Contains(err.Error(), "--envd-binary names none: "+arm) || !strings.Contains(err.Error(), "envd_linux_amd64 beside it") {
		t.Errorf("amd64 with only an arm64 build given: %v, want one error naming the builds given and the file beside", err)
	}
	f, err = newEnvdFinder([]string{arm}, self, "linux", "amd64")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := f.binary("amd64"); err != nil || got != self {
		t.Errorf("amd64 with only an arm64 build given, on linux/amd64: %q, %v; want the executable", got, err)
	}

	other := filepath.Join(dir, "arm-too")
	testutil.WriteELF(t, other, elf.EM_AARCH64)
	if _, err := newEnvdFinder([]string{arm, other}, self, "linux", "amd64"); err == nil || !strings.Contains(err.Error(), "two linux/arm64 builds") {
		t.Errorf("two arm64 builds: %v", err)
	}
	i386 := filepath.Join(dir, "i386")
	testutil.WriteELF(t, i386, elf.EM_386)
	if _, err := newEnvdFinder([]string{i386}, self, "linux", "amd64"); err == nil || !strings.Contains(err.Error(), "EM_386") || !strings.Contains(err.Error(), i386) {
		t.Errorf("a 386 build: %v", err)
	}
	script := filepath.Join(dir, "script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := newEnvdFinder([]string{script}, self, "linux", "amd64"); err == nil || !strings.Contains(err.Error(), "not a Linux executable") {
		t.Errorf("a script: %v", err)
	}
}
