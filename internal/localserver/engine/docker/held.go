package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	docker "github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine/attach"
)

// errHeldCount is a count of held files that the container broke.
type errHeldCount struct{ why string }

func (e *errHeldCount) Error() string { return "its count of deleted files still open " + e.why }

// heldByDeleted is the space held by files deleted but still open in the
// running container id, as envd --held-deleted counts it inside (the
// engine's measure of a container's files walks names and misses them),
// started as root from the read-only envd volume through the engine's exec
// API: no file of the engine's is read from outside. Root in the container
// may kill, stop or fool that count; one that fails or does not answer
// before ctx's deadline is an *errHeldCount, for the watchdog to stop the
// container, never a pass. An error of the engine's (one that could not
// start it) is a plain error; a container frozen by a pause or a commit
// (attach.ErrFrozen) is not counted, since it writes nothing meanwhile.
func heldByDeleted(ctx context.Context, cli *docker.Client, a *attach.Attachment, id string) (int64, error) {
	var execID string
	var hj types.HijackedResponse
	start := func() error {
		exec, err := cli.ContainerExecCreate(ctx, id, container.ExecOptions{
			User: "0:0", AttachStdout: true, AttachStderr: true,
			Cmd: []string{attach.EnvdPath, "envd", "--held-deleted"},
		})
		if err != nil {
			return err
		}
		execID = exec.ID
		if hj, err = cli.ContainerExecAttach(ctx, exec.ID, container.ExecAttachOptions{}); err != nil {
			return err
		}
		if err := execStarted(ctx, cli, exec.ID); err != nil {
			hj.Close()
			return err
		}
		return nil
	}
	var err error
	if a != nil {
		err = a.StartExec(start) // not while a commit or a pause freezes the container
	} else {
		err = start()
	}
	if errors.Is(err, attach.ErrFrozen) {
		return 0, err
	}
	if err != nil {
		return 0, fmt.Errorf("start the count of deleted files still open: %w", err)
	}
	defer hj.Close()
	stop := context.AfterFunc(ctx, hj.Close)
	defer stop()
	var out, errOut bytes.Buffer
	_, _ = stdcopy.StdCopy(&out, &errOut, io.LimitReader(hj.Reader, 4<<10))
	if err := ctx.Err(); err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return 0, &errHeldCount{"did not answer in time"}
		}
		return 0, err
	}
	insp, err := execEnd(ctx, cli, execID)
	if err != nil {
		return 0, err
	}
	said := strings.TrimSpace(out.String() + " " + errOut.String())
	switch {
	case insp.ExitCode == 126 || insp.ExitCode == 127:
		// The engine could not start it (seen under load while the
		// container wrote fast): a failed measure, not the container's.
		return 0, fmt.Errorf("start the count of deleted files still open (exit code %d): %s", insp.ExitCode, said)
	case insp.Running || insp.ExitCode != 0:
		return 0, &errHeldCount{fmt.Sprintf("failed (exit code %d): %s", insp.ExitCode, said)}
	}
	held, err := strconv.ParseInt(strings.TrimSpace(out.String()), 10, 64)
	if err != nil || held < 0 {
		return 0, &errHeldCount{fmt.Sprintf("answered %q", out.String())}
	}
	return held, nil
}
