package buildcontext

import "errors"

// Sentinel errors, matched with errors.Is; the messages of the returned errors name the
// source, file or link at fault.
var (
	ErrInvalidSrc   = errors.New("invalid COPY source")
	ErrNoMatch      = errors.New("no files match")
	ErrSpecialFile  = errors.New("special file in build context")
	ErrLinkOutside  = errors.New("symlink points outside the build context")
	ErrChanged      = errors.New("build context changed")
	ErrNotDigested  = errors.New("listing has no file digests")
	ErrIgnoreLimit  = errors.New(".dockerignore beyond its limits")
	errSymlinkCycle = errors.New("symlink cycle")
)

// contextError carries a full message and the sentinel it matches.
type contextError struct {
	msg  string
	kind error
}

func (e *contextError) Error() string { return e.msg }
func (e *contextError) Unwrap() error { return e.kind }
