//go:build linux

package server

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/process"
)

func TestStartExitCodes(t *testing.T) {
	e := startEnvd(t, Config{})
	t.Run("exit 3 with both streams", func(t *testing.T) {
		r := run(t, e, shell("echo out; echo err >&2; exit 3"), nil)
		if string(r.stdout) != "out\n" || string(r.stderr) != "err\n" {
			t.Errorf("stdout %q stderr %q", r.stdout, r.stderr)
		}
		if r.end.GetExitCode() != 3 || !r.end.GetExited() || r.end.GetStatus() != "exit status 3" || r.end.GetError() != "exit status 3" {
			t.Errorf("end = %v", r.end)
		}
	})
	t.Run("exit 0", func(t *testing.T) {
		r := run(t, e, &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "echo", Args: []string{"hi"}}}, nil)
		if string(r.stdout) != "hi\n" {
			t.Errorf("stdout %q", r.stdout)
		}
		if r.end.GetExitCode() != 0 || !r.end.GetExited() || r.end.GetStatus() != "exit status 0" || r.end.Error != nil {
			t.Errorf("end = %v", r.end)
		}
		if r.pid == 0 {
			t.Error("start event without pid")
		}
	})
	t.Run("killed", func(t *testing.T) {
		ctx := t.Context()
		stream, pid := startStream(t, ctx, e, &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "sleep", Args: []string{"600"}}})
		if _, err := e.process().SendSignal(ctx, connect.NewRequest(&pb.SendSignalRequest{
			Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}, Signal: pb.Signal_SIGNAL_SIGKILL,
		})); err != nil {
			t.Fatalf("SendSignal: %v", err)
		}
		r := collect(t, stream)
		if r.end.GetExitCode() != -1 || r.end.GetExited() || r.end.GetStatus() != "signal: killed" || r.end.GetError() != "signal: killed" {
			t.Errorf("end = %v", r.end)
		}
	})
}

// A command that cannot start still starts: the shell of envd's wrapper
// reports it like any shell, on stderr with exit 127 or 126
// (design/envd.md, Processes).
func TestStartCommandThatCannotStart(t *testing.T) {
	e := startEnvd(t, Config{})
	dir := t.TempDir()
	notExecutable := filepath.Join(dir, "plain")
	if err := os.WriteFile(notExecutable, []byte("echo never\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, cmd string
		codes     []int32
	}{
		{"missing", "no-such-command-xyz", []int32{127}},
		{"missing relative", "./no-such-command-xyz", []int32{127}},
		{"a directory", dir, []int32{126}},
		{"not executable", notExecutable, []int32{126}},
		// The shell says permission denied (126), nice says not found (127).
		{"empty", "", []int32{126, 127}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, e, &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: tc.cmd}}, nil)
			if r.pid == 0 || !slices.Contains(tc.codes, r.end.GetExitCode()) || !r.end.GetExited() {
				t.Errorf("pid %d end %v, want a start and exit code %v", r.pid, r.end, tc.codes)
			}
			if want := fmt.Sprintf("exit status %d", r.end.GetExitCode()); r.end.GetStatus() != want || r.end.GetError() != want {
				t.Errorf("end %v, want status and error %q", r.end, want)
			}
			if !strings.Contains(string(r.stderr), tc.cmd) || len(r.stdout) != 0 {
				t.Errorf("stdout %q stderr %q, want the shell's message naming %q", r.stdout, r.stderr, tc.cmd)
			}
		})
	}
}

