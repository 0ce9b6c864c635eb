package buildcontext

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// resolveLink follows a symlink for ListOptions.ResolveLinks. It returns the target's
// path and lstat, or a nil FileInfo when the target does not exist (the link is then
// listed as a link). A target outside the context is an error.
func (l *lister) resolveLink(rel, abs string) (string, fs.FileInfo, error) {
	target, err := os.Readlink(abs)
	if err != nil {
		return "", nil, fmt.Errorf("reading symlink %s in build context %s: %w", rel, l.root, err)
	}
	outside := func(where string) error {
		return &contextError{fmt.Sprintf("symlink %s in build context %s points outside the context (%s -> %s)", rel, l.root, target, where), ErrLinkOutside}
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return "", nil, fmt.Errorf("resolving symlink %s in build context %s: %w", rel, l.root, err)
		}
		lexical := target
		if !filepath.IsAbs(lexical) {
			lexical = filepath.Join(filepath.Dir(abs), lexical)
		}
		if !within(l.root, lexical) {
			return "", nil, outside(lexical)
		}
		return "", nil, nil
	}
	if !within(l.root, resolved) {
		return "", nil, outside(resolved)
	}
	fi, err := os.Lstat(resolved)
	if err != nil {
		return "", nil, fmt.Errorf("resolving symlink %s in build context %s: %w", rel, l.root, err)
	}
	return resolved, fi, nil
}

func within(root, p string) bool {
	r, err := filepath.Rel(root, p)
	return err == nil && r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator)) && !filepath.IsAbs(r)
}

// newEntry is the entry for rel, lstat'ed as st; abs is its path (needed for a symlink)
// and resolved what it points to when the listing resolved it.
func newEntry(rel, abs, resolved string, st childStat) (Entry, error) {
	e := Entry{Path: rel, Perm: st.mode.Perm(), Size: st.id.Size, ID: st.id, resolved: resolved}
	switch {
	case st.mode.IsRegular():
		e.Kind = KindFile
	case st.mode.IsDir():
		e.Kind = KindDir
	default:
		e.Kind = KindSymlink
		target, err := os.Readlink(abs)
		if err != nil {
			return Entry{}, fmt.Errorf("reading symlink %s: %w", rel, err)
		}
		e.LinkTarget = filepath.ToSlash(target)
	}
	return e, nil
}

func specialKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}
