//go:build unix

package buildcontext

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func archiveBytes(t *testing.T, l *Listing) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := l.WriteArchive(t.Context(), &buf); err != nil {
		t.Fatalf("WriteArchive: %v", err)
	}
	return buf.Bytes()
}

func hashedListing(t *testing.T, ctxDir, src string) *Listing {
	t.Helper()
	l := mustList(t, ctxDir, src, ListOptions{})
	if _, err := l.PortableHash(t.Context(), "/dest", HashOptions{}); err != nil {
		t.Fatal(err)
	}
	return l
}

func TestArchiveIsDeterministic(t *testing.T) {
	v := loadVectors(t)
	a := newTree(t, v.Entries...)
	first := archiveBytes(t, hashedListing(t, a, "."))
	if again := archiveBytes(t, hashedListing(t, a, ".")); !bytes.Equal(first, again) {
		t.Fatal("two archives of the same tree differ")
	}

	oldMask := syscall.Umask(0o027)
	b := newTree(t, v.Entries...)
	syscall.Umask(oldMask)
	past := time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC)
	setMtimes(t, b, past)
	if err := os.Chmod(filepath.Join(b, "app/a.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	if other := archiveBytes(t, hashedListing(t, b, ".")); !bytes.Equal(first, other) {
		t.Fatal("archives of two copies of the tree (other umask, mtimes, 0600) differ")
	}
}

func TestArchiveContents(t *testing.T) {
	v := loadVectors(t)
	d := newTree(t, v.Entries...)
	l := hashedListing(t, d, "app")
	path, size, err := l.SpoolArchive(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(data)) != size {
		t.Errorf("SpoolArchive size = %d, file has %d bytes", size, len(data))
	}
	if !bytes.Equal(data, archiveBytes(t, l)) {
		t.Error("spooled archive differs from the streamed one")
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	type got struct {
		typ      byte
		mode     int64
		linkname string
		body     string
	}
	entries := map[string]got{}
	var order []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || !h.ModTime.Equal(archiveModTime) {
			t.Errorf("%s: uid %d gid %d uname %q gname %q mtime %v", h.Name, h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime)
		}
		body, _ := io.ReadAll(tr)
		entries[h.Name] = got{h.Typeflag, h.Mode, h.Linkname, string(body)}
		order = append(order, h.Name)
	}
	want := map[string]got{
		"app/":            {tar.TypeDir, 0o755, "", ""},
		"app/a.txt":       {tar.TypeReg, 0o644, "", "hello\n"},
		"app/link":        {tar.TypeSymlink, 0o777, "a.txt", ""},
		"app/run.sh":      {tar.TypeReg, 0o755, "", "#!/bin/sh\necho hi\n"},
		"app/sub/":        {tar.TypeDir, 0o755, "", ""},
		"app/sub/.hidden": {tar.TypeReg, 0o644, "", ""},
		"app/sub/b.txt":   {tar.TypeReg, 0o644, "", "world"},
	}
	if len(entries) != len(want) {
		t.Errorf("archive entries %q", order)
	}
	for name, w := range want {
		if entries[name] != w {
			t.Errorf("%s = %+v, want %+v", name, entries[name], w)
		}
	}
	if strings.Join(order, " ") != "app/ app/a.txt app/link app/run.sh app/sub/ app/sub/.hidden app/sub/b.txt" {
		t.Errorf("archive order %q is not the listing order", order)
	}
}

