package buildcontext

import (
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// childStatter lstats names relative to an open directory (fstatat), which spares the
// kernel a path walk per entry: a third of the cost of os.Lstat on a full path. The raw
// stat goes straight into a childStat, without an fs.FileInfo per child.
func childStatter(dir string) (stat func(name string) childStat, done func(), err error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	stat = func(name string) childStat {
		var st unix.Stat_t
		for {
			err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return childStat{err: &os.PathError{Op: "lstat", Path: dir + "/" + name, Err: err}}
			}
			return childStat{mode: fileMode(st.Mode), id: FileID{
				Dev:     uint64(st.Dev), //nolint:unconvert // uint32 on linux/mips*
				Ino:     st.Ino,
				Size:    st.Size,
				MtimeNs: st.Mtim.Nano(),
				CtimeNs: st.Ctim.Nano(),
				Mode:    st.Mode,
			}}
		}
	}
	return stat, func() { unix.Close(fd) }, nil
}

// fileMode is the fs.FileMode os.Lstat gives for the raw st_mode m.
func fileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	}
	if m&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}