func TestStdin(t *testing.T) {
	e := startEnvd(t, Config{})
	t.Run("SendInput then CloseStdin gives EOF", func(t *testing.T) {
		ctx := t.Context()
		stream, pid := startStream(t, ctx, e, &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "cat"}, Stdin: ptr(true)})
		sel := &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}
		for _, chunk := range []string{"hello ", "world"} {
			if _, err := e.process().SendInput(ctx, connect.NewRequest(&pb.SendInputRequest{
				Process: sel, Input: &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte(chunk)}},
			})); err != nil {
				t.Fatalf("SendInput: %v", err)
			}
		}
		// (A second close is a no-op while the process runs:
		// TestWireProcessErrorsAsEnvd; cat ends at this EOF.)
		if _, err := e.process().CloseStdin(ctx, connect.NewRequest(&pb.CloseStdinRequest{Process: sel})); err != nil {
			t.Fatalf("CloseStdin: %v", err)
		}
		r := collect(t, stream)
		if string(r.stdout) != "hello world" || r.end.GetExitCode() != 0 {
			t.Errorf("stdout %q end %v", r.stdout, r.end)
		}
	})
	t.Run("StreamInput", func(t *testing.T) {
		ctx := t.Context()
		stream, pid := startStream(t, ctx, e, &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "cat"}, Tag: ptr("stream-input")})
		in := e.process().StreamInput(ctx)
		sel := &pb.ProcessSelector{Selector: &pb.ProcessSelector_Tag{Tag: "stream-input"}}
		msgs := []*pb.StreamInputRequest{
			{Event: &pb.StreamInputRequest_Start{Start: &pb.StreamInputRequest_StartEvent{Process: sel}}},
			{Event: &pb.StreamInputRequest_Data{Data: &pb.StreamInputRequest_DataEvent{Input: &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte("abc")}}}}},
			{Event: &pb.StreamInputRequest_Keepalive{Keepalive: &pb.StreamInputRequest_KeepAlive{}}},
			{Event: &pb.StreamInputRequest_Data{Data: &pb.StreamInputRequest_DataEvent{Input: &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte("def")}}}}},
		}
		for _, m := range msgs {
			if err := in.Send(m); err != nil {
				t.Fatalf("StreamInput send: %v", err)
			}
		}
		if _, err := in.CloseAndReceive(); err != nil {
			t.Fatalf("StreamInput: %v", err)
		}
		if _, err := e.process().CloseStdin(ctx, connect.NewRequest(&pb.CloseStdinRequest{
			Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}},
		})); err != nil {
			t.Fatalf("CloseStdin: %v", err)
		}
		r := collect(t, stream)
		if string(r.stdout) != "abcdef" {
			t.Errorf("stdout %q", r.stdout)
		}
	})
	t.Run("StreamInput without its start", func(t *testing.T) {
		// envd drops the connection here; ours says what is wrong
		// (design/envd.md). An empty message is envd's unimplemented.
		for _, c := range []struct {
			msg  *pb.StreamInputRequest
			code connect.Code
			want string
		}{
			{&pb.StreamInputRequest{Event: &pb.StreamInputRequest_Data{Data: &pb.StreamInputRequest_DataEvent{Input: &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte("x")}}}}},
				connect.CodeInvalidArgument, "the first message must be start"},
			{&pb.StreamInputRequest{}, connect.CodeUnimplemented, "invalid event type <nil>"},
		} {
			in := e.process().StreamInput(t.Context())
			if err := in.Send(c.msg); err != nil {
				t.Fatalf("StreamInput send: %v", err)
			}
			if _, err := in.CloseAndReceive(); connect.CodeOf(err) != c.code || !strings.HasSuffix(err.Error(), c.want) {
				t.Errorf("StreamInput of %v = %v, want %v %q", c.msg, err, c.code, c.want)
			}
		}
	})
	t.Run("stdin false reads /dev/null", func(t *testing.T) {
		req := &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "cat"}, Stdin: ptr(false)}
		r := run(t, e, req, nil)
		if len(r.stdout) != 0 || r.end.GetExitCode() != 0 {
			t.Errorf("stdout %q end %v", r.stdout, r.end)
		}
	})
	t.Run("input to a process without stdin", func(t *testing.T) {
		ctx := t.Context()
		stream, pid := startStream(t, ctx, e, &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "sleep", Args: []string{"600"}}, Stdin: ptr(false)})
		sel := &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}
		_, err := e.process().SendInput(ctx, connect.NewRequest(&pb.SendInputRequest{
			Process: sel, Input: &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte("x")}},
		}))
		if connect.CodeOf(err) != connect.CodeInternal {
			t.Errorf("SendInput err = %v, want internal", err)
		}
		if _, err := e.process().SendSignal(ctx, connect.NewRequest(&pb.SendSignalRequest{Process: sel, Signal: pb.Signal_SIGNAL_SIGKILL})); err != nil {
			t.Fatalf("SendSignal: %v", err)
		}
		collect(t, stream)
	})
}

