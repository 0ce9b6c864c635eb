//go:build unix

package buildcontext

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzListIgnore lists a fixed tree with arbitrary sources and ignore patterns: List must
// not panic, must return entries sorted and unique, and every entry must be an existing
// path inside the context.
func FuzzListIgnore(f *testing.F) {
	for _, seed := range [][2]string{
		{".", ""}, {"app", "*.log"}, {"**/*.txt", "**/node_modules\n!app/node_modules/keep"},
		{"app/*", "app\n!app/sub/b.txt"}, {"[a-z]*", "!x"}, {"../x", ""}, {"a/**/b", "**"},
		{"*/../..", "/"}, {"app/s?b", "app/sub/**\n!app/sub/.hidden"}, {`a\*`, "[\n"},
	} {
		f.Add(seed[0], seed[1])
	}
	ctxDir := f.TempDir()
	makeTree(f, ctxDir, append(loadVectors(f).Entries,
		file("app/node_modules/keep", "k"), file("app/node_modules/x/y.js", "y"), file("a/x/y/b", "b"),
		file("a/b", "b"), file("x.log", "l"), link("app/up", "../.."), link("app/abs", "/etc/passwd")))

	f.Fuzz(func(t *testing.T, src, ignore string) {
		patterns := strings.Split(ignore, "\n")
		for _, resolve := range []bool{false, true} {
			l, err := List(ctxDir, src, ListOptions{IgnorePatterns: patterns, ResolveLinks: resolve})
			if err != nil {
				if l != nil {
					t.Fatalf("List returned a listing and error %v", err)
				}
				continue
			}
			if len(l.Entries) == 0 {
				t.Fatal("empty listing without an error")
			}
			for i, e := range l.Entries {
				if i > 0 && l.Entries[i-1].Path >= e.Path {
					t.Fatalf("entries not sorted and unique: %q then %q", l.Entries[i-1].Path, e.Path)
				}
				if e.Path == "" || path.IsAbs(e.Path) || path.Clean(e.Path) != e.Path ||
					e.Path == ".." || strings.HasPrefix(e.Path, "../") {
					t.Fatalf("entry path %q is not a clean path inside the context", e.Path)
				}
				if _, err := os.Lstat(filepath.Join(ctxDir, filepath.FromSlash(e.Path))); err != nil {
					t.Fatalf("entry %q does not exist in the context: %v", e.Path, err)
				}
				if p := l.sourcePath(&l.Entries[i]); e.Kind == KindFile && !within(l.Context, p) {
					t.Fatalf("entry %q reads %s, outside the context", e.Path, p)
				}
			}
		}
	})
}
