//go:build unix

package buildcontext

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/moby/patternmatcher"
)

// ignoreTree is the context the .dockerignore cases run against.
var ignoreTree = []treeEntry{
	file("README.md", "r"), file("README-secret.md", "s"), file("README-public.md", "p"),
	file("CHANGES.md", "c"), file("a.log", "l"), file("tempa", "t"), file("tempb/x", "x"),
	file("src/main.go", "m"), file("src/debug.log", "d"), file("src/temporary.txt", "t"),
	file("src/deep/templ.txt", "t"), file("src/deep/y", "y"),
	file("node_modules/keep.txt", "k"), file("node_modules/pkg/index.js", "i"),
	file("app/node_modules/x/keep", "k"), file("app/node_modules/x/drop", "d"), file("app/main.js", "m"),
}

// TestDockerignore checks .dockerignore lines against what Docker (BuildKit) sends as the
// context for the same file: the cases of Docker's documentation plus exceptions inside
// excluded directories, where the excluded directory itself is sent so the file has a
// parent.
func TestDockerignore(t *testing.T) {
	all := []string{"README-public.md", "README-secret.md", "README.md", "CHANGES.md", "a.log",
		"app", "app/main.js", "app/node_modules", "app/node_modules/x", "app/node_modules/x/drop", "app/node_modules/x/keep",
		"node_modules", "node_modules/keep.txt", "node_modules/pkg", "node_modules/pkg/index.js",
		"src", "src/debug.log", "src/deep", "src/deep/templ.txt", "src/deep/y", "src/main.go", "src/temporary.txt",
		"tempa", "tempb", "tempb/x"}
	without := func(drop ...string) []string {
		return slices.DeleteFunc(slices.Clone(all), func(p string) bool { return slices.Contains(drop, p) })
	}
	cases := []struct {
		name  string
		lines string
		want  []string
	}{
		{"none", "", all},
		{"top-level glob only", "*.log", without("a.log")},
		{"double star", "**/*.log", without("a.log", "src/debug.log")},
		{"nested glob", "src/*.log", without("src/debug.log")},
		{"question mark", "temp?", without("tempa", "tempb", "tempb/x")},
		{"one level down", "*/temp*", without("src/temporary.txt")},
		{"two levels down", "*/*/temp*", without("src/deep/templ.txt")},
		{"docs example with exceptions", "*.md\n!README*.md\nREADME-secret.md", without("CHANGES.md", "README-secret.md")},
		{"exception then exclusion: last wins", "!README.md\n*.md", without("CHANGES.md", "README-public.md", "README-secret.md", "README.md")},
		{"excluded directory takes children", "node_modules", without("node_modules", "node_modules/keep.txt", "node_modules/pkg", "node_modules/pkg/index.js")},
		{"trailing slash and leading slash", "/node_modules/", without("node_modules", "node_modules/keep.txt", "node_modules/pkg", "node_modules/pkg/index.js")},
		{"file re-included inside excluded directory", "node_modules\n!node_modules/keep.txt", without("node_modules/pkg", "node_modules/pkg/index.js")},
		{"double star directory with deep exception", "**/node_modules\n!app/node_modules/x/keep",
			without("node_modules", "node_modules/keep.txt", "node_modules/pkg", "node_modules/pkg/index.js", "app/node_modules/x/drop")},
		{"everything but one directory", "*\n!src", []string{"src", "src/debug.log", "src/deep", "src/deep/templ.txt", "src/deep/y", "src/main.go", "src/temporary.txt"}},
		{"directory contents only", "src/**", without("src/debug.log", "src/deep", "src/deep/templ.txt", "src/deep/y", "src/main.go", "src/temporary.txt")},
		{"comments and blanks", "# a comment\n\n  a.log  \n", without("a.log")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newTree(t, ignoreTree...)
			if err := os.WriteFile(filepath.Join(d, ".dockerignore"), []byte(tc.lines+"\n.dockerignore\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			got := paths(mustList(t, d, ".", ListOptions{}))
			want := append([]string{"."}, tc.want...)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf(".dockerignore %q:\n got %q\nwant %q", tc.lines, got, want)
			}
		})
	}
}

