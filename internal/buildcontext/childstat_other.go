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

// contentFile is a file opened to read its bytes.
type contentFile struct{ *os.File }

func openContent(path string) (*contentFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return &contentFile{f}, nil
}

// identity is the stat identity of the open file.
func (f *contentFile) identity() (FileID, error) {
	fi, err := f.Stat()
	if err != nil {
		return FileID{}, err
	}
	id, _ := identityOf(fi)
	return id, nil
}