func TestLargeOutputInChunks(t *testing.T) {
	e := startEnvd(t, Config{})
	const size = 10 << 20
	r := run(t, e, shell("head -c 10485760 /dev/zero; head -c 10485760 /dev/zero >&2"), nil)
	if len(r.stdout) != size || len(r.stderr) != size {
		t.Errorf("got %d stdout and %d stderr bytes, want %d each", len(r.stdout), len(r.stderr), size)
	}
	if r.maxChunk > 32<<10 {
		t.Errorf("largest data chunk %d bytes, want at most 32 KiB", r.maxChunk)
	}
}

func TestTimeoutKillsProcessTree(t *testing.T) {
	e := startEnvd(t, Config{EndedRetention: time.Hour})
	// The header alone (no client deadline) so that the stream could outlive
	// the process: envd ends it at the deadline all the same.
	req := connect.NewRequest(shell("sleep 600 & echo $!; wait"))
	req.Header().Set("Connect-Timeout-Ms", "1500")
	stream, err := e.process().Start(t.Context(), req)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	r := &result{}
	for stream.Receive() {
		r.add(stream.Msg().GetEvent())
	}
	if connect.CodeOf(stream.Err()) != connect.CodeDeadlineExceeded || r.ends != 0 || r.starts != 1 {
		t.Fatalf("events %v, err %v; want a start and deadline_exceeded without an end", r.order, stream.Err())
	}
	child, err := strconv.Atoi(strings.TrimSpace(string(r.stdout)))
	if err != nil {
		t.Fatalf("child pid %q: %v", r.stdout, err)
	}
	eventually(t, "the background sleep to die", func() bool { return !alive(child) })
	// The kill is the process's end, which Connect replays.
	connStream, err := e.process().Connect(t.Context(), connect.NewRequest(&pb.ConnectRequest{
		Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: r.pid}},
	}))
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	if end := collect(t, connStream).end; end.GetExitCode() != -1 || end.GetStatus() != "signal: killed" {
		t.Errorf("end = %v, want killed", end)
	}
}

func TestConnectReplaysFinishedProcess(t *testing.T) {
	e := startEnvd(t, Config{EndedRetention: time.Hour})
	first := run(t, e, &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", "exit 3"}}, Tag: ptr("done")}, nil)
	for name, sel := range map[string]*pb.ProcessSelector{
		"pid": {Selector: &pb.ProcessSelector_Pid{Pid: first.pid}},
		"tag": {Selector: &pb.ProcessSelector_Tag{Tag: "done"}},
	} {
		t.Run(name, func(t *testing.T) {
			stream, err := e.process().Connect(t.Context(), connect.NewRequest(&pb.ConnectRequest{Process: sel}))
			if err != nil {
				t.Fatalf("Connect: %v", err)
			}
			r := collect(t, stream)
			r.checkShape(t)
			if r.pid != first.pid || r.end.GetExitCode() != 3 || r.end.GetStatus() != "exit status 3" {
				t.Errorf("replayed pid %d end %v, want pid %d exit 3", r.pid, r.end, first.pid)
			}
		})
	}
	t.Run("finished processes are not listed", func(t *testing.T) {
		list, err := e.process().List(t.Context(), connect.NewRequest(&pb.ListRequest{}))
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		for _, p := range list.Msg.GetProcesses() {
			if p.GetPid() == first.pid {
				t.Errorf("finished process %d listed", first.pid)
			}
		}
	})
}

func TestConnectAfterRetention(t *testing.T) {
	e := startEnvd(t, Config{EndedRetention: 100 * time.Millisecond})
	first := run(t, e, shell("true"), nil)
	sel := &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: first.pid}}
	eventually(t, "the finished process to be forgotten", func() bool {
		stream, err := e.process().Connect(t.Context(), connect.NewRequest(&pb.ConnectRequest{Process: sel}))
		if err == nil {
			for stream.Receive() {
			}
			err = stream.Err()
		}
		return connect.CodeOf(err) == connect.CodeNotFound
	})
	_, err := e.process().SendSignal(t.Context(), connect.NewRequest(&pb.SendSignalRequest{Process: sel, Signal: pb.Signal_SIGNAL_SIGKILL}))
	if connect.CodeOf(err) != connect.CodeNotFound || !strings.Contains(err.Error(), "not found") {
		t.Errorf("SendSignal to a forgotten pid: %v, want not_found", err)
	}
}

