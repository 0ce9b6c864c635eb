//go:build !linux

package buildcontext

import (
	"os"
	"path/filepath"
)

func openDir(dir string) (*dirReader, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	return &dirReader{f: f}, nil
}

// dirReader is an open directory.
type dirReader struct{ f *os.File }

// names lists the children's names, in directory order.
func (d *dirReader) names() ([]string, error) { return d.f.Readdirnames(-1) }

// lstat lstats the child name; safe for concurrent use.
func (d *dirReader) lstat(name string) childStat {
	fi, err := os.Lstat(filepath.Join(d.f.Name(), name))
	if err != nil {
		return childStat{err: err}
	}
	return statOf(fi)
}

func (d *dirReader) close() { d.f.Close() }
