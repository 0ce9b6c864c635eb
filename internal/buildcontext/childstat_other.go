//go:build !linux

package buildcontext

import (
	"os"
	"path/filepath"
)

func childStatter(dir string) (stat func(name string) childStat, done func(), err error) {
	stat = func(name string) childStat {
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil {
			return childStat{err: err}
		}
		return statOf(fi)
	}
	return stat, func() {}, nil
}