func TestConnectFanOut(t *testing.T) {
	e := startEnvd(t, Config{})
	ctx := t.Context()
	startStream1, pid := startStream(t, ctx, e, &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", "read x; echo got $x"}}})
	sel := &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}
	connStream, err := e.process().Connect(ctx, connect.NewRequest(&pb.ConnectRequest{Process: sel}))
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	// The start event says the stream is attached.
	if !connStream.Receive() || connStream.Msg().GetEvent().GetStart().GetPid() != pid {
		t.Fatalf("Connect's first event: %v %v", connStream.Msg(), connStream.Err())
	}
	if _, err := e.process().SendInput(ctx, connect.NewRequest(&pb.SendInputRequest{
		Process: sel, Input: &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte("a\n")}},
	})); err != nil {
		t.Fatalf("SendInput: %v", err)
	}
	a := collect(t, startStream1)
	b := collect(t, connStream)
	if string(a.stdout) != "got a\n" || string(b.stdout) != "got a\n" {
		t.Errorf("Start stream got %q, Connect stream got %q", a.stdout, b.stdout)
	}
	if a.end == nil || b.end == nil {
		t.Errorf("ends: %v %v", a.end, b.end)
	}
}

func TestOutputWithoutStreamIsDiscarded(t *testing.T) {
	e := startEnvd(t, Config{})
	startCtx, detach := context.WithCancel(t.Context())
	marker := filepath.Join(t.TempDir(), "written")
	_, pid := startStream(t, startCtx, e, &pb.StartRequest{
		Process: &pb.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", "read x; head -c 4000000 /dev/zero; touch " + marker + "; read y; echo done"}},
	})
	detach()
	sel := &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}
	send := func(s string) {
		t.Helper()
		if _, err := e.process().SendInput(t.Context(), connect.NewRequest(&pb.SendInputRequest{
			Process: sel, Input: &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte(s)}},
		})); err != nil {
			t.Fatalf("SendInput: %v", err)
		}
	}
	// Wait until the Start stream is gone before the output is produced.
	eventually(t, "the Start stream to detach", func() bool {
		p, err := e.srv.procs.find(sel)
		if err != nil {
			return false
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.subs) == 0
	})
	send("x\n")
	// The process is not blocked by the output nobody reads.
	eventually(t, "4 MB written with no stream attached", func() bool { _, err := os.Stat(marker); return err == nil })
	stream, err := e.process().Connect(t.Context(), connect.NewRequest(&pb.ConnectRequest{Process: sel}))
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	if !stream.Receive() {
		t.Fatalf("Connect: %v", stream.Err())
	}
	send("y\n")
	r := collect(t, stream)
	if !bytes.HasSuffix(r.stdout, []byte("done\n")) {
		t.Errorf("Connect stream output ends %q, want done", r.stdout[max(0, len(r.stdout)-20):])
	}
	// At most what was still in flight in the pipe can arrive.
	if len(r.stdout) > 1<<20 {
		t.Errorf("Connect stream got %d bytes: output without a stream was buffered", len(r.stdout))
	}
}

func TestListAndSignalByTag(t *testing.T) {
	e := startEnvd(t, Config{})
	ctx := t.Context()
	stream, pid := startStream(t, ctx, e, &pb.StartRequest{
		Process: &pb.ProcessConfig{Cmd: "sleep", Args: []string{"600"}, Envs: map[string]string{"K": "V"}},
		Tag:     ptr("sleeper"),
	})
	list, err := e.process().List(ctx, connect.NewRequest(&pb.ListRequest{}))
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var found *pb.ProcessInfo
	for _, p := range list.Msg.GetProcesses() {
		if p.GetPid() == pid {
			found = p
		}
	}
	if found == nil || found.GetTag() != "sleeper" || found.GetConfig().GetCmd() != "sleep" || found.GetConfig().GetEnvs()["K"] != "V" {
		t.Fatalf("List = %v, want pid %d tagged sleeper", list.Msg, pid)
	}
	sel := &pb.ProcessSelector{Selector: &pb.ProcessSelector_Tag{Tag: "sleeper"}}
	_, err = e.process().SendSignal(ctx, connect.NewRequest(&pb.SendSignalRequest{Process: sel, Signal: pb.Signal_SIGNAL_UNSPECIFIED}))
	if connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Errorf("SendSignal(UNSPECIFIED) = %v, want unimplemented", err)
	}
	if _, err := e.process().SendSignal(ctx, connect.NewRequest(&pb.SendSignalRequest{Process: sel, Signal: pb.Signal_SIGNAL_SIGTERM})); err != nil {
		t.Fatalf("SendSignal(SIGTERM) by tag: %v", err)
	}
	r := collect(t, stream)
	if r.end.GetExitCode() != -1 || r.end.GetStatus() != "signal: terminated" {
		t.Errorf("end = %v, want terminated", r.end)
	}
	_, err = e.process().SendSignal(ctx, connect.NewRequest(&pb.SendSignalRequest{
		Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Tag{Tag: "nobody"}}, Signal: pb.Signal_SIGNAL_SIGKILL,
	}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("SendSignal to unknown tag = %v, want not_found", err)
	}
}

