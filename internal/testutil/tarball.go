// Package testutil holds helpers shared by the tests of several packages.
package testutil

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"testing"
)

// TarEntry is one entry of a hand-made test archive. Typ is a tar type flag; for
// tar.TypeXGlobalHeader, Name becomes the PAX comment.
type TarEntry struct {
	Name, Body, Link string
	Typ              byte
}

func File(name, body string) TarEntry { return TarEntry{Name: name, Body: body, Typ: tar.TypeReg} }
func Dir(name string) TarEntry        { return TarEntry{Name: name, Typ: tar.TypeDir} }
func Symlink(name, target string) TarEntry {
	return TarEntry{Name: name, Link: target, Typ: tar.TypeSymlink}
}
func Hardlink(name, target string) TarEntry {
	return TarEntry{Name: name, Link: target, Typ: tar.TypeLink}
}

// Tarball writes entries as a tar, gzip'd if gz, exactly as given (no name checks), so
// tests can build the unsafe archives a client could send.
func Tarball(t testing.TB, gz bool, entries ...TarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.Writer = &buf
	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(&buf)
		w = zw
	}
	tw := tar.NewWriter(w)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.Name, Typeflag: e.Typ, Linkname: e.Link, Mode: 0o644, Size: int64(len(e.Body))}
		switch e.Typ {
		case tar.TypeDir:
			hdr.Mode = 0o755
		case tar.TypeXGlobalHeader:
			hdr = &tar.Header{Typeflag: e.Typ, PAXRecords: map[string]string{"comment": e.Name}}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.Body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}
