//go:build unix

package buildcontext

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/testutil"
)

func TestHashVectors(t *testing.T) {
	v := loadVectors(t)
	ctxDir := newTree(t, v.Entries...)
	dirSize := int64(-1)
	if fi, err := os.Stat(filepath.Join(ctxDir, "app")); err == nil {
		dirSize = fi.Size()
	}
	for _, vec := range v.Vectors {
		t.Run(vec.Src+"->"+vec.Dest, func(t *testing.T) {
			if got := portable(t, ctxDir, vec.Src, vec.Dest); got != vec.PortableV1 {
				t.Errorf("portable v1 = %s, want %s (entries %v)", got, vec.PortableV1, paths(mustList(t, ctxDir, vec.Src, ListOptions{})))
			}
			if vec.DependsOnDirSize && dirSize != 4096 {
				t.Skipf("SDK vector needs 4096-byte directories; this filesystem reports %d", dirSize)
			}
			if sdk := sdkHash(t, ctxDir, vec.Src, vec.Dest, HashOptions{}).Hash; sdk != vec.E2BSDK {
				t.Errorf("SDK hash = %s, want %s", sdk, vec.E2BSDK)
			}
		})
	}
}

// TestSDKWorkedExample checks the concatenated input of design/e2b-api.md §2 example 2 directly.
func TestSDKWorkedExample(t *testing.T) {
	ctxDir := newTree(t, file("top.txt", "x"), dir("app"), file("app/a.txt", "hello\n"),
		link("app/link", "a.txt"), dir("app/sub"), file("app/sub/b.txt", "world"))
	if fi, _ := os.Stat(filepath.Join(ctxDir, "app")); fi.Size() != 4096 {
		t.Skipf("needs 4096-byte directories; this filesystem reports %d", fi.Size())
	}
	got := sdkHash(t, ctxDir, "app", "/app", HashOptions{}).Hash
	if want := "4d41435b27db328212348efa0a9ebfa1757ef12a9cde407c88a10aa29f80ff9e"; got != want {
		t.Errorf("SDK hash = %s, want %s", got, want)
	}
}

// pythonReference is the reference implementation of the portable hash
// (design/hashing.md §2), run as: python3 pythonReference CONTEXT SRC DEST.
const pythonReference = "testdata/portable_hash_v1_reference.py"

// TestPortableHashMatchesPythonReference compares the portable hash with the
// Python reference over trees beyond the vectors; python3 is a prerequisite
// (testutil.Missing).
func TestPortableHashMatchesPythonReference(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		testutil.Missing(t, "python3 is not on PATH, so the portable hash is not compared with %s (TestHashVectors still checks the vectors)", pythonReference)
	}
	v := loadVectors(t)
	ctxDir := newTree(t, append(v.Entries, file("app/sub/deeper/z.bin", "zz"), link("app/sub/dl", "../nowhere"))...)
	for _, src := range []string{"app", "app/sub", "docs", "top.txt", "app/link"} {
		out, err := exec.Command(py, pythonReference, ctxDir, src, "/d").Output()
		if err != nil {
			var stderr []byte
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				stderr = ee.Stderr
			}
			t.Fatalf("%s for %s: %v\n%s", pythonReference, src, err, stderr)
		}
		if len(out) < 64 {
			t.Fatalf("%s for %s printed %q, want a hex digest", pythonReference, src, out)
		}
		if got, want := portable(t, ctxDir, src, "/d"), string(out[:64]); got != want {
			t.Errorf("%s: portable = %s, reference = %s", src, got, want)
		}
	}
}

func TestPortableHashIgnoresMachineDetails(t *testing.T) {
	v := loadVectors(t)
	base := newTree(t, v.Entries...)
	want := portable(t, base, "app", "/app")

	oldMask := syscall.Umask(0o077)
	other := newTree(t, v.Entries...)
	syscall.Umask(oldMask)
	past := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	setMtimes(t, other, past)
	if err := os.Chmod(filepath.Join(other, "app/a.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(other, "app/sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Lchown(filepath.Join(other, "app/a.txt"), 1234, 5678); err != nil {
			t.Fatal(err)
		}
	}
	if got := portable(t, other, "app", "/app"); got != want {
		t.Errorf("hash changed with umask/mtime/owner/0600: %s, want %s", got, want)
	}
}

func TestPortableHashChangesWithWhatMatters(t *testing.T) {
	v := loadVectors(t)
	baseline := portable(t, newTree(t, v.Entries...), "app", "/app")
	changes := map[string]func(dir string) error{
		"content":  func(d string) error { return os.WriteFile(filepath.Join(d, "app/a.txt"), []byte("hellO\n"), 0o644) },
		"exec bit": func(d string) error { return os.Chmod(filepath.Join(d, "app/a.txt"), 0o744) },
		"path": func(d string) error {
			return os.Rename(filepath.Join(d, "app/a.txt"), filepath.Join(d, "app/a2.txt"))
		},
		"link target": func(d string) error {
			p := filepath.Join(d, "app/link")
			os.Remove(p)
			return os.Symlink("run.sh", p)
		},
		"new empty dir": func(d string) error { return os.Mkdir(filepath.Join(d, "app/empty"), 0o755) },
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			d := newTree(t, v.Entries...)
			if err := change(d); err != nil {
				t.Fatal(err)
			}
			if got := portable(t, d, "app", "/app"); got == baseline {
				t.Errorf("hash unchanged after changing the %s", name)
			}
		})
	}
	d := newTree(t, v.Entries...)
	if portable(t, d, "app", "/other") == baseline {
		t.Error("hash unchanged after changing dest")
	}
}

