//go:build !linux

package testutil

// ProcSysReadOnly is false where there is no /proc/sys.
func ProcSysReadOnly() bool { return false }
