package buildcontext

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// TestDirReaderAgreesWithLstat checks the raw getdents and statx reading against the os
// package: the same names (several getdents calls' worth, the longest names allowed) and,
// for every kind of entry, the mode and stat identity os.Lstat gives, through statx and
// through the fstatat fallback.
func TestDirReaderAgreesWithLstat(t *testing.T) {
	dir := t.TempDir()
	for i := range 300 { // about 70 KB of records, eight times the getdents buffer
		name := strings.Repeat(string(rune('a'+i%26)), 200) + strings.Repeat("x", i%53) + "-" + string(rune('A'+i/26))
		mustDo(t, os.WriteFile(filepath.Join(dir, name), []byte("content"), 0o640))
	}
	mustDo(t, os.WriteFile(filepath.Join(dir, strings.Repeat("n", 255)), nil, 0o600))
	mustDo(t, os.Mkdir(filepath.Join(dir, "sub"), 0o750))
	mustDo(t, os.Symlink("sub", filepath.Join(dir, "link")))
	mustDo(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600))
	mustDo(t, os.WriteFile(filepath.Join(dir, "exec"), nil, 0o4755))

	d, err := openDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	names, err := d.names()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	if len(names) != len(want) {
		t.Fatalf("%d names, os.ReadDir has %d", len(names), len(want))
	}
	for i, name := range names {
		if name != want[i].Name() {
			t.Fatalf("name %d is %q, os.ReadDir has %q", i, name, want[i].Name())
		}
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		lstat := statOf(fi)
		for how, got := range map[string]childStat{"statx": d.lstat(name), "fstatat": d.fstatat(name)} {
			if got.err != nil || got.mode != lstat.mode || got.id != lstat.id {
				t.Errorf("%s of %s = %+v, os.Lstat gives %+v", how, name, got, lstat)
			}
		}
	}
	missing := "missing\x00"[:7] // lstat takes names followed by NUL, as names returns them
	if st := d.lstat(missing); !os.IsNotExist(st.err) || !strings.Contains(st.err.Error(), filepath.Join(dir, "missing")) {
		t.Errorf("lstat of a missing name: %v, want a not-exist error naming the path", st.err)
	}
}

// BenchmarkStatFloor is the system calls of a listing of the benchmark tree and nothing
// else: open, getdents and close of every directory and an lstat of every entry, spread
// over GOMAXPROCS goroutines. It is the floor under BenchmarkList and so under a warm hash.
func BenchmarkStatFloor(b *testing.B) {
	root := benchTree(b)
	var dirs []string
	if err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return err
	}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range runtime.GOMAXPROCS(0) {
			wg.Go(func() {
				for i := int(next.Add(1)) - 1; i < len(dirs); i = int(next.Add(1)) - 1 {
					d, err := openDir(dirs[i])
					if err != nil {
						b.Error(err)
						return
					}
					names, err := d.names()
					for _, name := range names {
						if st := d.lstat(name); st.err != nil {
							b.Error(st.err)
						}
					}
					d.close()
					if err != nil {
						b.Error(err)
					}
				}
			})
		}
		wg.Wait()
	}
}
