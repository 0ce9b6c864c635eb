package buildcontext

import (
	"io/fs"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// childStatter lstats names relative to an open directory (fstatat), which spares the
// kernel a path walk per entry: a third of the cost of os.Lstat on a full path.
func childStatter(dir string) (stat func(name string) (fs.FileInfo, error), done func(), err error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	stat = func(name string) (fs.FileInfo, error) {
		fi := &statInfo{name: name}
		for {
			err := unix.Fstatat(fd, name, &fi.st, unix.AT_SYMLINK_NOFOLLOW)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return nil, &os.PathError{Op: "lstat", Path: dir + "/" + name, Err: err}
			}
			return fi, nil
		}
	}
	return stat, func() { unix.Close(fd) }, nil
}

// statInfo is an fs.FileInfo over a raw stat, with the same meaning os.Lstat gives it.
type statInfo struct {
	name string
	st   unix.Stat_t
}

func (s *statInfo) identity() (FileID, uint32) {
	return FileID{
		Dev:     uint64(s.st.Dev), //nolint:unconvert // uint32 on linux/mips*
		Ino:     s.st.Ino,
		Size:    s.st.Size,
		MtimeNs: s.st.Mtim.Nano(),
		CtimeNs: s.st.Ctim.Nano(),
		Mode:    s.st.Mode,
	}, s.st.Mode
}

func (s *statInfo) Name() string       { return s.name }
func (s *statInfo) Size() int64        { return s.st.Size }
func (s *statInfo) ModTime() time.Time { return time.Unix(s.st.Mtim.Unix()) }
func (s *statInfo) IsDir() bool        { return s.Mode().IsDir() }
func (s *statInfo) Sys() any           { return &s.st }

func (s *statInfo) Mode() fs.FileMode {
	m := fs.FileMode(s.st.Mode & 0o777)
	switch s.st.Mode & unix.S_IFMT {
	case unix.S_IFBLK:
		m |= fs.ModeDevice
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	}
	if s.st.Mode&unix.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if s.st.Mode&unix.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if s.st.Mode&unix.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}