func TestPTY(t *testing.T) {
	e := startEnvd(t, Config{})
	ctx := t.Context()
	stream, pid := startStream(t, ctx, e, &pb.StartRequest{
		Process: &pb.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", "stty size; read x; stty size"}},
		Pty:     &pb.PTY{Size: &pb.PTY_Size{Cols: 80, Rows: 24}},
	})
	sel := &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}
	r := &result{starts: 1, order: []string{"start"}}
	// Read until the first size is printed, then resize and continue.
	for !bytes.Contains(r.pty, []byte("24 80")) {
		if !stream.Receive() {
			t.Fatalf("stream ended before the first size, output %q: %v", r.pty, stream.Err())
		}
		r.add(stream.Msg().GetEvent())
	}
	if _, err := e.process().Update(ctx, connect.NewRequest(&pb.UpdateRequest{Process: sel, Pty: &pb.PTY{Size: &pb.PTY_Size{Cols: 100, Rows: 40}}})); err != nil {
		t.Fatalf("Update: %v", err)
	}
	_, err := e.process().CloseStdin(ctx, connect.NewRequest(&pb.CloseStdinRequest{Process: sel}))
	if connect.CodeOf(err) != connect.CodeUnknown || !strings.Contains(err.Error(), "cannot close stdin for PTY process") {
		t.Errorf("CloseStdin on a PTY = %v, want unknown", err)
	}
	_, err = e.process().SendInput(ctx, connect.NewRequest(&pb.SendInputRequest{Process: sel, Input: &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte("\n")}}}))
	if connect.CodeOf(err) != connect.CodeInternal {
		t.Errorf("stdin input to a PTY process: %v, want internal", err)
	}
	if _, err := e.process().SendInput(ctx, connect.NewRequest(&pb.SendInputRequest{Process: sel, Input: &pb.ProcessInput{Input: &pb.ProcessInput_Pty{Pty: []byte("\n")}}})); err != nil {
		t.Fatalf("SendInput(pty): %v", err)
	}
	for stream.Receive() {
		r.add(stream.Msg().GetEvent())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	r.checkShape(t)
	if !bytes.Contains(r.pty, []byte("40 100")) || len(r.stdout) != 0 {
		t.Errorf("pty output %q (stdout %q), want the resized 40 100", r.pty, r.stdout)
	}
	if r.maxChunk > 16<<10 {
		t.Errorf("PTY chunk of %d bytes", r.maxChunk)
	}
	// Update on a process without a PTY is an error.
	plain, plainPid := startStream(t, ctx, e, &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "sleep", Args: []string{"600"}}})
	plainSel := &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: plainPid}}
	_, err = e.process().Update(ctx, connect.NewRequest(&pb.UpdateRequest{Process: plainSel, Pty: &pb.PTY{Size: &pb.PTY_Size{Cols: 1, Rows: 1}}}))
	if connect.CodeOf(err) != connect.CodeInternal {
		t.Errorf("Update without PTY = %v, want internal", err)
	}
	if _, err := e.process().SendSignal(ctx, connect.NewRequest(&pb.SendSignalRequest{Process: plainSel, Signal: pb.Signal_SIGNAL_SIGKILL})); err != nil {
		t.Fatal(err)
	}
	collect(t, plain)
}

func TestKeepalive(t *testing.T) {
	e := startEnvd(t, Config{})
	r := run(t, e, shell("sleep 3; echo late"), map[string]string{"Keepalive-Ping-Interval": "1"})
	if r.keepalives == 0 {
		t.Errorf("no keepalive during 3 s of silence with a 1 s interval (events %v)", r.order)
	}
	if string(r.stdout) != "late\n" {
		t.Errorf("stdout %q", r.stdout)
	}
}

