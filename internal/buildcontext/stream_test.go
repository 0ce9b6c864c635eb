//go:build unix

package buildcontext

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"
	"time"
)

// TestStreamHashMemoryDoesNotGrow hashes trees of 3 and 16 windows of files in both
// modes: the peak live heap of the larger must stay within 4 MiB of the smaller's, where
// holding the entries, as a listing does, adds over 15 MiB. Each is measured twice, and the
// smaller tree's larger peak is compared with the larger tree's smaller one: how full the
// window gets depends on the timing of the reads, and under the race detector a peak
// sometimes doubles, on either tree, while growth with the count shows in every run.
func TestStreamHashMemoryDoesNotGrow(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 77,824 files")
	}
	tree := func(files int) string {
		d := t.TempDir()
		for i := range files {
			sub := filepath.Join(d, fmt.Sprintf("d%03d", i/100))
			if i%100 == 0 {
				mustDo(t, os.Mkdir(sub, 0o755))
			}
			mustDo(t, os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%03d", i%100)), nil, 0o644))
		}
		return d
	}
	// Both counts fill the window of entries in flight (hashWindow waiting for the hash
	// and, in the portable mode, as many queued for the digest workers), which bounds what
	// a stream holds.
	smallFiles, largeFiles := 3*hashWindow, 16*hashWindow
	smallTree, largeTree := tree(smallFiles), tree(largeFiles)
	for mode, hash := range map[string]func(context.Context, string, string, string, ListOptions, HashOptions) (StreamSummary, error){
		"portable": StreamPortableHash,
		"e2b-sdk":  StreamSDKHash,
	} {
		t.Run(mode, func(t *testing.T) {
			peak := func(d string) uint64 {
				return peakLiveHeap(t, func() {
					if _, err := hash(t.Context(), d, ".", "/d", ListOptions{}, HashOptions{}); err != nil {
						t.Fatal(err)
					}
				})
			}
			small, large := max(peak(smallTree), peak(smallTree)), min(peak(largeTree), peak(largeTree))
			t.Logf("peak live heap: %d KiB for %d files, %d KiB for %d", small>>10, smallFiles, large>>10, largeFiles)
			if large > small+4<<20 {
				t.Errorf("peak live heap grew from %d KiB to %d KiB with the file count", small>>10, large>>10)
			}
		})
	}
}

// peakLiveHeap runs f with a collection every 5 % of heap growth and returns the largest
// live heap a collection found.
func peakLiveHeap(t *testing.T, f func()) uint64 {
	t.Helper()
	defer debug.SetGCPercent(debug.SetGCPercent(5))
	runtime.GC()
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	var peak uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			metrics.Read(sample)
			peak = max(peak, sample[0].Value.Uint64())
			select {
			case <-done:
				return
			case <-time.After(100 * time.Microsecond):
			}
		}
	})
	f()
	close(done)
	wg.Wait()
	return peak
}