func TestIgnorePatternsOptionAppliesAfterDockerignore(t *testing.T) {
	d := newTree(t, file("a.log", "1"), file("b.log", "2"), file("c.txt", "3"))
	if err := os.WriteFile(filepath.Join(d, ".dockerignore"), []byte("*.log\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := mustList(t, d, "*", ListOptions{IgnorePatterns: []string{"!b.log", ".dockerignore"}})
	if got, want := paths(l), []string{"b.log", "c.txt"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestIgnoreAppliesToNamedSource(t *testing.T) {
	d := newTree(t, file("src/debug.log", "d"), file("src/main.go", "m"))
	if err := os.WriteFile(filepath.Join(d, ".dockerignore"), []byte("src/*.log\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := List(d, "src/debug.log", ListOptions{})
	if !errors.Is(err, ErrNoMatch) {
		t.Fatalf("listing an ignored file: err = %v, want ErrNoMatch", err)
	}
	if got, want := paths(mustList(t, d, "src", ListOptions{})), []string{"src", "src/main.go"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestSourceGlobs(t *testing.T) {
	d := newTree(t, file("top.txt", "t"), file(".env", "e"), file("app/a.txt", "a"), file("app/.hidden", "h"),
		file("app/sub/b.txt", "b"), file("app/sub/c.md", "c"), file("docs/d.txt", "d"), link("app/l", "a.txt"))
	cases := []struct {
		src  string
		want []string
	}{
		{"*.txt", []string{"top.txt"}},
		{"**/*.txt", []string{"app/a.txt", "app/sub/b.txt", "docs/d.txt", "top.txt"}},
		{"app/*", []string{"app/.hidden", "app/a.txt", "app/l", "app/sub", "app/sub/b.txt", "app/sub/c.md"}},
		{".*", []string{".env"}},
		{"app/s?b", []string{"app/sub", "app/sub/b.txt", "app/sub/c.md"}},
		{"[ad]*/*.txt", []string{"app/a.txt", "docs/d.txt"}},
		{"app/**", []string{"app", "app/.hidden", "app/a.txt", "app/l", "app/sub", "app/sub/b.txt", "app/sub/c.md"}},
		{"app/./sub/", []string{"app/sub", "app/sub/b.txt", "app/sub/c.md"}},
		{"app/l", []string{"app/l"}},
		{".", []string{".", ".env", "app", "app/.hidden", "app/a.txt", "app/l", "app/sub", "app/sub/b.txt", "app/sub/c.md", "docs", "docs/d.txt", "top.txt"}},
	}
	for _, tc := range cases {
		l := mustList(t, d, tc.src, ListOptions{})
		if got := paths(l); !slices.Equal(got, tc.want) {
			t.Errorf("src %q:\n got %q\nwant %q", tc.src, got, tc.want)
		}
	}
	l := mustList(t, d, "app", ListOptions{})
	for _, e := range l.Entries {
		if e.Path == "app/l" && (e.Kind != KindSymlink || e.LinkTarget != "a.txt") {
			t.Errorf("app/l listed as %v -> %q, want a symlink to a.txt", e.Kind, e.LinkTarget)
		}
	}
}

func TestListErrors(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := newTree(t, file("a.txt", "a"), link("out", filepath.Join(outside, "secret")),
		link("up", "../"+filepath.Base(outside)+"/secret"), link("viadir", outside), dir("sub"))
	if err := syscall.Mkfifo(filepath.Join(d, "sub/pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, src string
		opts      ListOptions
		kind      error
		mention   []string
	}{
		{"absolute", "/etc/passwd", ListOptions{}, ErrInvalidSrc, []string{"/etc/passwd", "absolute"}},
		{"escaping", "../x", ListOptions{}, ErrInvalidSrc, []string{"../x", "escapes the context directory " + d}},
		{"escaping after cleaning", "sub/../../x", ListOptions{}, ErrInvalidSrc, []string{"sub/../../x", "escapes the context directory " + d}},
		{"escaping glob", "*/../..", ListOptions{}, ErrInvalidSrc, []string{"escapes the context directory " + d}},
		{"fifo", "sub", ListOptions{}, ErrSpecialFile, []string{"sub/pipe", "named pipe"}},
		{"empty match", "*.none", ListOptions{}, ErrNoMatch, []string{"no files match *.none in " + d}},
		{"missing path", "nope/x", ListOptions{}, ErrNoMatch, []string{"no files match nope/x"}},
		{"file used as a directory", "a.txt/x", ListOptions{}, ErrNoMatch, []string{"no files match a.txt/x"}},
		{"link out, resolved", "out", ListOptions{ResolveLinks: true}, ErrLinkOutside, []string{"out", "outside"}},
		{"relative link out, resolved", "up", ListOptions{ResolveLinks: true}, ErrLinkOutside, []string{"up", "outside"}},
		{"through a link to a directory", "viadir/secret", ListOptions{}, ErrInvalidSrc, []string{"viadir"}},
		{"bad glob", "[", ListOptions{}, ErrInvalidSrc, []string{"["}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := List(d, tc.src, tc.opts)
			if !errors.Is(err, tc.kind) {
				t.Fatalf("List(%q) error = %v, want %v", tc.src, err, tc.kind)
			}
			for _, m := range tc.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
		})
	}
	t.Run("fifo ignored", func(t *testing.T) {
		if got := paths(mustList(t, d, "sub", ListOptions{IgnorePatterns: []string{"sub/pipe"}})); !slices.Equal(got, []string{"sub"}) {
			t.Errorf("got %q", got)
		}
	})
	t.Run("link out, not resolved, is a link", func(t *testing.T) {
		l := mustList(t, d, "out", ListOptions{})
		if e := l.Entries[0]; e.Kind != KindSymlink || e.LinkTarget != filepath.Join(outside, "secret") {
			t.Errorf("got %+v", e)
		}
	})
	t.Run("missing context", func(t *testing.T) {
		_, err := List(filepath.Join(d, "absent"), "a.txt", ListOptions{})
		if err == nil || !strings.Contains(err.Error(), "absent") || !strings.Contains(err.Error(), "does not exist") {
			t.Errorf("err = %v", err)
		}
	})
}

// A COPY source is checked before anything is read: relative, inside the
// context once cleaned; the error names the context directory, or the
// build context where there is none (a server's uploaded archive).
func TestCleanSource(t *testing.T) {
	dir := t.TempDir()
	for src, want := range map[string]string{"a": "a", "a/../b": "b", "**/*.go": "**/*.go", ".": ".", "./a/": "a",
		"..": "", "../a": "", "a/../../b": "", "/etc": "", "": ""} {
		got, err := CleanSource(dir, src)
		if got != want || (err == nil) != (want != "") {
			t.Errorf("CleanSource(%q) = %q, %v; want %q", src, got, err, want)
		}
		if err != nil && !errors.Is(err, ErrInvalidSrc) {
			t.Errorf("CleanSource(%q) = %v, want ErrInvalidSrc", src, err)
		}
		if err != nil && strings.Contains(src, "..") && !strings.Contains(err.Error(), "escapes the context directory "+dir) {
			t.Errorf("CleanSource(%q) = %v, want the context directory named", src, err)
		}
	}
	if _, err := CleanSource("", "a/../../b"); err == nil || !strings.Contains(err.Error(), `COPY source "a/../../b" escapes the build context`) {
		t.Errorf("without a directory: %v", err)
	}
	if err := CheckRelative("/etc/passwd"); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Errorf("CheckRelative(/etc/passwd) = %v", err)
	}
	if err := CheckRelative("../x"); err != nil {
		t.Errorf("CheckRelative(../x) = %v: leaving the context is for CleanSource, which can name it", err)
	}
}

func TestResolveLinksInsideContext(t *testing.T) {
	d := newTree(t, file("real/a.txt", "a"), file("real/run.sh", "#!"), link("app/file", "../real/run.sh"),
		link("app/dir", "../real"), link("app/dangling", "missing"), link("app/loop", ".."))
	if err := os.Chmod(filepath.Join(d, "real/run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := List(d, "app", ListOptions{ResolveLinks: true}); !errors.Is(err, errSymlinkCycle) {
		t.Fatalf("a link to an ancestor: err = %v, want a symlink cycle error", err)
	}
	l := mustList(t, d, "app", ListOptions{ResolveLinks: true, IgnorePatterns: []string{"app/loop"}})
	want := []struct {
		path string
		kind Kind
	}{{"app", KindDir}, {"app/dangling", KindSymlink}, {"app/dir", KindDir}, {"app/dir/a.txt", KindFile}, {"app/dir/run.sh", KindFile}, {"app/file", KindFile}}
	if len(l.Entries) != len(want) {
		t.Fatalf("got %q", paths(l))
	}
	for i, w := range want {
		if e := l.Entries[i]; e.Path != w.path || e.Kind != w.kind {
			t.Errorf("entry %d = %s %v, want %s %v", i, e.Path, e.Kind, w.path, w.kind)
		}
	}
	if l.Entries[5].normalisedPerm() != 0o755 {
		t.Error("a resolved link to an executable should carry the target's exec bit")
	}
	h, err := l.PortableHash(t.Context(), "/x", HashOptions{})
	if err != nil || h == "" {
		t.Fatalf("hash of resolved links: %v", err)
	}
}

// TestListIgnoreLimits refuses a .dockerignore beyond its limits by name instead of
// compiling it (a million patterns took gigabytes); one at the limits lists.
func TestListIgnoreLimits(t *testing.T) {
	many := strings.Repeat("x\n", MaxIgnorePatterns+1)
	big := strings.Repeat("#"+strings.Repeat("c", 1023)+"\n", MaxIgnoreBytes/1024+1)
	for name, c := range map[string]struct{ content, want string }{
		"too many patterns": {many, fmt.Sprintf("has %d patterns, more than the limit of %d", MaxIgnorePatterns+1, MaxIgnorePatterns)},
		"too large":         {big, fmt.Sprintf("is larger than the limit of %d bytes", MaxIgnoreBytes)},
	} {
		ctx := newTree(t, file("a.txt", "a"), file(".dockerignore", c.content))
		_, err := List(ctx, ".", ListOptions{})
		if !errors.Is(err, ErrIgnoreLimit) || !strings.Contains(err.Error(), filepath.Join(ctx, ".dockerignore")) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", name, err)
		}
	}
	ctx := newTree(t, file("a.txt", "a"), file(".dockerignore", strings.Repeat("x\n", MaxIgnorePatterns)))
	if _, err := List(ctx, ".", ListOptions{}); err != nil {
		t.Errorf("at the limit: %v", err)
	}
}

// TestWalkOrderOnRandomTrees lists random trees whose names extend one another by bytes
// below and above "/" ("a", "a-", "a.b", "a0"…), where sorting names alone or directories
// at name + "/" would go wrong: the walk must give every path, sorted as bytes and
// unique, and with ignore patterns that re-include below excluded directories it must
// stay sorted and list each excluded directory exactly when something below it is listed.
func TestWalkOrderOnRandomTrees(t *testing.T) {
	ignores := [][]string{nil, {"a", "!a/a-"}, {"**/a-", "!**/a-/a"}, {"*", "!a.b"}, {"a*/**", "!a/a0/b"}}
	rng := rand.New(rand.NewPCG(1, 2)) // reproducible trees
	for tree := range 150 {
		entries := randomTree(rng, false)
		d := newTree(t, entries...)
		var want []string
		if err := filepath.WalkDir(d, func(p string, _ fs.DirEntry, err error) error {
			rel, _ := filepath.Rel(d, p)
			want = append(want, filepath.ToSlash(rel))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		slices.Sort(want)
		if got := paths(mustList(t, d, ".", ListOptions{})); !slices.Equal(got, want) {
			t.Fatalf("tree %d:\n got %q\nwant %q", tree, got, want)
		}
		for _, ign := range ignores[1:] {
			l, err := List(d, ".", ListOptions{IgnorePatterns: ign})
			if errors.Is(err, ErrNoMatch) {
				continue
			} else if err != nil {
				t.Fatal(err)
			}
			got := paths(l)
			if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
				t.Fatalf("tree %d, ignore %q: not sorted and unique: %q", tree, ign, got)
			}
			pm, err := patternmatcher.New(ign)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range want {
				if p == "." {
					continue // the context itself is never excluded
				}
				excluded, err := pm.MatchesOrParentMatches(p)
				if err != nil {
					t.Fatal(err)
				}
				listed := slices.Contains(got, p)
				if isDir := slices.ContainsFunc(want, func(q string) bool { return strings.HasPrefix(q, p+"/") }); isDir && excluded {
					excluded = !slices.ContainsFunc(got, func(q string) bool { return strings.HasPrefix(q, p+"/") })
				}
				if listed == excluded {
					t.Fatalf("tree %d, ignore %q: %s listed %v, excluded %v: %q", tree, ign, p, listed, excluded, got)
				}
			}
		}
	}
}

// randomTree is up to three levels of directories and files named to extend one another
// by bytes below and above "/", with symlinks among them if links.
func randomTree(rng *rand.Rand, links bool) []treeEntry {
	names := []string{"a", "a-", "a.b", "a b", "a0", "a-b", "-", ".x", "b", "a~"}
	var entries []treeEntry
	var grow func(parent string, depth int)
	grow = func(parent string, depth int) {
		for _, n := range names {
			p := strings.TrimPrefix(parent+"/"+n, "/")
			switch r := rng.IntN(7); {
			case r == 0 && depth < 3:
				entries = append(entries, dir(p))
				grow(p, depth+1)
			case r <= 2:
				entries = append(entries, file(p, strings.Repeat(n, rng.IntN(100))))
			case r == 3 && links:
				// A sibling, never the link itself: no loops, maybe dangling.
				if target := names[rng.IntN(len(names))]; target != n {
					entries = append(entries, link(p, target))
				}
			}
		}
	}
	grow("", 0)
	return entries
}
