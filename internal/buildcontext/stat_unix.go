//go:build linux || dragonfly || openbsd || solaris || illumos || darwin || ios || freebsd || netbsd

package buildcontext

import (
	"io/fs"
	"syscall"
)

// identityOf reads the stat fields the digest cache keys on and the raw st_mode the
// SDK-compatible hash feeds (file-type bits included).
func identityOf(fi fs.FileInfo) (FileID, uint32) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return portableIdentity(fi)
	}
	return FileID{
		Dev:     uint64(st.Dev), //nolint:unconvert // int32 on darwin and openbsd, uint32 on linux/mips* and dragonfly
		Ino:     st.Ino,
		Size:    fi.Size(),
		MtimeNs: fi.ModTime().UnixNano(),
		CtimeNs: ctimeNanos(st),
		Mode:    uint32(st.Mode), //nolint:unconvert // uint16 on darwin, freebsd and dragonfly
	}, uint32(st.Mode) //nolint:unconvert // as Mode above
}
