//go:build darwin || ios || freebsd || netbsd

package buildcontext

import "syscall"

func ctimeNanos(st *syscall.Stat_t) int64 { return st.Ctimespec.Nano() }
