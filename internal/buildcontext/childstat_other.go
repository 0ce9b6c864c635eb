//go:build !linux

package buildcontext

import (
	"io/fs"
	"os"
	"path/filepath"
)

func childStatter(dir string) (stat func(name string) (fs.FileInfo, error), done func(), err error) {
	return func(name string) (fs.FileInfo, error) { return os.Lstat(filepath.Join(dir, name)) }, func() {}, nil
}
