//go:build unix

package server

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// archiveOf is a plain tar of hs, each regular file holding its name.
func archiveOf(t *testing.T, hs ...*tar.Header) *bytes.Buffer {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range hs {
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(h.Name))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(h.Name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &b
}

func TestExtract(t *testing.T) {
	dir := t.TempDir()
	uid, gid := os.Getuid(), os.Getgid()
	if uid == 0 {
		uid, gid = 1234, 2345 // root can give any owner
	}
	when := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	// What was there: a directory merged into, a file and a link replaced.
	writeAll(t, dir, "opt/app/old.txt", "old")
	writeAll(t, dir, "opt/app/over.txt", "before")
	if err := os.Symlink("old.txt", filepath.Join(dir, "opt/app/was-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "opt/app"), 0o700); err != nil {
		t.Fatal(err)
	}
	own := func(h *tar.Header) *tar.Header { h.Uid, h.Gid, h.ModTime = uid, gid, when; return h }
	err := Extract(archiveOf(t,
		own(&tar.Header{Name: "opt/app/", Typeflag: tar.TypeDir, Mode: 0o750}),
		own(&tar.Header{Name: "opt/app/over.txt", Typeflag: tar.TypeReg, Mode: 0o640}),
		own(&tar.Header{Name: "opt/app/was-link", Typeflag: tar.TypeReg, Mode: 0o644}),
		own(&tar.Header{Name: "opt/app/sub/tool", Typeflag: tar.TypeReg, Mode: 0o4755}), // parent made
		own(&tar.Header{Name: "opt/app/hard", Typeflag: tar.TypeLink, Linkname: "opt/app/over.txt"}),
		own(&tar.Header{Name: "opt/app/link", Typeflag: tar.TypeSymlink, Linkname: "../elsewhere"}),
	), dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		name    string
		mode    fs.FileMode
		content string
	}{
		{"opt/app", fs.ModeDir | 0o750, ""},
		{"opt/app/old.txt", 0o644, "old"},
		{"opt/app/over.txt", 0o640, "opt/app/over.txt"},
		{"opt/app/was-link", 0o644, "opt/app/was-link"},
		{"opt/app/sub", fs.ModeDir | 0o755, ""},
		{"opt/app/sub/tool", fs.ModeSetuid | 0o755, "opt/app/sub/tool"},
		{"opt/app/hard", 0o640, "opt/app/over.txt"},
	} {
		p := filepath.Join(dir, want.name)
		fi, err := os.Lstat(p)
		if err != nil {
			t.Error(err)
			continue
		}
		if fi.Mode() != want.mode {
			t.Errorf("%s: mode %v, want %v", want.name, fi.Mode(), want.mode)
		}
		if want.content != "" {
			if b, _ := os.ReadFile(p); string(b) != want.content {
				t.Errorf("%s holds %q, want %q", want.name, b, want.content)
			}
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			t.Fatalf("%s: no owner in %T", want.name, fi.Sys())
		}
		mine := want.name != "opt/app/old.txt" && want.name != "opt/app/sub"
		if mine && (int(st.Uid) != uid || int(st.Gid) != gid || !fi.ModTime().Equal(when)) {
			t.Errorf("%s: owner %d:%d, time %v; want %d:%d, %v", want.name, st.Uid, st.Gid, fi.ModTime(), uid, gid, when)
		}
	}
	if target, err := os.Readlink(filepath.Join(dir, "opt/app/link")); err != nil || target != "../elsewhere" {
		t.Errorf("link: %q, %v", target, err)
	}
}

func TestExtractRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		h    *tar.Header
		want string
	}{
		"a name above the directory": {&tar.Header{Name: "../x", Typeflag: tar.TypeReg, Mode: 0o644}, "leaves the directory"},
		"an absolute name":           {&tar.Header{Name: "/x", Typeflag: tar.TypeReg, Mode: 0o644}, "absolute"},
		"a hard link above it":       {&tar.Header{Name: "x", Typeflag: tar.TypeLink, Linkname: "../y"}, "hard link"},
		"a file over a directory":    {&tar.Header{Name: "d", Typeflag: tar.TypeReg, Mode: 0o644}, "cannot overwrite a directory"},
		"a device":                   {&tar.Header{Name: "dev", Typeflag: tar.TypeChar, Mode: 0o644}, "not copied"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
				t.Fatal(err)
			}
			tc.h.Uid, tc.h.Gid = os.Getuid(), os.Getgid()
			err := Extract(archiveOf(t, tc.h), dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "x")); err == nil {
				t.Error("a file was written outside the directory")
			}
		})
	}
}

func writeAll(t *testing.T, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
