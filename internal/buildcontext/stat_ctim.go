//go:build linux || dragonfly || openbsd || solaris || illumos

package buildcontext

import "syscall"

func ctimeNanos(st *syscall.Stat_t) int64 { return st.Ctim.Nano() }