// TestSDKHashOfContextRoot builds the SDK's input by hand for src ".": the JS SDK names the
// context itself "" and, sorting by absolute path, hashes it first, even before "-a" and
// the directory "-d" with its file, which sort before "." as relative paths (and so come
// before it in the walk).
func TestSDKHashOfContextRoot(t *testing.T) {
	d := newTree(t, file("-a", "A"), dir("-d"), file("-d/x", "X"), file("b.sh", "B"))
	if err := os.Chmod(filepath.Join(d, "b.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	l := mustList(t, d, ".", ListOptions{})
	if got := paths(l); strings.Join(got, " ") != "-a -d -d/x . b.sh" {
		t.Fatalf("listing order %q, want byte order of relative paths", got)
	}
	stat := func(name string) os.FileInfo {
		fi, err := os.Stat(filepath.Join(d, name))
		if err != nil {
			t.Fatal(err)
		}
		return fi
	}
	root, sub := stat("."), stat("-d")
	input := fmt.Sprintf("COPY . /d%s%d%d%s%d%d%s%s%d%d%s%d%d%s%s%d%d%s", "", 0o40000|root.Mode().Perm(), root.Size(),
		"-a", 0o100644, 1, "A", "-d", 0o40000|sub.Mode().Perm(), sub.Size(), "-d/x", 0o100644, 1, "X",
		"b.sh", 0o100755, 1, "B")
	want := fmt.Sprintf("%x", sha256.Sum256([]byte(input)))
	if got := sdkHash(t, d, ".", "/d", HashOptions{}); got.Hash != want || got.Entries != 5 {
		t.Errorf("SDK hash %s over %d entries, want %s over 5 (input %q)", got.Hash, got.Entries, want, input)
	}
}

// TestStreamSDKHashOnRandomTrees compares the streamed SDK-compatible hash with the SDK's
// input built by hand from a listing (sdkReference) on random trees whose root has names
// sorting before "." (symlinks resolved or not), without a digest cache, with a cold one,
// with the same cache warm (no file read) and with its step hash lost (every file read,
// once); the fingerprint is the same in all.
func TestStreamSDKHashOnRandomTrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8)) // reproducible trees
	for tree := range 40 {
		entries := randomTree(rng, true)
		if tree%4 == 0 {
			entries = append(entries, dir("#d"), file("#d/f", "early"), file("+", "plus"))
		}
		d := newTree(t, entries...)
		setMtimes(t, d, time.Now().Add(-time.Hour))
		opts := ListOptions{ResolveLinks: tree%2 == 1}
		l, err := List(d, ".", opts)
		if err != nil {
			// Links may make a loop, which the stream must refuse as well.
			if _, streamErr := StreamSDKHash(t.Context(), d, ".", "/d", opts, HashOptions{}); streamErr == nil {
				t.Fatalf("tree %d: the listing fails (%v), the stream does not", tree, err)
			}
			continue
		}
		want := sdkReference(t, l, "/d")
		files := 0
		for _, e := range l.Entries {
			if e.Kind == KindFile {
				files++
			}
		}
		cachePath := filepath.Join(t.TempDir(), "cache")
		fingerprint := ""
		// Without a cache, cold, warm (the next plan), and without the step record.
		for run := range 4 {
			var ho HashOptions
			if run > 0 {
				if run == 3 {
					dropStepRecords(t, cachePath)
				}
				ho.Cache = OpenStatCache(cachePath)
			}
			got, err := StreamSDKHash(t.Context(), d, ".", "/d", opts, ho)
			if err != nil {
				t.Fatal(err)
			}
			if ho.Cache != nil {
				mustDo(t, ho.Cache.Save())
			}
			if got.Hash != want || got.Entries != len(l.Entries) {
				t.Fatalf("tree %d run %d: streamed %s over %d entries, want %s over %d", tree, run, got.Hash, got.Entries, want, len(l.Entries))
			}
			wantStats := DigestStats{Read: files, BytesRead: got.Stats.BytesRead}
			if run == 2 {
				wantStats = DigestStats{Cached: files}
			}
			if got.Stats != wantStats || (run != 2 && got.Stats.BytesRead != totalSize(l)) {
				t.Fatalf("tree %d run %d: stats %+v, want %+v of %d bytes", tree, run, got.Stats, wantStats, totalSize(l))
			}
			if fingerprint == "" {
				fingerprint = got.Fingerprint
			}
			if len(got.Fingerprint) != 64 || got.Fingerprint != fingerprint {
				t.Fatalf("tree %d run %d: fingerprint %q, the first run's %q", tree, run, got.Fingerprint, fingerprint)
			}
			if !slices.Equal(got.Newest, l.Newest(NewestKept)) {
				t.Fatalf("tree %d: newest %q, the listing's %q", tree, got.Newest, l.Newest(NewestKept))
			}
		}
	}
}

