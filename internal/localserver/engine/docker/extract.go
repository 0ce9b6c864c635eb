package docker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	docker "github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine/attach"
)

// maxExtractOutput bounds what an extraction's error message may hold.
const maxExtractOutput = 64 << 10

// extractInside writes the tar archive content below dir in the running
// container, by envd --extract started as root through the engine's exec
// API with content on its standard input. The container's own kernel
// writes the files, so its next process sees them whatever the runtime
// caches; the engine's archive API writes them from outside, which gVisor
// does not see once the container looked at the place.
func extractInside(ctx context.Context, cli *docker.Client, containerID, dir string, content io.Reader) error {
	exec, err := cli.ContainerExecCreate(ctx, containerID, container.ExecOptions{
		User: "0:0", AttachStdin: true, AttachStdout: true, AttachStderr: true,
		Cmd: []string{attach.EnvdPath, "envd", "--extract", dir},
	})
	if err != nil {
		return fmt.Errorf("start the extraction: %w", err)
	}
	hj, err := cli.ContainerExecAttach(ctx, exec.ID, container.ExecAttachOptions{})
	if err != nil {
		return fmt.Errorf("start the extraction: %w", err)
	}
	defer hj.Close()
	stop := context.AfterFunc(ctx, hj.Close)
	defer stop()

	sent := make(chan error, 1)
	go func() {
		_, err := io.Copy(hj.Conn, content)
		if err == nil {
			err = hj.CloseWrite()
		}
		if err != nil {
			hj.Close() // the extraction must not wait for the rest
		}
		sent <- err
	}()
	var out bytes.Buffer
	_, readErr := stdcopy.StdCopy(&out, &out, io.LimitReader(hj.Reader, maxExtractOutput))
	hj.Close() // an extraction that ended early stops the sending
	sendErr := <-sent
	if ctx.Err() != nil {
		return ctx.Err()
	}
	insp, err := execEnd(ctx, cli, exec.ID)
	if err != nil {
		return err
	}
	switch {
	case insp.Running:
		return fmt.Errorf("the extraction's output ended before it did: %v", readErr)
	case sendErr != nil && insp.ExitCode == 0:
		return fmt.Errorf("sending the archive: %w", sendErr)
	case insp.ExitCode != 0:
		return fmt.Errorf("%s (exit code %d)", strings.TrimSpace(out.String()), insp.ExitCode)
	}
	return nil
}

// execStarted waits until the engine runs the exec execID, or failed to
// start it. Its process ID says so, not Running, which the engine sets
// before the runtime has started the process.
func execStarted(ctx context.Context, cli *docker.Client, execID string) error {
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		insp, err := cli.ContainerExecInspect(ctx, execID)
		if err != nil {
			return fmt.Errorf("the exec's start: %w", err)
		}
		if insp.Pid != 0 || insp.ExitCode != 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// execEnd inspects an exec whose output ended: the engine records the
// exit code a moment after it closes the streams.
func execEnd(ctx context.Context, cli *docker.Client, execID string) (container.ExecInspect, error) {
	for wait := 10 * time.Millisecond; ; wait *= 2 {
		insp, err := cli.ContainerExecInspect(ctx, execID)
		if err != nil {
			return insp, fmt.Errorf("the exec's end: %w", err)
		}
		if !insp.Running || wait > 2*time.Second {
			return insp, nil
		}
		select {
		case <-ctx.Done():
			return insp, ctx.Err()
		case <-time.After(wait):
		}
	}
}
