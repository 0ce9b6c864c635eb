package engine

import (
	"context"
	"fmt"
)

// shell is how commands run: bash as a login shell as E2B does, or sh in
// images without bash.
type shell struct {
	path  string
	login bool
}

func (s shell) command(cmd string) (string, []string) {
	if s.login {
		return s.path, []string{"-l", "-c", cmd}
	}
	return s.path, []string{"-c", cmd}
}

// shellOf looks for /bin/bash in the container.
func (d *Docker) shellOf(ctx context.Context, containerID string) (shell, error) {
	_, err := d.cli.ContainerStatPath(ctx, containerID, "/bin/bash")
	switch {
	case err == nil:
		return shell{path: "/bin/bash", login: true}, nil
	case isNotFound(err):
		return shell{path: "/bin/sh"}, nil
	}
	return shell{}, fmt.Errorf("looking for /bin/bash: %w", err)
}
