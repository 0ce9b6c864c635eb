// Package benchtree generates the build contexts the buildcontext benchmarks run on,
// filled with deterministic pseudo-random bytes and dated an hour back so the digest
// cache accepts them. The shapes (Shapes) are the benchmark tree of issue 2 (10,000
// files of 4 KiB in 100 directories plus ten files of 40 MiB, about 440 MB) and trees of
// many small files only, as node_modules or vendored dependencies make.
package benchtree

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"
)

const (
	SmallSize = 4 << 10
	BigSize   = 40 << 20
	// filesPerDir is how many small files share a directory.
	filesPerDir = 100
)

// Shape is a tree of Small files of SmallSize bytes, filesPerDir to a directory, and Big
// files of BigSize bytes.
type Shape struct {
	Name       string
	Small, Big int
}

// Shapes are the trees the benchmarks and scripts/bench-hash.sh know by name.
var Shapes = []Shape{
	{Name: "benchmark", Small: 10_000, Big: 10},
	{Name: "small-100k", Small: 100_000},
	{Name: "small-1m", Small: 1_000_000},
}

// ShapeNamed is the shape called name.
func ShapeNamed(name string) (Shape, error) {
	for _, s := range Shapes {
		if s.Name == name {
			return s, nil
		}
	}
	names := make([]string, len(Shapes))
	for i, s := range Shapes {
		names[i] = s.Name
	}
	return Shape{}, fmt.Errorf("unknown tree shape %q; the shapes are %s", name, strings.Join(names, ", "))
}

// TotalBytes is the sum of the file sizes.
func (s Shape) TotalBytes() int64 { return int64(s.Small)*SmallSize + int64(s.Big)*BigSize }

// Files is the number of files.
func (s Shape) Files() int { return s.Small + s.Big }

// marker records that a run completed the tree.
func (s Shape) marker() string { return fmt.Sprintf(".benchtree-v2-%d-%d-complete", s.Small, s.Big) }

// Ensure makes sure dir holds the tree of shape s, generating it unless a previous run
// completed it. The benchmark shape keeps the names it always had (src/d00/f0000.dat).
func Ensure(dir string, s Shape) error {
	if _, err := os.Stat(filepath.Join(dir, s.marker())); err == nil {
		return nil
	}
	rng := rand.NewChaCha8([32]byte{'e', '2', 'b'})
	fileDigits := len(fmt.Sprint(max(s.Small-1, 1)))
	dirDigits := len(fmt.Sprint(max((s.Small-1)/filesPerDir, 1)))
	for i := range s.Small {
		p := filepath.Join(dir, "src", fmt.Sprintf("d%0*d", dirDigits, i/filesPerDir), fmt.Sprintf("f%0*d.dat", fileDigits, i))
		if err := writeFile(p, SmallSize, rng); err != nil {
			return err
		}
	}
	for i := range s.Big {
		if err := writeFile(filepath.Join(dir, "big", fmt.Sprintf("blob%d.bin", i)), BigSize, rng); err != nil {
			return err
		}
	}
	// The marker is part of the tree, dated back with the rest, but counts only once
	// written and dated.
	marker := filepath.Join(dir, s.marker())
	if err := os.WriteFile(marker+".tmp", nil, 0o644); err != nil { //nolint:gosec // G306: an empty marker in a benchmark tree
		return err
	}
	past := time.Now().Add(-time.Hour)
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(p, past, past) //nolint:gosec // G122: a tree this process just generated, for benchmarks
	})
	if err != nil {
		return err
	}
	return os.Rename(marker+".tmp", marker)
}

func writeFile(p string, size int, rng *rand.ChaCha8) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var block [4096]byte
	for n := 0; n < size; n += len(block) {
		_, _ = rng.Read(block[:]) // ChaCha8.Read always fills block and returns nil
		if _, err := w.Write(block[:min(len(block), size-n)]); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// SHA256File digests one file through buf on the calling goroutine: the single-core
// sha256 baseline that both the Go benchmarks and the whole-process script compare with.
func SHA256File(p string, buf []byte) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	for {
		n, err := f.Read(buf)
		h.Write(buf[:n])
		if err == io.EOF {
			h.Sum(nil)
			return nil
		}
		if err != nil {
			return err
		}
	}
}
