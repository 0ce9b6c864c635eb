package build

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/buildcontext"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/testutil"
)

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
	for src, says := range map[string]string{"../x": "escapes the build context", "/etc": "absolute", "a/../../b": "escapes the build context"} {
		if got, err := nonGlobPrefix(src); err == nil || !strings.Contains(err.Error(), says) || !strings.Contains(err.Error(), src) {
			t.Errorf("nonGlobPrefix(%q) = %q, %v; want an error naming it that says %q", src, got, err, says)
		}
	}
}

// placed runs p over the archive of entries and returns what the engine
// would extract: "type name [link] uid:gid mode" per entry.
func placed(t *testing.T, p *placement, entries ...testutil.TarEntry) ([]string, error) {
	t.Helper()
	var out bytes.Buffer
	if err := buildcontext.Rewrite(&out, bytes.NewReader(testutil.Tarball(t, true, entries...)), p.place); err != nil {
		return nil, err
	}
	var got []string
	tr := tar.NewReader(&out)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return got, nil
		}
		if err != nil {
			t.Fatal(err)
		}
		line := fmt.Sprintf("%c %s", h.Typeflag, h.Name)
		if h.Linkname != "" {
			line += " -> " + h.Linkname
		}
		got = append(got, fmt.Sprintf("%s %d:%d %o", line, h.Uid, h.Gid, h.Mode&0o7777))
	}
}

// TestPlacement checks the COPY semantics the rewritten archive carries:
// where each entry lands, its owner and mode, and which directories are
// made or left alone.
func TestPlacement(t *testing.T) {
	app := []testutil.TarEntry{
		testutil.Dir("app/"), testutil.File("app/a.txt", "a"), testutil.File("app/sub/b.txt", "b"),
		testutil.Symlink("app/link", "/etc/passwd"), testutil.Hardlink("app/hard", "app/a.txt"),
		testutil.File("other.txt", "o"),
	}
	for _, tc := range []struct {
		name             string
		prefix, dest     string
		into             bool
		perm             int64
		destKind, inDest string
		entries          []testutil.TarEntry
		want             []string
		wantErr          string
	}{
		{
			name: "directory to a new destination", prefix: "app", dest: "/srv/app", perm: -1, destKind: "none", inDest: "none", entries: app,
			want: []string{
				"5 srv/app/ 1000:1001 755",
				"0 srv/app/a.txt 1000:1001 644",
				"5 srv/app/sub/ 1000:1001 755",
				"0 srv/app/sub/b.txt 1000:1001 644",
				"2 srv/app/link -> /etc/passwd 1000:1001 644",
				"1 srv/app/hard -> srv/app/a.txt 1000:1001 644",
			},
		},
		{
			name: "directory merged into an existing one, which keeps its owner and mode", prefix: "app", dest: "/srv", perm: 0o700, destKind: "dir", inDest: "none", entries: app,
			want: []string{
				"0 srv/a.txt 1000:1001 700",
				"5 srv/sub/ 1000:1001 700",
				"0 srv/sub/b.txt 1000:1001 700",
				"2 srv/link -> /etc/passwd 1000:1001 644",
				"1 srv/hard -> srv/a.txt 1000:1001 700",
			},
		},
		{
			name: "directory without an entry of its own", prefix: "app", dest: "/x", perm: -1, destKind: "none", inDest: "none",
			entries: []testutil.TarEntry{testutil.File("app/a.txt", "a")},
			want:    []string{"5 x/ 1000:1001 755", "0 x/a.txt 1000:1001 644"},
		},
		{
			name: "the whole context to the root", prefix: ".", dest: "/", perm: -1, destKind: "dir", inDest: "dir",
			entries: []testutil.TarEntry{testutil.Dir("./"), testutil.File("a.txt", "a")},
			want:    []string{"0 a.txt 1000:1001 644"},
		},
		{
			name: "file to a path", prefix: "app/a.txt", dest: "/etc/conf", perm: 0o600, destKind: "none", inDest: "none", entries: app,
			want: []string{"0 etc/conf 1000:1001 600"},
		},
		{
			name: "file into an existing directory", prefix: "app/a.txt", dest: "/etc", perm: -1, destKind: "dir", inDest: "other", entries: app,
			want: []string{"0 etc/a.txt 1000:1001 644"},
		},
		{
			name: "file into a new directory, made the owner's without the mode", prefix: "app/a.txt", dest: "/new", into: true, perm: 0o600, destKind: "none", inDest: "none", entries: app,
			want: []string{"5 new/ 1000:1001 755", "0 new/a.txt 1000:1001 600"},
		},
		{
			name: "symlink keeps its mode", prefix: "app/link", dest: "/l", perm: 0o600, destKind: "none", inDest: "none", entries: app,
			want: []string{"2 l -> /etc/passwd 1000:1001 644"},
		},
		{
			name: "directory over a file", prefix: "app", dest: "/f", perm: -1, destKind: "other", inDest: "none", entries: app,
			wantErr: "/f exists and is not a directory",
		},
		{
			name: "file over a directory", prefix: "app/a.txt", dest: "/d", into: true, perm: -1, destKind: "dir", inDest: "dir", entries: app,
			wantErr: "cannot overwrite the directory /d/a.txt with a file",
		},
		{
			name: "nothing matches", prefix: "missing", dest: "/m", perm: -1, destKind: "none", inDest: "none", entries: app,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &placement{prefix: tc.prefix, perm: tc.perm, into: tc.into, uid: 1000, gid: 1001, dest: tc.dest, destKind: tc.destKind, inDestKind: tc.inDest, made: map[string]bool{}}
			got, err := placed(t, p, tc.entries...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("placed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if (p.kind == sourceNone) != (len(tc.want) == 0) {
				t.Errorf("source kind %d with %d entries placed", p.kind, len(got))
			}
		})
	}
}