// sdkReference is the SDK's hash of the listed step (design/e2b-api.md §2) built from its
// definition: the entries sorted by absolute path, the context itself named "", each
// path, st_mode, st_size, link target or file bytes concatenated after "COPY src dest".
func sdkReference(t *testing.T, l *Listing, dest string) string {
	t.Helper()
	entries := slices.Clone(l.Entries)
	abs := func(e Entry) string { return filepath.Join(l.Context, e.Path) }
	slices.SortStableFunc(entries, func(a, b Entry) int { return strings.Compare(abs(a), abs(b)) })
	input := []byte("COPY " + l.Src + " " + dest)
	for _, e := range entries {
		if e.Path != "." {
			input = append(input, e.Path...)
		}
		input = fmt.Appendf(input, "%d%d", e.ID.Mode, e.Size)
		switch e.Kind {
		case KindSymlink:
			input = append(input, e.LinkTarget...)
		case KindFile:
			content, err := os.ReadFile(l.sourcePath(&e))
			if err != nil {
				t.Fatal(err)
			}
			input = append(input, content...)
		}
	}
	return fmt.Sprintf("%x", sha256.Sum256(input))
}

func totalSize(l *Listing) int64 {
	var n int64
	for _, e := range l.Entries {
		if e.Kind == KindFile {
			n += e.Size
		}
	}
	return n
}

// TestStreamPortableHashOnRandomTrees compares the streamed hash with the listing's on
// random trees (names that extend one another, symlinks, resolved or not), without a
// digest cache, with a cold one and with the same cache warm, and checks its counts.
func TestStreamPortableHashOnRandomTrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4)) // reproducible trees
	for tree := range 60 {
		d := newTree(t, randomTree(rng, true)...)
		setMtimes(t, d, time.Now().Add(-time.Hour))
		opts := ListOptions{ResolveLinks: tree%2 == 1}
		l, err := List(d, ".", opts)
		if err != nil {
			t.Fatal(err)
		}
		want, err := l.PortableHash(t.Context(), "/d", HashOptions{})
		if err != nil {
			t.Fatal(err)
		}
		files := 0
		for _, e := range l.Entries {
			if e.Kind == KindFile {
				files++
			}
		}
		cachePath := filepath.Join(t.TempDir(), "cache")
		for run, ho := range []HashOptions{{}, {Cache: OpenStatCache(cachePath)}, {Workers: 1}} {
			if run == 2 { // the next plan
				ho.Cache = OpenStatCache(cachePath)
			}
			got, err := StreamPortableHash(t.Context(), d, ".", "/d", opts, ho)
			if err != nil {
				t.Fatal(err)
			}
			if ho.Cache != nil {
				mustDo(t, ho.Cache.Save())
			}
			if got.Hash != want || got.Entries != len(l.Entries) || got.Stats.Cached+got.Stats.Read != files {
				t.Fatalf("tree %d run %d: streamed %s over %d entries (%+v), want %s over %d entries, %d files",
					tree, run, got.Hash, got.Entries, got.Stats, want, len(l.Entries), files)
			}
			if run == 2 && got.Stats.Read != 0 {
				t.Fatalf("tree %d: the warm run read %d files", tree, got.Stats.Read)
			}
			if !slices.Equal(got.Newest, l.Newest(NewestKept)) {
				t.Fatalf("tree %d: newest %q, the listing's %q", tree, got.Newest, l.Newest(NewestKept))
			}
		}
	}
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
