//go:build !(linux || dragonfly || openbsd || solaris || illumos || darwin || ios || freebsd || netbsd)

package buildcontext

import "io/fs"

// identityOf has no device, inode or ctime on these systems; the digest cache then keys on
// size, mtime and mode only, which is weaker but still never trusts a size or mtime change.
func identityOf(fi fs.FileInfo) (FileID, uint32) { return portableIdentity(fi) }
