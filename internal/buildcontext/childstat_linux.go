package buildcontext

import (
	"bytes"
	"encoding/binary"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

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

// names lists the children's names, in directory order, without "." and "..". They share
// one allocation in which each name is followed by a NUL byte, which lets lstat hand a
// name to the kernel as it is: a listing does this for every entry.
func (d *dirReader) names() ([]string, error) {
	bp := direntBufferPool.Get().(*[]byte) //nolint:forcetypeassert // the pool holds only the *[]byte its New makes and this function puts back
	defer direntBufferPool.Put(bp)
	var text strings.Builder // the names, each followed by NUL
	var ends []int           // where each name ends in text
	for {
		n, err := unix.Getdents(d.fd, *bp)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "readdirent", Path: d.path, Err: err}
		}
		if n <= 0 {
			break
		}
		text.Grow(n) // the names take less room than their records
		ends = appendDirentNames(&text, ends, (*bp)[:n])
	}
	all := text.String()
	names := make([]string, len(ends))
	start := 0
	for i, end := range ends {
		names[i] = all[start:end]
		start = end + 1
	}
	return names, nil
}

// appendDirentNames writes the names in the linux_dirent64 records of buf to text, each
// followed by NUL, and appends where each ends; it skips ".", ".." and deleted entries
// (inode 0), as unix.ParseDirent does.
func appendDirentNames(text *strings.Builder, ends []int, buf []byte) []int {
	const nameOffset = int(unsafe.Offsetof(unix.Dirent{}.Name))
	for len(buf) >= nameOffset {
		reclen := int(binary.NativeEndian.Uint16(buf[unsafe.Offsetof(unix.Dirent{}.Reclen):]))
		if reclen < nameOffset || reclen > len(buf) {
			break // a malformed record; getdents never returns one
		}
		rec := buf[:reclen]
		buf = buf[reclen:]
		if binary.NativeEndian.Uint64(rec[unsafe.Offsetof(unix.Dirent{}.Ino):]) == 0 {
			continue
		}
		name := rec[nameOffset:]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		if string(name) == "." || string(name) == ".." {
			continue
		}
		text.Write(name)
		ends = append(ends, text.Len())
		text.WriteByte(0)
	}
	return ends
}

// statxMask is what childStat holds: type and permissions, inode, size, mtime, ctime.
const statxMask = unix.STATX_TYPE | unix.STATX_MODE | unix.STATX_INO | unix.STATX_SIZE | unix.STATX_MTIME | unix.STATX_CTIME

// statxMissing is set once statx answers ENOSYS (Linux < 4.11) or EPERM (an old seccomp
// profile): lstat then uses fstatat.
var statxMissing atomic.Bool

// lstat lstats the child name, which must be one of the strings names returned (see
// there); safe for concurrent use.
func (d *dirReader) lstat(name string) childStat {
	if statxMissing.Load() {
		return d.fstatat(name)
	}
	var stx unix.Statx_t
	for {
		// Statx without its wrapper, which would copy name to add the NUL it already has.
		_, _, errno := unix.Syscall6(unix.SYS_STATX, uintptr(d.fd), uintptr(unsafe.Pointer(unsafe.StringData(name))),
			unix.AT_SYMLINK_NOFOLLOW, statxMask, uintptr(unsafe.Pointer(&stx)), 0)
		switch errno {
		case 0:
			return childStat{mode: fileMode(uint32(stx.Mode)), id: FileID{
				Dev:     unix.Mkdev(stx.Dev_major, stx.Dev_minor), // as st_dev encodes it
				Ino:     stx.Ino,
				Size:    int64(stx.Size), //nolint:gosec // st_size, which the kernel keeps below 2^63
				MtimeNs: stx.Mtime.Sec*1e9 + int64(stx.Mtime.Nsec),
				CtimeNs: stx.Ctime.Sec*1e9 + int64(stx.Ctime.Nsec),
				Mode:    uint32(stx.Mode),
			}}
		case unix.EINTR:
			continue
		case unix.ENOSYS, unix.EPERM:
			statxMissing.Store(true)
			return d.fstatat(name)
		}
		return childStat{err: &os.PathError{Op: "lstat", Path: d.path + "/" + name, Err: errno}}
	}
}

// fstatat is lstat through fstatat(2), for kernels without statx.
func (d *dirReader) fstatat(name string) childStat {
	var st unix.Stat_t
	for {
		err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return childStat{err: &os.PathError{Op: "lstat", Path: d.path + "/" + name, Err: err}}
		}
		return childStat{mode: fileMode(st.Mode), id: fileIDOf(&st)}
	}
}

func fileIDOf(st *unix.Stat_t) FileID {
	return FileID{
		Dev:     uint64(st.Dev), //nolint:unconvert // uint32 on linux/mips*
		Ino:     st.Ino,
		Size:    st.Size,
		MtimeNs: st.Mtim.Nano(),
		CtimeNs: st.Ctim.Nano(),
		Mode:    st.Mode,
	}
}

// contentFile is a file opened to read its bytes with open(2) alone: os.Open also offers
// each file to the poller (four fcntl and an epoll_ctl, which fails for a regular file),
// twice the system calls a small file needs.
type contentFile struct {
	path string
	fd   int
}

func openContent(path string) (*contentFile, error) {
	for {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: path, Err: err}
		}
		return &contentFile{path: path, fd: fd}, nil
	}
}

func (f *contentFile) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		n, err := unix.Read(f.fd, p)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, &os.PathError{Op: "read", Path: f.path, Err: err}
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// identity is the stat identity of the open file.
func (f *contentFile) identity() (FileID, error) {
	var st unix.Stat_t
	for {
		err := unix.Fstat(f.fd, &st)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return FileID{}, &os.PathError{Op: "fstat", Path: f.path, Err: err}
		}
		return fileIDOf(&st), nil
	}
}

func (f *contentFile) Close() error { return unix.Close(f.fd) }

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
