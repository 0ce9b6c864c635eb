//go:build unix

package buildcontext

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// treeEntry describes one entry of a test tree, in the shape of hash-vectors.json.
type treeEntry struct {
	Path    string `json:"path"`
	Type    string `json:"type"`
	Mode    string `json:"mode"`
	Content string `json:"content"`
	Target  string `json:"target"`
}

type hashVector struct {
	Src              string `json:"src"`
	Dest             string `json:"dest"`
	PortableV1       string `json:"portable_v1"`
	E2BSDK           string `json:"e2b_sdk"`
	DependsOnDirSize bool   `json:"e2b_sdk_depends_on_directory_size"`
}

type vectorFile struct {
	Entries []treeEntry  `json:"entries"`
	Vectors []hashVector `json:"vectors"`
}

// vectorsPath is the hash vectors of design/hashing.md §4 (testdata/README.md
// says where they come from).
const vectorsPath = "testdata/hash-vectors.json"

func loadVectors(t testing.TB) vectorFile {
	t.Helper()
	data, err := os.ReadFile(vectorsPath)
	if err != nil {
		t.Fatalf("reading the hash vectors: %v", err)
	}
	var v vectorFile
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("parsing %s: %v", vectorsPath, err)
	}
	return v
}

// makeTree creates the entries under dir with exactly their modes (chmod after writing,
// so the umask does not matter).
func makeTree(t testing.TB, dir string, entries []treeEntry) {
	t.Helper()
	for _, e := range entries {
		p := filepath.Join(dir, filepath.FromSlash(e.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		switch e.Type {
		case "file":
			if err := os.WriteFile(p, []byte(e.Content), 0o600); err != nil {
				t.Fatal(err)
			}
		case "dir":
			if err := os.MkdirAll(p, 0o700); err != nil {
				t.Fatal(err)
			}
		case "symlink":
			if err := os.Symlink(e.Target, p); err != nil {
				t.Fatal(err)
			}
			continue
		default:
			t.Fatalf("unknown entry type %q", e.Type)
		}
		mode := e.Mode
		if mode == "" {
			mode = map[string]string{"file": "0644", "dir": "0755"}[e.Type]
		}
		m, err := strconv.ParseUint(mode, 8, 32)
		if err != nil {
			t.Fatalf("mode %q of %s: %v", mode, e.Path, err)
		}
		if err := os.Chmod(p, os.FileMode(m)); err != nil {
			t.Fatal(err)
		}
	}
}

func file(path, content string) treeEntry {
	return treeEntry{Path: path, Type: "file", Content: content}
}
func dir(path string) treeEntry { return treeEntry{Path: path, Type: "dir"} }
func link(path, target string) treeEntry {
	return treeEntry{Path: path, Type: "symlink", Target: target}
}

// setMtimes sets the times of every file and directory under dir to when. Symlinks are
// skipped: os.Chtimes would follow them, and their targets in the tree get theirs anyway.
func setMtimes(t testing.TB, dir string, when time.Time) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		return os.Chtimes(p, when, when)
	})
	if err != nil {
		t.Fatalf("setting the times under %s: %v", dir, err)
	}
}

func newTree(t testing.TB, entries ...treeEntry) string {
	t.Helper()
	d := t.TempDir()
	makeTree(t, d, entries)
	return d
}

func mustList(t testing.TB, ctxDir, src string, opts ListOptions) *Listing {
	t.Helper()
	l, err := List(ctxDir, src, opts)
	if err != nil {
		t.Fatalf("List(%q): %v", src, err)
	}
	return l
}

// portable is the portable hash of the step, computed from a listing and streamed, which
// must agree.
func portable(t testing.TB, ctxDir, src, dest string) string {
	t.Helper()
	h, err := mustList(t, ctxDir, src, ListOptions{}).PortableHash(context.Background(), dest, HashOptions{})
	if err != nil {
		t.Fatalf("PortableHash(%q): %v", src, err)
	}
	streamed, err := StreamPortableHash(context.Background(), ctxDir, src, dest, ListOptions{}, HashOptions{})
	if err != nil {
		t.Fatalf("StreamPortableHash(%q): %v", src, err)
	}
	if streamed.Hash != h {
		t.Fatalf("%q: streamed hash %s, from the listing %s", src, streamed.Hash, h)
	}
	return h
}

// sdkHash is StreamSDKHash of the step.
func sdkHash(t testing.TB, ctxDir, src, dest string, ho HashOptions) StreamSummary {
	t.Helper()
	sum, err := StreamSDKHash(context.Background(), ctxDir, src, dest, ListOptions{}, ho)
	if err != nil {
		t.Fatalf("StreamSDKHash(%q): %v", src, err)
	}
	return sum
}

func paths(l *Listing) []string {
	var out []string
	for _, e := range l.Entries {
		out = append(out, e.Path)
	}
	return out
}
