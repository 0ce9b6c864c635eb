package buildcontext

import (
	"io/fs"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// openDir opens a directory once for both reading its names and lstat'ing its children
// relative to it (fstatat), which spares the kernel a path walk per entry (a third of the
// cost of os.Lstat on a full path) and os.File's poller setup per directory.
func openDir(dir string) (*dirReader, error) {
	for {
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: dir, Err: err}
		}
		return &dirReader{path: dir, fd: fd}, nil
	}
}

// dirReader is an open directory.
type dirReader struct {
	path string
	fd   int
}

var direntBufferPool = sync.Pool{New: func() any { b := make([]byte, 8<<10); return &b }}

// names lists the children's names, in directory order, without "." and "..".
func (d *dirReader) names() ([]string, error) {
	bp := direntBufferPool.Get().(*[]byte) //nolint:forcetypeassert // the pool holds only the *[]byte its New makes and this function puts back
	defer direntBufferPool.Put(bp)
	var names []string
	for {
		n, err := unix.Getdents(d.fd, *bp)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "readdirent", Path: d.path, Err: err}
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent((*bp)[:n], -1, names)
	}
}

// lstat lstats the child name; safe for concurrent use.
func (d *dirReader) lstat(name string) childStat {
	var st unix.Stat_t
	for {
		err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return childStat{err: &os.PathError{Op: "lstat", Path: d.path + "/" + name, Err: err}}
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

func (d *dirReader) close() { unix.Close(d.fd) }

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
