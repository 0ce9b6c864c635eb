//go:build linux

package server

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"

	pb "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/process"
)

// processTable holds running processes and, for the retention window,
// finished ones so that Connect can replay their end.
type processTable struct {
	retention time.Duration
	log       *slog.Logger

	mu    sync.Mutex
	procs map[uint32]*process

	// spawnMu orders starting and reaping our own children against reaping
	// orphans (see reapOrphans); owned holds the pids Wait has yet to reap.
	spawnMu sync.Mutex
	owned   map[int]bool
}

func newProcessTable(retention time.Duration, log *slog.Logger) *processTable {
	return &processTable{retention: retention, log: log, procs: map[uint32]*process{}, owned: map[int]bool{}}
}

// start starts a process with one stream already attached, so that the
// starting stream sees all of its output.
func (t *processTable) start(spec startSpec) (*process, *subscriber, error) {
	cmd := &exec.Cmd{Path: "/bin/sh", Args: wrapperArgs(spec.cmd, spec.args), Env: spec.env, Dir: spec.cwd}
	stopped := make(chan struct{})
	p := &process{
		tag: spec.tag, config: spec.config, cmd: cmd,
		outputStopped: stopped, stopOutput: sync.OnceFunc(func() { close(stopped) }),
		subs: map[*subscriber]struct{}{}, done: make(chan struct{}),
	}
	sub := p.subscribe()

	t.spawnMu.Lock()
	readers, err := launch(p, spec)
	if err == nil {
		t.owned[cmd.Process.Pid] = true
	}
	t.spawnMu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	p.pid = uint32(cmd.Process.Pid) //nolint:gosec // Linux PIDs are positive and below 2^22
	var requestTimeout time.Duration
	if !spec.timeout.IsZero() {
		requestTimeout = time.Until(spec.timeout)
	}
	// E2B envd's line, fields and all (handler.go Start).
	t.log.Info(fmt.Sprintf("Process with pid %d started", p.pid),
		"event_type", "process_start", "pid", p.pid, "command", userCommand(spec.cmd, spec.args),
		"request_timeout_ms", requestTimeout.Milliseconds())

	t.mu.Lock()
	t.procs[p.pid] = p
	t.mu.Unlock()

	var wg sync.WaitGroup
	for i, r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.readOutput(r, i)
		}()
	}
	go t.wait(p, readers, &wg, spec.timeout)
	return p, sub, nil
}

// wait reaps p and publishes its end once its output ended: like envd, when
// every holder of its stdout and stderr (a background child too) closed
// them, or after a SIGTERM or SIGKILL (design/envd.md, Streams).
func (t *processTable) wait(p *process, readers []*os.File, wg *sync.WaitGroup, deadline time.Time) {
	if !deadline.IsZero() {
		// The kill fails only when p has already exited: nothing is left to kill.
		timer := time.AfterFunc(time.Until(deadline), func() { _ = p.signal(syscall.SIGKILL) })
		defer timer.Stop()
	}
	err := p.cmd.Wait()
	t.spawnMu.Lock()
	delete(t.owned, p.cmd.Process.Pid)
	t.spawnMu.Unlock()
	drained := make(chan struct{})
	go func() {
		wg.Wait()
		close(drained)
	}()
	select {
	case <-drained:
	case <-p.outputStopped:
		for _, r := range readers {
			_ = r.SetReadDeadline(time.Now().Add(killDrain))
		}
		<-drained
	}
	closeAll(readers...)

	st := p.cmd.ProcessState
	end := &pb.ProcessEvent_EndEvent{ExitCode: int32(st.ExitCode()), Exited: st.Exited(), Status: st.String()} //nolint:gosec // exit codes are -1 to 255
	if err != nil {
		msg := err.Error()
		end.Error = &msg
	}
	// E2B envd's line, fields and all (handler.go Wait); written before the
	// end is published, so that whoever saw the end finds the line.
	t.log.Info(fmt.Sprintf("Process with pid %d ended", p.pid),
		"event_type", "process_end", "process_result", end,
		"stdout_bytes", p.outBytes[0].Load(), "stderr_bytes", p.outBytes[1].Load(), "pty_bytes", p.outBytes[2].Load())
	p.finish(end)
	time.AfterFunc(t.retention, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.procs[p.pid] == p {
			delete(t.procs, p.pid)
		}
	})
}

// find resolves a selector to a process, running or retained: Connect's
// lookup, which replays a retained end.
func (t *processTable) find(sel *pb.ProcessSelector) (*process, error) {
	return t.lookup(sel, false)
}

// findRunning resolves a selector to a running process: the lookup of every
// RPC but Connect. As on envd, a process that ended is not found.
func (t *processTable) findRunning(sel *pb.ProcessSelector) (*process, error) {
	return t.lookup(sel, true)
}

// lookup answers envd's errors: not_found naming the pid or tag, and
// unimplemented for an empty selector (envd's "invalid input type").
func (t *processTable) lookup(sel *pb.ProcessSelector, runningOnly bool) (*process, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch s := sel.GetSelector().(type) {
	case *pb.ProcessSelector_Pid:
		if p, ok := t.procs[s.Pid]; ok && (!runningOnly || p.running()) {
			return p, nil
		}
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d not found", s.Pid))
	case *pb.ProcessSelector_Tag:
		var found *process
		for _, p := range t.procs {
			if p.tag == nil || *p.tag != s.Tag || runningOnly && !p.running() {
				continue
			}
			// A running process wins over a finished one with the same tag.
			if found == nil || (p.running() && !found.running()) {
				found = p
			}
		}
		if found != nil {
			return found, nil
		}
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with tag %s not found", s.Tag))
	default:
		return nil, connect.NewError(connect.CodeUnimplemented, fmt.Errorf("invalid input type %T", sel))
	}
}

func (t *processTable) list() []*pb.ProcessInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*pb.ProcessInfo
	for _, p := range t.procs {
		if p.running() {
			out = append(out, &pb.ProcessInfo{Config: p.config, Pid: p.pid, Tag: p.tag})
		}
	}
	return out
}

func (t *processTable) killAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.procs {
		if p.running() {
			_ = p.signal(syscall.SIGKILL)
		}
	}
}