func TestUnknownUserAndMissingCwd(t *testing.T) {
	e := startEnvd(t, Config{})
	startErr := func(req *pb.StartRequest, header map[string]string) error {
		creq := connect.NewRequest(req)
		for k, v := range header {
			creq.Header().Set(k, v)
		}
		stream, err := e.process().Start(t.Context(), creq)
		if err != nil {
			return err
		}
		for stream.Receive() {
			t.Errorf("unexpected event %v", stream.Msg())
		}
		return stream.Err()
	}
	err := startErr(shell("true"), map[string]string{"Authorization": basicUser("nosuchuser")})
	if connect.CodeOf(err) != connect.CodeUnauthenticated || !strings.Contains(err.Error(), "invalid username: 'nosuchuser'") {
		t.Errorf("unknown user: %v", err)
	}
	req := shell("true")
	req.Process.Cwd = ptr("/nonexistent/dir")
	err = startErr(req, nil)
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "cwd '/nonexistent/dir' does not exist") {
		t.Errorf("missing cwd: %v", err)
	}
	_, err = e.process().List(t.Context(), func() *connect.Request[pb.ListRequest] {
		r := connect.NewRequest(&pb.ListRequest{})
		r.Header().Set("Authorization", basicUser("nosuchuser"))
		return r
	}())
	if connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("List as unknown user: %v", err)
	}
}

func TestEnvironmentAndCwd(t *testing.T) {
	// No BaseEnv: envd's own HOME is checked (sh -c reads no profile).
	e := startEnvd(t, Config{BaseEnv: map[string]string{}})
	initEnvd(t, e, `{"envVars":{"A":"init","B":"init"}}`)
	req := shell(`echo "$A $B $E2B_SANDBOX $USER $LOGNAME $HOME"; pwd`)
	req.Process.Envs = map[string]string{"B": "req"}
	r := run(t, e, req, nil)
	if got, want := string(r.stdout), "init req true root root /root\n/root\n"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
	dir := t.TempDir()
	req = shell("pwd")
	req.Process.Cwd = ptr(dir)
	if r := run(t, e, req, nil); string(r.stdout) != dir+"\n" {
		t.Errorf("pwd %q, want %s", r.stdout, dir)
	}
	// envd's shell wrapper exports PWD, also to a program that is no shell.
	r = run(t, e, &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "env", Cwd: ptr(dir)}}, nil)
	if !slices.Contains(strings.Split(string(r.stdout), "\n"), "PWD="+dir) {
		t.Errorf("env printed %q, want PWD=%s", r.stdout, dir)
	}
	initEnvd(t, e, `{"defaultWorkdir":"`+dir+`"}`)
	if r := run(t, e, shell("pwd; echo $A"), nil); string(r.stdout) != dir+"\ninit\n" {
		t.Errorf("with a default workdir: %q, want %s and the kept env", r.stdout, dir)
	}
	initEnvd(t, e, `{"envVars":{}}`)
	if r := run(t, e, shell(`echo "[$A]"`), nil); string(r.stdout) != "[]\n" {
		t.Errorf("envVars are replaced, not merged: %q", r.stdout)
	}
}

