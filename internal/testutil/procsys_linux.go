package testutil

import "golang.org/x/sys/unix"

// ProcSysReadOnly reports whether /proc/sys is mounted read-only, as in an
// unprivileged container: no one there can change kernel settings such as
// binfmt_misc's registrations.
func ProcSysReadOnly() bool {
	var st unix.Statfs_t
	return unix.Statfs("/proc/sys/fs", &st) == nil && st.Flags&unix.ST_RDONLY != 0
}
