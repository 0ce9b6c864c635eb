//go:build unix

package buildcontext

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExtractRoundTrip(t *testing.T) {
	v := loadVectors(t)
	src := newTree(t, v.Entries...)
	l := hashedListing(t, src, ".")
	want, _ := l.PortableHash(t.Context(), "/x", HashOptions{})
	var buf bytes.Buffer
	if err := l.WriteArchive(t.Context(), &buf); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := Extract(t.Context(), &buf, out); err != nil {
		t.Fatal(err)
	}
	if got := portable(t, out, ".", "/x"); got != want {
		t.Errorf("extracted tree hashes to %s, the original to %s", got, want)
	}
	if target, err := os.Readlink(filepath.Join(out, "app/link")); err != nil || target != "a.txt" {
		t.Errorf("app/link = %q, %v", target, err)
	}
}

// tarOf builds an uncompressed tar from headers (bodies are the Linkname of TypeReg entries).
func tarOf(t *testing.T, hdrs ...tar.Header) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range hdrs {
		body := ""
		if h.Typeflag == tar.TypeReg {
			body, h.Linkname = h.Linkname, ""
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	tw.Close()
	return &buf
}

func TestExtractRefusesUnsafeEntries(t *testing.T) {
	outside := t.TempDir()
	cases := map[string][]tar.Header{
		"parent path":   {{Name: "../evil", Typeflag: tar.TypeReg, Mode: 0o644, Linkname: "x"}},
		"absolute path": {{Name: "/tmp/evil", Typeflag: tar.TypeReg, Mode: 0o644, Linkname: "x"}},
		"through a symlink": {
			{Name: "l", Typeflag: tar.TypeSymlink, Linkname: outside},
			{Name: "l/evil", Typeflag: tar.TypeReg, Mode: 0o644, Linkname: "x"},
		},
		"hard link out": {{Name: "h", Typeflag: tar.TypeLink, Linkname: "../../etc/passwd"}},
		"fifo":          {{Name: "p", Typeflag: tar.TypeFifo, Mode: 0o644}},
	}
	for name, hdrs := range cases {
		t.Run(name, func(t *testing.T) {
			err := Extract(t.Context(), tarOf(t, hdrs...), t.TempDir())
			if err == nil {
				t.Fatal("extracted an unsafe archive")
			}
			if left, _ := os.ReadDir(outside); len(left) != 0 {
				t.Fatalf("wrote outside the extraction directory: %v", left)
			}
			if name != "through a symlink" && !errors.Is(err, ErrUnsafeArchive) {
				t.Errorf("err = %v, want ErrUnsafeArchive", err)
			}
			if !strings.Contains(err.Error(), hdrs[len(hdrs)-1].Name) && !strings.Contains(err.Error(), "evil") {
				t.Errorf("error %q does not name the entry", err)
			}
		})
	}
}