func TestUserSwitching(t *testing.T) {
	u := testUser(t)
	// No BaseEnv: envd's own HOME is checked (sh -c reads no profile).
	e := startEnvd(t, Config{BaseEnv: map[string]string{}})
	auth := map[string]string{"Authorization": basicUser(u.name)}
	r := run(t, e, shell(`id -un; echo "$HOME $USER"; pwd`), auth)
	if want := u.name + "\n" + u.home + " " + u.name + "\n" + u.home + "\n"; string(r.stdout) != want {
		t.Errorf("output %q, want %q", r.stdout, want)
	}
	for cwd, want := range map[string]string{"~": u.home, "~/sub": filepath.Join(u.home, "sub"), "sub": filepath.Join(u.home, "sub")} {
		if err := os.MkdirAll(filepath.Join(u.home, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		req := shell("pwd")
		req.Process.Cwd = ptr(cwd)
		if r := run(t, e, req, auth); string(r.stdout) != want+"\n" {
			t.Errorf("cwd %q ran in %q, want %s", cwd, r.stdout, want)
		}
	}
	// The user cannot write where only root may.
	r = run(t, e, shell("touch /root/envd-user-test"), auth)
	if r.end.GetExitCode() == 0 {
		t.Error("the switched user could write into /root")
	}
	// The default user set by /init applies without a header.
	initEnvd(t, e, `{"defaultUser":"`+u.name+`"}`)
	if r := run(t, e, shell("id -un"), nil); string(r.stdout) != u.name+"\n" {
		t.Errorf("default user ran as %q", r.stdout)
	}
}

func TestBadRequestsKeepDaemonUp(t *testing.T) {
	e := startEnvd(t, Config{})
	resp, err := http.Post(e.url+"/process.Process/NoSuchMethod", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown procedure answered %d, want 404", resp.StatusCode)
	}
	stream, err := e.process().Connect(t.Context(), connect.NewRequest(&pb.ConnectRequest{}))
	if err == nil {
		for stream.Receive() {
			t.Errorf("unexpected event %v", stream.Msg())
		}
		err = stream.Err()
	}
	if connect.CodeOf(err) != connect.CodeUnimplemented || !strings.HasSuffix(err.Error(), "invalid input type *process.ProcessSelector") {
		t.Errorf("Connect with an empty selector: %v, want unimplemented", err)
	}
	_, err = e.process().SendInput(t.Context(), connect.NewRequest(&pb.SendInputRequest{
		Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: 1 << 30}},
	}))
	if connect.CodeOf(err) != connect.CodeNotFound || !strings.Contains(err.Error(), "process with pid 1073741824 not found") {
		t.Errorf("SendInput to an unknown pid: %v", err)
	}
	// The daemon still serves.
	run(t, e, shell("true"), nil)
}

// A background child that keeps stdout open keeps the stream open, as in
// envd: the end comes once every holder of stdout and stderr closed them.
func TestBackgroundChildHoldsStream(t *testing.T) {
	e := startEnvd(t, Config{})
	t.Run("its output arrives before the end", func(t *testing.T) {
		r := run(t, e, shell("(sleep 2; echo child) & echo parent"), nil)
		if string(r.stdout) != "parent\nchild\n" || r.end.GetExitCode() != 0 || !r.end.GetExited() {
			t.Errorf("stdout %q end %v, want parent, child, exit 0", r.stdout, r.end)
		}
	})
	t.Run("redirected it does not hold the stream", func(t *testing.T) {
		r := run(t, e, shell("nohup sleep 600 >/dev/null 2>&1 & echo $!"), nil)
		child, err := strconv.Atoi(strings.TrimSpace(string(r.stdout)))
		if err != nil {
			t.Fatalf("child pid %q: %v", r.stdout, err)
		}
		if !alive(child) {
			t.Error("the redirected background sleep is gone")
		}
		_ = syscall.Kill(child, syscall.SIGKILL)
	})
	t.Run("SIGKILL ends it even from another process group", func(t *testing.T) {
		ctx := t.Context()
		// setsid moves the child out of the group the signal reaches; it
		// prints its pid once it has.
		stream, pid := startStream(t, ctx, e, shell("setsid sh -c 'echo $$; exec sleep 600' &"))
		if !stream.Receive() || len(stream.Msg().GetEvent().GetData().GetStdout()) == 0 {
			t.Fatalf("want the child's pid on stdout: %v %v", stream.Msg(), stream.Err())
		}
		child, err := strconv.Atoi(strings.TrimSpace(string(stream.Msg().GetEvent().GetData().GetStdout())))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })
		// The shell has exited; its stream stays open and it is listed.
		eventually(t, "the shell to exit", func() bool { return !alive(int(pid)) })
		list, err := e.process().List(ctx, connect.NewRequest(&pb.ListRequest{}))
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if !slices.ContainsFunc(list.Msg.GetProcesses(), func(p *pb.ProcessInfo) bool { return p.GetPid() == pid }) {
			t.Errorf("process %d with its output open is not listed", pid)
		}
		if _, err := e.process().SendSignal(ctx, connect.NewRequest(&pb.SendSignalRequest{
			Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}, Signal: pb.Signal_SIGNAL_SIGKILL,
		})); err != nil {
			t.Fatalf("SendSignal: %v", err)
		}
		// The end is the shell's: it exited normally before the signal.
		r := collect(t, stream)
		if r.end.GetExitCode() != 0 || !r.end.GetExited() {
			t.Errorf("end %v, want the shell's exit 0", r.end)
		}
		if !alive(child) {
			t.Error("the signal reached the detached child")
		}
	})
}