func TestArchiveFailsWhenContextChanged(t *testing.T) {
	cases := map[string]func(p string) error{
		"same size, other bytes": func(p string) error { return os.WriteFile(p, []byte("HELLO\n"), 0o644) },
		"grown":                  func(p string) error { return os.WriteFile(p, []byte("hello, world\n"), 0o644) },
		"shrunk":                 func(p string) error { return os.WriteFile(p, []byte("h"), 0o644) },
	}
	// Each way hashes the tree (the plan) and returns what spools its archive (the apply).
	ways := map[string]func(t *testing.T, d string) func(spool string) error{
		"listing": func(t *testing.T, d string) func(string) error {
			l := hashedListing(t, d, "app")
			return func(spool string) error { _, _, err := l.SpoolArchive(t.Context(), spool); return err }
		},
		"streamed portable": func(t *testing.T, d string) func(string) error {
			sum, err := StreamPortableHash(t.Context(), d, "app", "/dest", ListOptions{}, HashOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return spoolStepArchive(t, d, ArchiveCheck{PortableHash: sum.Hash})
		},
		// Without a cache the archive hashes the step again to compare.
		"streamed e2b-sdk": func(t *testing.T, d string) func(string) error {
			sum := sdkHash(t, d, "app", "/dest", HashOptions{})
			return spoolStepArchive(t, d, ArchiveCheck{SDKHash: sum.Hash})
		},
		// With the plan's cache it finds no hash under the changed files' fingerprint.
		"streamed e2b-sdk, cached": func(t *testing.T, d string) func(string) error {
			cache := OpenStatCache(filepath.Join(t.TempDir(), "cache"))
			sum := sdkHash(t, d, "app", "/dest", HashOptions{Cache: cache})
			return spoolStepArchive(t, d, ArchiveCheck{SDKHash: sum.Hash, Cache: cache})
		},
	}
	for name, change := range cases {
		for way, plan := range ways {
			t.Run(name+", "+way, func(t *testing.T) {
				d := newTree(t, file("app/a.txt", "hello\n"), file("app/b.txt", "b"))
				setMtimes(t, d, time.Now().Add(-time.Hour))
				spoolArchive := plan(t, d)
				if err := change(filepath.Join(d, "app/a.txt")); err != nil {
					t.Fatal(err)
				}
				spool := t.TempDir()
				err := spoolArchive(spool)
				if !errors.Is(err, ErrChanged) || !strings.Contains(err.Error(), "build context changed since plan") || !strings.Contains(err.Error(), "app/a.txt") {
					t.Fatalf("err = %v, want a 'build context changed since plan' error naming app/a.txt", err)
				}
				if left, _ := os.ReadDir(spool); len(left) != 0 {
					t.Errorf("failed spool left %d files behind", len(left))
				}
			})
		}
	}
}

// spoolStepArchive spools the archive of the step (app, /dest) of d checked against planned.
func spoolStepArchive(t *testing.T, d string, planned ArchiveCheck) func(string) error {
	return func(spool string) error {
		_, _, err := SpoolArchive(spool, "app", func(w io.Writer) error {
			return WriteStepArchive(t.Context(), w, d, "app", "/dest", ListOptions{}, planned)
		})
		return err
	}
}

// TestWriteStepArchiveOnRandomTrees: the streamed archive of either mode is the listing's,
// byte for byte, on random trees with symlinks, and checks against the plan of its mode.
func TestWriteStepArchiveOnRandomTrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6)) // reproducible trees
	for tree := range 30 {
		d := newTree(t, randomTree(rng, true)...)
		l := mustList(t, d, ".", ListOptions{})
		planned, err := l.PortableHash(t.Context(), "/dest", HashOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := archiveBytes(t, l)
		for mode, check := range map[string]ArchiveCheck{
			"portable": {PortableHash: planned},
			"e2b-sdk":  {SDKHash: sdkHash(t, d, ".", "/dest", HashOptions{}).Hash},
		} {
			var streamed bytes.Buffer
			if err := WriteStepArchive(t.Context(), &streamed, d, ".", "/dest", ListOptions{}, check); err != nil {
				t.Fatalf("tree %d, %s: %v", tree, mode, err)
			}
			if !bytes.Equal(streamed.Bytes(), want) {
				t.Fatalf("tree %d, %s: the streamed archive differs from the listing's", tree, mode)
			}
		}
	}
}

func TestArchiveNeedsDigests(t *testing.T) {
	d := newTree(t, file("a.txt", "a"))
	err := mustList(t, d, "a.txt", ListOptions{}).WriteArchive(t.Context(), io.Discard)
	if !errors.Is(err, ErrNotDigested) {
		t.Fatalf("err = %v, want ErrNotDigested", err)
	}
}

func TestHashFailsWhenFileChangedSinceListing(t *testing.T) {
	d := newTree(t, file("app/a.txt", "hello\n"))
	l := mustList(t, d, "app", ListOptions{})
	if err := os.WriteFile(filepath.Join(d, "app/a.txt"), []byte("hello, again\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := l.PortableHash(t.Context(), "/d", HashOptions{})
	if !errors.Is(err, ErrChanged) || !strings.Contains(err.Error(), "app/a.txt") {
		t.Errorf("err = %v, want ErrChanged naming app/a.txt", err)
	}
}

func TestArchivePassesCheckArchive(t *testing.T) {
	v := loadVectors(t)
	l := hashedListing(t, newTree(t, v.Entries...), ".")
	gzipped, err := CheckArchive(bytes.NewReader(archiveBytes(t, l)), ArchiveLimits{})
	if err != nil {
		t.Fatalf("the archive WriteArchive writes fails the check: %v", err)
	}
	if !gzipped {
		t.Error("WriteArchive's archive is not detected as gzip'd")
	}
}
