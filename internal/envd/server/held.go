//go:build linux

package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// HeldByDeleted is the space (allocated blocks, in bytes) of the files
// deleted but still open by a process under procDir (/proc) that lie on
// the same kind of file system as root (/): what the engine's measure of
// a container's files, which walks the names, does not see. Each file
// counts once however many descriptors hold it. Files on other file
// systems (tmpfs, memfd) are bounded elsewhere. A process that ended
// during the count or whose descriptors root may not read (one that made
// itself non-dumpable) is passed over.
func HeldByDeleted(procDir, root string) (int64, error) {
	var rootFS unix.Statfs_t
	if err := unix.Statfs(root, &rootFS); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", root, err)
	}
	fdDirs, err := filepath.Glob(filepath.Join(procDir, "[0-9]*", "fd"))
	if err != nil {
		return 0, err
	}
	type fileID struct{ dev, ino uint64 }
	seen := map[fileID]bool{}
	var held int64
	for _, dir := range fdDirs {
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			p := filepath.Join(dir, fd.Name())
			target, err := os.Readlink(p)
			if err != nil || !strings.HasSuffix(target, " (deleted)") || !strings.HasPrefix(target, "/") {
				continue
			}
			var st unix.Stat_t
			var fs unix.Statfs_t
			// Both follow the descriptor's link to the open file.
			if unix.Stat(p, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || unix.Statfs(p, &fs) != nil || fs.Type != rootFS.Type {
				continue
			}
			id := fileID{uint64(st.Dev), st.Ino} //nolint:unconvert // Dev is uint32 on some architectures
			if !seen[id] {
				seen[id] = true
				held += st.Blocks * 512
			}
		}
	}
	return held, nil
}
