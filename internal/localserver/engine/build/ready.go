package build

import (
	"context"
	"fmt"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
)

// finalize commits the build's image from the last layer (from), after
// running the start and ready commands (design/e2b-api.md, "Start and ready
// commands") in the build container when
// there are any; without them, the image is committed from a container of
// from that never starts.
func (b *builder) finalize(ctx context.Context, from string) (string, error) {
	ref := b.eng.ImageRef(b.spec.TemplateID, b.spec.BuildID)
	if b.spec.StartCmd == "" && b.spec.ReadyCmd == "" {
		b.logf(stepFinalize, e2b.LogInfo, "Saving the image")
		return ref, b.eng.CommitUnstarted(ctx, b.spec, from, ref)
	}
	if err := b.ensureContainer(ctx, from, nil); err != nil {
		return "", err
	}
	stopStart, err := b.startAndWaitReady(ctx)
	if err != nil {
		return "", err
	}
	b.logf(stepFinalize, e2b.LogInfo, "Saving the image")
	err = b.c.CommitImage(ctx, ref)
	if stopStart != nil {
		stopStart() // only after the snapshot, which keeps its files
	}
	return ref, err
}

// startAndWaitReady runs the start and ready commands. It returns a
// function that detaches from the start command, to call after the
// snapshot.
func (b *builder) startAndWaitReady(ctx context.Context) (func(), error) {
	start, ready := b.spec.StartCmd, b.spec.ReadyCmd
	if ready == "" {
		ready = "sleep 20"
	}
	var stop func()
	var startDone <-chan startResult
	if start != "" {
		b.logf(stepFinalize, e2b.LogInfo, "Running start command: %s", start)
		startDone, stop = b.startInBackground(ctx, start)
	}
	if err := b.waitReady(ctx, ready, startDone); err != nil {
		if stop != nil {
			stop()
		}
		return nil, err
	}
	return stop, nil
}

// startResult is how a background start command ended.
type startResult struct {
	res *client.RunResult
	err error
}

// startInBackground launches the start command as the final user in the
// final workdir with the final env. stop cancels it and waits until its
// output has been logged.
func (b *builder) startInBackground(ctx context.Context, command string) (<-chan startResult, func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan startResult, 1)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		out := newLineLog(func(line string) { b.emit(stepFinalize, e2b.LogInfo, line) })
		cmd, args := b.sh.Command(command)
		res, err := b.c.Envd().Run(ctx, client.RunRequest{
			Cmd: cmd, Args: args, Env: b.env, Cwd: b.workdir, User: b.user,
			MaxOutputBytes: 1, OnOutput: out.Write,
		})
		out.Flush()
		done <- startResult{res, err}
	}()
	return done, func() { cancel(); <-finished }
}

// waitReady runs the ready command every ReadyInterval until it exits 0,
// the start command fails, or ReadyTimeout passes.
func (b *builder) waitReady(ctx context.Context, ready string, startDone <-chan startResult) error {
	b.logf(stepFinalize, e2b.LogInfo, "Waiting for the ready command: %s", ready)
	deadline := time.Now().Add(b.opts.ReadyTimeout)
	readyCtx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	cmd, args := b.sh.Command(ready)
	for {
		res, err := b.c.Envd().Run(readyCtx, client.RunRequest{
			Cmd: cmd, Args: args, Env: b.env, Cwd: b.workdir, User: b.user,
		})
		switch {
		case err == nil && res.ExitCode == 0:
			b.logf(stepFinalize, e2b.LogInfo, "Ready")
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case readyCtx.Err() != nil:
			return fmt.Errorf("ready command timed out after %s", b.opts.ReadyTimeout)
		case err != nil:
			return fmt.Errorf("ready command: %w", err)
		}
		select {
		case r := <-startDone:
			if r.err != nil {
				return fmt.Errorf("start command failed before the ready command succeeded: %w", r.err)
			}
			if r.res.ExitCode != 0 {
				return fmt.Errorf("start command exited with code %d before the ready command succeeded", r.res.ExitCode)
			}
			startDone = nil // ended well; keep probing
		case <-readyCtx.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("ready command timed out after %s", b.opts.ReadyTimeout)
		case <-time.After(b.opts.ReadyInterval):
		}
	}
}
