package buildcontext

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
)

// below is an edit that moves every entry below dir, hard links' targets
// included, and drops "app/drop".
func below(dir string) func(*tar.Header) ([]*tar.Header, error) {
	return func(h *tar.Header) ([]*tar.Header, error) {
		if h.Name == "app/drop" {
			return nil, nil
		}
		h.Name = dir + "/" + h.Name
		if h.Typeflag == tar.TypeLink {
			h.Linkname = dir + "/" + h.Linkname
		}
		if h.Name == dir+"/app/a.txt" {
			return []*tar.Header{{Name: dir + "/made", Typeflag: tar.TypeDir, Mode: 0o755, Size: 7}, h}, nil
		}
		return []*tar.Header{h}, nil
	}
}

func TestRewrite(t *testing.T) {
	var plain bytes.Buffer
	tw := tar.NewWriter(&plain)
	for _, h := range []*tar.Header{
		{Name: "app/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "./app/drop", Typeflag: tar.TypeReg, Mode: 0o644, Size: 2},
		{Name: "app/a.txt", Typeflag: tar.TypeReg, Mode: 0o644, Size: 2},
		{Name: "app/hard", Typeflag: tar.TypeLink, Linkname: "app/a.txt"},
		{Name: "app/out", Typeflag: tar.TypeSymlink, Linkname: "../../outside"},
		{Name: "app/abs", Typeflag: tar.TypeSymlink, Linkname: "/dev/zero"},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write([]byte("hi")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	var gzipped bytes.Buffer
	zw := gzip.NewWriter(&gzipped)
	if _, err := zw.Write(plain.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"5 s/unpack/app/ ",
		"5 s/unpack/made/ ",
		"0 s/unpack/app/a.txt  hi",
		"1 s/unpack/app/hard s/unpack/app/a.txt",
		"2 s/unpack/app/out ../../outside",
		"2 s/unpack/app/abs /dev/zero",
	}
	for name, archive := range map[string][]byte{"plain": plain.Bytes(), "gzip": gzipped.Bytes()} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if err := Rewrite(&out, bytes.NewReader(archive), below("s/unpack")); err != nil {
				t.Fatal(err)
			}
			tr := tar.NewReader(&out)
			var got []string
			for {
				h, err := tr.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(tr)
				line := string(rune(h.Typeflag)) + " " + h.Name + " " + h.Linkname
				if len(b) > 0 {
					line += " " + string(b)
				}
				got = append(got, line)
			}
			if len(got) != len(want) {
				t.Fatalf("entries %q, want %q", got, want)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("entry %d = %q, want %q", i, got[i], want[i])
				}
			}
		})
	}
	var escaping bytes.Buffer
	tw = tar.NewWriter(&escaping)
	if err := tw.WriteHeader(&tar.Header{Name: "../x", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := Rewrite(io.Discard, &escaping, below("s")); err == nil || !strings.Contains(err.Error(), `"../x"`) {
		t.Errorf(`Rewrite of an entry "../x" = %v, want an error naming it`, err)
	}
}
