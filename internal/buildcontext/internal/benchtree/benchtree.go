// Package benchtree generates the build context the buildcontext benchmarks run on:
// 10,000 files of 4 KiB in 100 directories plus ten files of 40 MiB (about 440 MB),
// filled with deterministic pseudo-random bytes and dated an hour back so the digest
// cache accepts them.
package benchtree

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"
)

const (
	SmallFiles = 10_000
	SmallSize  = 4 << 10
	BigFiles   = 10
	BigSize    = 40 << 20
	// TotalBytes is the sum of the file sizes.
	TotalBytes = SmallFiles*SmallSize + BigFiles*BigSize

	marker = ".benchtree-v1-complete"
)

// Ensure makes sure dir holds the tree, generating it unless a previous run completed it.
func Ensure(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, marker)); err == nil {
		return nil
	}
	rng := rand.NewChaCha8([32]byte{'e', '2', 'b'})
	for i := range SmallFiles {
		p := filepath.Join(dir, "src", fmt.Sprintf("d%02d", i/100), fmt.Sprintf("f%04d.dat", i))
		if err := writeFile(p, SmallSize, rng); err != nil {
			return err
		}
	}
	for i := range BigFiles {
		if err := writeFile(filepath.Join(dir, "big", fmt.Sprintf("blob%d.bin", i)), BigSize, rng); err != nil {
			return err
		}
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
	return os.WriteFile(filepath.Join(dir, marker), nil, 0o644) //nolint:gosec // G306: an empty marker in a benchmark tree
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
