package buildcontext

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// readAheadWindow is how many subdirectories of one directory are read ahead at a time:
// enough to keep GOMAXPROCS read-ahead goroutines busy.
const readAheadWindow = 64

// dirScan is one read of a directory: its children's names, sorted, and their lstat.
type dirScan struct {
	names []string
	stats []childStat
	err   error // opening or reading the directory failed
}

func scanDir(dir string) dirScan {
	d, err := openDir(dir)
	if err != nil {
		return dirScan{err: err}
	}
	defer d.close()
	names, err := d.names()
	if err != nil {
		return dirScan{err: err}
	}
	slices.Sort(names)
	return dirScan{names: names, stats: lstatChildren(d, names)}
}

// lstatChildren lstats the children of a directory, spread over GOMAXPROCS goroutines
// when there are very many: smaller directories are spread by the read-ahead instead.
func lstatChildren(d *dirReader, names []string) []childStat {
	stats := make([]childStat, len(names))
	lstatRange := func(from, to int) {
		for i := from; i < to; i++ {
			stats[i] = d.lstat(names[i])
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(names)/minLstatsPerWorker)
	if workers <= 1 {
		lstatRange(0, len(names))
		return stats
	}
	var wg sync.WaitGroup
	chunk := (len(names) + workers - 1) / workers
	for from := 0; from < len(names); from += chunk {
		wg.Go(func() { lstatRange(from, min(from+chunk, len(names))) })
	}
	wg.Wait()
	return stats
}

// minLstatsPerWorker keeps goroutines inside one directory for directories so large that
// reading ahead of their siblings cannot keep the cores busy.
const minLstatsPerWorker = 512

// readAhead scans directories on other goroutines, at most GOMAXPROCS at once, before the
// walk needs them.
type readAhead struct {
	slots   chan struct{}
	wg      sync.WaitGroup
	stopped atomic.Bool
}

func newReadAhead() *readAhead {
	return &readAhead{slots: make(chan struct{}, runtime.GOMAXPROCS(0))}
}

// pendingScan is a directory scan that runs once, on a read-ahead goroutine or on the
// walk itself if it gets there first.
type pendingScan struct {
	dir  string
	once sync.Once
	scan dirScan
}

func (p *pendingScan) result() dirScan {
	p.once.Do(func() { p.scan = scanDir(p.dir) })
	return p.scan
}

// start queues a scan of dir.
func (r *readAhead) start(dir string) *pendingScan {
	p := &pendingScan{dir: dir}
	r.wg.Go(func() {
		r.slots <- struct{}{}
		defer func() { <-r.slots }()
		if !r.stopped.Load() {
			p.result()
		}
	})
	return p
}

// now is a scan of dir that the walk runs itself when it asks for the result.
func (r *readAhead) now(dir string) *pendingScan { return &pendingScan{dir: dir} }

// stop skips the scans not yet started (the walk has ended, maybe on an error) and waits
// for those running.
func (r *readAhead) stop() {
	r.stopped.Store(true)
	r.wg.Wait()
}
