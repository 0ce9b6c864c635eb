//go:build unix

package buildcontext

import (
	"cmp"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/buildcontext/internal/benchtree"
)

// The benchmarks run on a tree of package benchtree, of the shape $E2B_BENCH_SHAPE (the
// benchmark tree by default): generated once per process under a temporary directory, or
// kept in $E2B_BENCH_TREE between runs. Each COPYs the whole context ("."), so listing is
// part of every figure.
var (
	benchTreeOnce      sync.Once
	benchTreeDir       string
	benchTreeShape     benchtree.Shape
	benchTreeErr       error
	benchTreeGenerated bool // a temporary tree, removed when the tests end
)

func TestMain(m *testing.M) {
	code := m.Run()
	if benchTreeGenerated {
		os.RemoveAll(benchTreeDir)
	}
	os.Exit(code)
}

func benchTree(b *testing.B) string {
	b.Helper()
	benchTreeOnce.Do(func() {
		benchTreeShape, benchTreeErr = benchtree.ShapeNamed(cmp.Or(os.Getenv("E2B_BENCH_SHAPE"), "benchmark"))
		if benchTreeErr != nil {
			return
		}
		benchTreeDir = os.Getenv("E2B_BENCH_TREE")
		if benchTreeDir == "" {
			// Not b.TempDir, which would go at the end of the first benchmark: they all
			// share the tree, and TestMain removes it.
			benchTreeDir, benchTreeErr = os.MkdirTemp("", "e2b-bench-tree-") //nolint:usetesting // outlives one benchmark, see above
			benchTreeGenerated = benchTreeErr == nil
		}
		if benchTreeErr == nil {
			benchTreeErr = benchtree.Ensure(benchTreeDir, benchTreeShape)
		}
	})
	if benchTreeErr != nil {
		b.Fatalf("generating the benchmark tree: %v", benchTreeErr)
	}
	return benchTreeDir
}

// BenchmarkSHA256OneCore is the baseline: plain sha256 of every file, one after the
// other, on one goroutine.
func BenchmarkSHA256OneCore(b *testing.B) {
	dir := benchTree(b)
	var files []string
	if err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			files = append(files, p)
		}
		return err
	}); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, readBufferSize)
	b.SetBytes(benchTreeShape.TotalBytes())
	b.ReportAllocs()
	for b.Loop() {
		for _, p := range files {
			if err := benchtree.SHA256File(p, buf); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkPortableHashCold(b *testing.B) {
	dir := benchTree(b)
	cacheDir := b.TempDir()
	b.SetBytes(benchTreeShape.TotalBytes())
	b.ReportAllocs()
	for b.Loop() {
		cachePath := filepath.Join(cacheDir, "digests.bin")
		os.Remove(cachePath)
		benchPortableHash(b, dir, cachePath)
	}
}

func BenchmarkPortableHashWarm(b *testing.B) {
	dir := benchTree(b)
	cachePath := filepath.Join(b.TempDir(), "digests.bin")
	benchPortableHash(b, dir, cachePath)
	b.SetBytes(benchTreeShape.TotalBytes())
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if stats := benchPortableHash(b, dir, cachePath); stats.Read != 0 {
			b.Fatalf("warm run read %d files", stats.Read)
		}
	}
}

// benchPortableHash is one terraform plan: open the cache, hash streaming, save the cache.
func benchPortableHash(b *testing.B, dir, cachePath string) DigestStats {
	cache := OpenStatCache(cachePath)
	sum, err := StreamPortableHash(b.Context(), dir, ".", "/app", ListOptions{}, HashOptions{Cache: cache})
	if err != nil {
		b.Fatal(err)
	}
	if err := cache.Save(); err != nil {
		b.Fatal(err)
	}
	return sum.Stats
}

// BenchmarkSDKHash is the SDK-compatible hash without a cache, as a cold run.
func BenchmarkSDKHash(b *testing.B) {
	dir := benchTree(b)
	b.SetBytes(benchTreeShape.TotalBytes())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := StreamSDKHash(b.Context(), dir, ".", "/app", ListOptions{}, HashOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkArchive spools the archive of a hashed context as apply does after the plan:
// a second walk that reads every file and checks the step's hash.
func BenchmarkArchive(b *testing.B) {
	dir := benchTree(b)
	sum, err := StreamPortableHash(b.Context(), dir, ".", "/app", ListOptions{}, HashOptions{})
	if err != nil {
		b.Fatal(err)
	}
	spool := b.TempDir()
	b.SetBytes(benchTreeShape.TotalBytes())
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		path, _, err := SpoolArchive(spool, ".", func(w io.Writer) error {
			return WriteStepArchive(b.Context(), w, dir, ".", "/app", ListOptions{}, ArchiveCheck{PortableHash: sum.Hash})
		})
		if err != nil {
			b.Fatal(err)
		}
		os.Remove(path)
	}
}

// BenchmarkList is the listing alone, the floor under a warm hash.
func BenchmarkList(b *testing.B) {
	dir := benchTree(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := List(dir, ".", ListOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSDKHashWarm is the SDK-compatible hash of an unchanged tree with the digest
// cache: a walk, the cached digests and the step record, no file read.
func BenchmarkSDKHashWarm(b *testing.B) {
	dir := benchTree(b)
	cachePath := filepath.Join(b.TempDir(), "digests.bin")
	sdkHash := func() DigestStats {
		cache := OpenStatCache(cachePath)
		sum, err := StreamSDKHash(b.Context(), dir, ".", "/app", ListOptions{}, HashOptions{Cache: cache})
		if err != nil {
			b.Fatal(err)
		}
		if err := cache.Save(); err != nil {
			b.Fatal(err)
		}
		return sum.Stats
	}
	sdkHash()
	b.SetBytes(benchTreeShape.TotalBytes())
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if stats := sdkHash(); stats.Read != 0 {
			b.Fatalf("warm run read %d files", stats.Read)
		}
	}
}
