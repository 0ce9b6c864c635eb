package runtime

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"strings"
	"testing"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
)

// tarEntry is one entry of a hand-made test archive.
type tarEntry struct {
	name, link string
	typ        byte
}

func makeTar(t *testing.T, gz bool, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w = &buf
	var zw *gzip.Writer
	tw := tar.NewWriter(w)
	if gz {
		zw = gzip.NewWriter(w)
		tw = tar.NewWriter(zw)
	}
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o644}
		if e.typ == tar.TypeXGlobalHeader {
			hdr = &tar.Header{Typeflag: e.typ, PAXRecords: map[string]string{"comment": e.name}}
		}
		if e.typ == tar.TypeReg {
			hdr.Size = int64(len(e.name))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.name)); err != nil {
				t.Fatal(err)
			}
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

func TestCheckArchiveAcceptsContextArchives(t *testing.T) {
	entries := []tarEntry{
		{name: "app/", typ: tar.TypeDir},
		{name: "app/a.txt", typ: tar.TypeReg},
		{name: "app/link", link: "a.txt", typ: tar.TypeSymlink},
		{name: "app/sub/", typ: tar.TypeDir},
		{name: "app/sub/up", link: "../a.txt", typ: tar.TypeSymlink},
		{name: "app/hard", link: "app/a.txt", typ: tar.TypeLink},
		{name: "./top.txt", typ: tar.TypeReg},
	}
	for _, gz := range []bool{true, false} {
		gzipped, err := CheckArchive(bytes.NewReader(makeTar(t, gz, entries...)), ArchiveLimits{})
		if err != nil {
			t.Fatalf("gzip=%v: %v", gz, err)
		}
		if gzipped != gz {
			t.Errorf("gzip=%v: detected gzip=%v", gz, gzipped)
		}
	}
}

func TestCheckArchiveRejectsEscapes(t *testing.T) {
	cases := []struct {
		name  string
		entry []tarEntry
		want  string
	}{
		{"absolute name", []tarEntry{{name: "/etc/passwd", typ: tar.TypeReg}}, `"/etc/passwd": absolute name`},
		{"dot dot", []tarEntry{{name: "app/../../x", typ: tar.TypeReg}}, `"app/../../x"`},
		{"dot dot inside", []tarEntry{{name: "a/../b", typ: tar.TypeReg}}, `name contains ".."`},
		{"symlink out", []tarEntry{{name: "app/l", link: "../../etc", typ: tar.TypeSymlink}}, `"app/l": symlink to "../../etc"`},
		{"absolute symlink", []tarEntry{{name: "l", link: "/etc/passwd", typ: tar.TypeSymlink}}, `absolute path "/etc/passwd"`},
		{"write through symlink", []tarEntry{
			{name: "d", link: ".", typ: tar.TypeSymlink},
			{name: "d/x", typ: tar.TypeReg},
		}, `"d/x": lies below the symlink "d"`},
		{"symlink replaced by dir", []tarEntry{
			{name: "d", link: "sub", typ: tar.TypeSymlink},
			{name: "d/", typ: tar.TypeDir},
			{name: "d/x", typ: tar.TypeReg},
		}, `lies below the symlink "d"`},
		{"hard link out", []tarEntry{{name: "h", link: "../x", typ: tar.TypeLink}}, `hard link to "../x"`},
		{"device", []tarEntry{{name: "dev", typ: tar.TypeChar}}, `"dev": unsupported entry type`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CheckArchive(bytes.NewReader(makeTar(t, true, tc.entry...)), ArchiveLimits{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %s", err, tc.want)
			}
		})
	}
}

func TestCheckArchiveRejectsGarbage(t *testing.T) {
	for name, data := range map[string][]byte{
		"broken gzip": []byte("\x1f\x8bnot gzip at all"),
		"not a tar":   bytes.Repeat([]byte("x"), 1024),
		"empty":       nil,
		"no entries":  makeTar(t, true),
	} {
		if _, err := CheckArchive(bytes.NewReader(data), ArchiveLimits{}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestCheckArchiveLimits(t *testing.T) {
	archive := makeTar(t, true,
		tarEntry{name: "pax-global", typ: tar.TypeXGlobalHeader},
		tarEntry{name: "a.txt", typ: tar.TypeReg},
		tarEntry{name: "b.txt", typ: tar.TypeReg})
	if _, err := CheckArchive(bytes.NewReader(archive), ArchiveLimits{MaxEntries: 3, MaxUnpackedBytes: 1 << 20}); err != nil {
		t.Fatalf("within the limits: %v", err)
	}
	if _, err := CheckArchive(bytes.NewReader(archive), ArchiveLimits{MaxEntries: 2}); err == nil || !strings.Contains(err.Error(), "more than the limit of 2 entries") {
		t.Errorf("entry limit: %v", err)
	}
	if _, err := CheckArchive(bytes.NewReader(archive), ArchiveLimits{MaxUnpackedBytes: 1000}); err == nil || !strings.Contains(err.Error(), "more than the limit of 1000 bytes") {
		t.Errorf("size limit: %v", err)
	}
}

func TestNonGlobPrefix(t *testing.T) {
	for src, want := range map[string]string{
		"app":           "app",
		"app/":          "app",
		"./app/sub":     "app/sub",
		"src/*.js":      "src",
		"src/**/x.js":   "src",
		"a/b[12]/c":     "a",
		"*.txt":         ".",
		".":             ".",
		"file.{js,ts}":  ".",
		"dir/fi?e.conf": "dir",
	} {
		got, err := nonGlobPrefix(src)
		if err != nil || got != want {
			t.Errorf("nonGlobPrefix(%q) = %q, %v; want %q", src, got, err, want)
		}
	}
	for _, src := range []string{"../x", "/etc", "a/../../b"} {
		if got, err := nonGlobPrefix(src); err == nil {
			t.Errorf("nonGlobPrefix(%q) = %q, want an error", src, got)
		}
	}
}

func TestEscapeEnvValue(t *testing.T) {
	for in, want := range map[string]string{
		`$HOME/bin`:      `$HOME/bin`,
		`a "quoted" \ x`: `a \"quoted\" \\ x`,
		"`id`":           "\\`id\\`",
		`$(id) ${X}`:     `\$(id) ${X}`,
	} {
		if got := escapeEnvValue(in); got != want {
			t.Errorf("escapeEnvValue(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLineLogSplitsStreamsAndKeepsTail(t *testing.T) {
	var lines []string
	l := newLineLog(func(line string) { lines = append(lines, line) })
	l.write(client.Stdout, []byte("one\ntw"))
	l.write(client.Stderr, []byte("err\r\n"))
	l.write(client.Stdout, []byte("o\nthree"))
	l.write(client.Stdout, []byte(strings.Repeat("x", maxLogLine)))
	l.write(client.Stdout, []byte("\nfour\nfive"))
	l.flush()
	long := "three" + strings.Repeat("x", maxLogLine-5)
	want := []string{"one", "err", "two", long, "xxxxx", "four", "five"}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d", len(lines), len(want))
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d = %.40q…, want %.40q…", i, lines[i], want[i])
		}
	}
	if tail := l.tail(); !strings.HasSuffix(tail, "\nfour\nfive") || strings.Contains(tail, "err") || !strings.Contains(tail, "two") {
		t.Errorf("tail %.60q… should hold exactly the last %d lines", tail, failureLines)
	}
}
