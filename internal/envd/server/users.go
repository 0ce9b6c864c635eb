//go:build linux

package server

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"connectrpc.com/connect"
)

// osUser is an account requests run as. os/user reads /etc/passwd and
// /etc/group in pure Go, so the static envd binary needs no libc.
type osUser struct {
	name   string
	uid    uint32
	gid    uint32
	groups []uint32
	home   string
}

func lookupUser(name string) (*osUser, error) {
	u, err := user.Lookup(name)
	if err != nil {
		if name == fallbackUser {
			// uid 0 exists even in images without /etc/passwd (minimal
			// or busybox-static rootfs).
			return &osUser{name: fallbackUser, home: rootHome()}, nil
		}
		return nil, err
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %q has non-numeric uid %q", name, u.Uid)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %q has non-numeric gid %q", name, u.Gid)
	}
	ou := &osUser{name: u.Username, uid: uint32(uid), gid: uint32(gid), home: u.HomeDir}
	if ou.home == "" {
		ou.home = "/"
	}
	groupIDs, err := u.GroupIds()
	if err == nil {
		for _, g := range groupIDs {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				ou.groups = append(ou.groups, uint32(n))
			}
		}
	}
	return ou, nil
}

// rpcUser resolves the user of a Connect request: Authorization: Basic
// base64("<user>:") (password ignored), else the default user.
func (s *Server) rpcUser(h http.Header) (*osUser, error) {
	name := s.settings().defaultUser
	if auth := h.Get("Authorization"); auth != "" {
		scheme, encoded, _ := strings.Cut(auth, " ")
		if !strings.EqualFold(scheme, "Basic") {
			return nil, connect.NewError(connect.CodeUnauthenticated, fmt.Errorf("unsupported authorization scheme %q", scheme))
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(encoded))
		if err != nil {
			return nil, connect.NewError(connect.CodeUnauthenticated, fmt.Errorf("invalid basic authorization: %v", err))
		}
		name, _, _ = strings.Cut(string(raw), ":")
	}
	u, err := lookupUser(name)
	if err != nil {
		return nil, connect.NewError(connect.CodeUnauthenticated, fmt.Errorf("invalid username: '%s'", name))
	}
	return u, nil
}

// credential is what a process started for u runs as, or nil when the daemon
// is not root and cannot switch (processes then run as the daemon's user).
func (u *osUser) credential() *syscall.Credential {
	if !isRoot() {
		return nil
	}
	return &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: u.groups}
}

// resolvePath resolves a request path for u as envd's ExpandAndResolve
// does, for every path a client names (files, directories, a process's cwd):
// empty → the default workdir, else the home; "~" and "~/x" expand to the
// home ("~user" is an error); relative paths are relative to the home. The
// result is clean and absolute.
func (u *osUser) resolvePath(p, defaultWorkdir string) (string, error) {
	if p == "" {
		p = defaultWorkdir
	}
	if strings.HasPrefix(p, "~") {
		if len(p) > 1 && p[1] != '/' && p[1] != '\\' {
			return "", fmt.Errorf("failed to expand path '%s' for user '%s': cannot expand user-specific home dir", p, u.name)
		}
		p = filepath.Join(u.home, p[1:])
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p), nil
	}
	return filepath.Join(u.home, p), nil
}

// chown gives u a file the daemon created on u's behalf. Only root can give
// files away; otherwise the daemon's own ownership is already the best there is.
func (u *osUser) chown(path string) error {
	if !isRoot() {
		return nil
	}
	if err := os.Lchown(path, int(u.uid), int(u.gid)); err != nil {
		return fmt.Errorf("chown %s to %s: %w", path, u.name, err)
	}
	return nil
}

// mkdirAll creates dir and its missing parents top down, as envd's
// EnsureDirs does, giving each created directory to u. An ancestor that is
// not a directory fails it with "path is a file: <ancestor>" (design/envd.md).
func (u *osUser) mkdirAll(dir string) error {
	var chain []string
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		chain = append(chain, p)
		if p == filepath.Dir(p) {
			break
		}
	}
	for i := len(chain) - 1; i >= 0; i-- {
		p := chain[i]
		fi, err := os.Stat(p) //nolint:gosec // envd opens the paths its clients name, as the user they name: that is its API (design/envd.md)
		switch {
		case err == nil && fi.IsDir():
			continue
		case err == nil:
			return fmt.Errorf("path is a file: %s", p)
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("failed to stat directory: %w", err)
		}
		if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) { //nolint:gosec // envd opens the paths its clients name, as the user they name: that is its API (design/envd.md)
			return fmt.Errorf("failed to create directory: %w", err)
		}
		if err := u.chown(p); err != nil {
			return err
		}
	}
	return nil
}

// rootHome is /root when it exists, else /.
func rootHome() string {
	if fi, err := os.Stat("/root"); err == nil && fi.IsDir() {
		return "/root"
	}
	return "/"
}
