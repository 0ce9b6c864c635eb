package attach

import (
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	docker "github.com/docker/docker/client"
)

// Shell is how commands run in a container: bash as a login shell as E2B
// does, or sh in images without bash.
type Shell struct {
	Path  string
	Login bool
}

// Command is the command line that runs cmd with the shell.
func (s Shell) Command(cmd string) (string, []string) {
	if s.Login {
		return s.Path, []string{"-l", "-c", cmd}
	}
	return s.Path, []string{"-c", cmd}
}

// FindShell looks for /bin/bash in the container, started or not.
func FindShell(ctx context.Context, cli *docker.Client, containerID string) (Shell, error) {
	_, err := cli.ContainerStatPath(ctx, containerID, "/bin/bash")
	switch {
	case err == nil:
		return Shell{Path: "/bin/bash", Login: true}, nil
	case cerrdefs.IsNotFound(err):
		return Shell{Path: "/bin/sh"}, nil
	}
	return Shell{}, fmt.Errorf("looking for /bin/bash: %w", err)
}
