//go:build linux

package server

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	pb "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/process"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/testutil"
)

// These tests speak Connect+JSON by hand, byte for byte as the E2B JS SDK
// does (design/e2b-api.md §6.1), and check the frames that come back.

// envelope frames msg as one uncompressed streaming message (flags 0), in
// Connect and gRPC-Web alike.
func envelope(msg string) []byte {
	b := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

type frame struct {
	flags byte
	data  string
}

func readFrames(t *testing.T, r io.Reader) []frame {
	t.Helper()
	br := bufio.NewReader(r)
	var frames []frame
	for {
		var head [5]byte
		if _, err := io.ReadFull(br, head[:]); err == io.EOF {
			return frames
		} else if err != nil {
			t.Fatalf("reading a frame header after %d frames: %v", len(frames), err)
		}
		data := make([]byte, binary.BigEndian.Uint32(head[1:]))
		if _, err := io.ReadFull(br, data); err != nil {
			t.Fatalf("reading a frame body: %v", err)
		}
		// protojson randomises insignificant whitespace; compare compacted.
		var compact bytes.Buffer
		if err := json.Compact(&compact, data); err != nil {
			t.Fatalf("frame %q is not JSON: %v", data, err)
		}
		frames = append(frames, frame{flags: head[0], data: compact.String()})
	}
}

// postStart sends one enveloped Process.Start request the way the JS SDK does.
func postStart(t *testing.T, e *testEnvd, body string) (*http.Response, []frame) {
	t.Helper()
	return postStartWithTimeout(t, e, body, "30000")
}

// postStartWithTimeout is postStart with the SDK's timeoutMs.
func postStartWithTimeout(t *testing.T, e *testEnvd, body, timeoutMs string) (*http.Response, []frame) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.url+"/process.Process/Start", bytes.NewReader(envelope(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/connect+json")
	req.Header.Set("Connect-Protocol-Version", "1")
	req.Header.Set("Connect-Timeout-Ms", timeoutMs)
	req.Header.Set("Authorization", "Basic cm9vdDo=")
	req.Header.Set("Keepalive-Ping-Interval", "50")
	req.Header.Set("E2b-Sandbox-Id", "isandbox")
	req.Header.Set("E2b-Sandbox-Port", "49983")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	return resp, readFrames(t, resp.Body)
}

func TestWireStartJSON(t *testing.T) {
	e := startEnvd(t, Config{})
	body := `{"process":{"cmd":"/bin/bash","args":["-l","-c","echo hi; echo err >&2"],"envs":{"A":"b"},"cwd":"/tmp"},"stdin":false}`
	if _, err := os.Stat("/bin/bash"); err != nil {
		testutil.Missing(t, "the SDK's frame runs /bin/bash: %v", err)
	}
	resp, frames := postStart(t, e, body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/connect+json" {
		t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if len(frames) < 3 {
		t.Fatalf("frames %v", frames)
	}
	var start struct {
		Event struct {
			Start struct {
				Pid uint32 `json:"pid"`
			} `json:"start"`
		} `json:"event"`
	}
	if err := json.Unmarshal([]byte(frames[0].data), &start); err != nil || start.Event.Start.Pid == 0 || frames[0].flags != 0 {
		t.Errorf("first frame %+v, want {\"event\":{\"start\":{\"pid\":N}}}", frames[0])
	}
	var stdout, stderr string
	for _, f := range frames[1 : len(frames)-2] {
		if f.flags != 0 {
			t.Errorf("data frame with flags %#x", f.flags)
		}
		switch {
		case strings.HasPrefix(f.data, `{"event":{"data":{"stdout":"`):
			stdout += f.data
		case strings.HasPrefix(f.data, `{"event":{"data":{"stderr":"`):
			stderr += f.data
		default:
			t.Errorf("unexpected frame %s", f.data)
		}
	}
	// Bytes are base64: "hi\n" and "err\n".
	if stdout != `{"event":{"data":{"stdout":"aGkK"}}}` || stderr != `{"event":{"data":{"stderr":"ZXJyCg=="}}}` {
		t.Errorf("data frames %s %s", stdout, stderr)
	}
	// exitCode 0 is omitted, like every zero value.
	if end := frames[len(frames)-2]; end.data != `{"event":{"end":{"exited":true,"status":"exit status 0"}}}` {
		t.Errorf("end frame %s", end.data)
	}
	if last := frames[len(frames)-1]; last.flags != 0x02 || last.data != "{}" {
		t.Errorf("end-stream frame %#x %s, want 0x02 {}", last.flags, last.data)
	}
}

func TestWireStartFailureAndExitCode(t *testing.T) {
	e := startEnvd(t, Config{})
	_, frames := postStart(t, e, `{"process":{"cmd":"/bin/sh","args":["-c","exit 3"]},"stdin":false}`)
	if end := frames[len(frames)-2].data; end != `{"event":{"end":{"exitCode":3,"exited":true,"status":"exit status 3","error":"exit status 3"}}}` {
		t.Errorf("end frame %s", end)
	}
	// A command that cannot start starts a shell that says so: exit 127.
	_, frames = postStart(t, e, `{"process":{"cmd":"no-such-command-xyz"},"stdin":false}`)
	n := len(frames)
	if n < 4 || !strings.HasPrefix(frames[0].data, `{"event":{"start":{"pid":`) ||
		frames[n-2].data != `{"event":{"end":{"exitCode":127,"exited":true,"status":"exit status 127","error":"exit status 127"}}}` || frames[n-1] != (frame{0x02, "{}"}) {
		t.Fatalf("missing command: frames %v, want start, stderr, end 127, {}", frames)
	}
	var stderr []byte
	for _, f := range frames[1 : n-2] {
		var data struct {
			Event struct {
				Data struct {
					Stderr []byte `json:"stderr"`
				} `json:"data"`
			} `json:"event"`
		}
		if err := json.Unmarshal([]byte(f.data), &data); err != nil || len(data.Event.Data.Stderr) == 0 {
			t.Errorf("missing command: frame %s, want stderr data", f.data)
		}
		stderr = append(stderr, data.Event.Data.Stderr...)
	}
	if !strings.Contains(string(stderr), "no-such-command-xyz") {
		t.Errorf("missing command: stderr %q, want the shell's message naming it", stderr)
	}
	// A start failure is an error in the end-stream frame of a 200 response.
	resp, frames := postStart(t, e, `{"process":{"cmd":"/bin/sh","cwd":"/does/not/exist"}}`)
	if resp.StatusCode != http.StatusOK || len(frames) != 1 || frames[0].flags != 0x02 {
		t.Fatalf("status %d frames %v", resp.StatusCode, frames)
	}
	var endStream struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(frames[0].data), &endStream); err != nil || endStream.Error.Code != "invalid_argument" || endStream.Error.Message != "cwd '/does/not/exist' does not exist" {
		t.Errorf("end-stream %s", frames[0].data)
	}
	// A malformed message in a well-formed envelope.
	resp, frames = postStart(t, e, `{"process":`)
	if len(frames) != 1 || frames[0].flags != 0x02 || !strings.Contains(frames[0].data, `"code":"invalid_argument"`) {
		t.Errorf("malformed message: status %d frames %v", resp.StatusCode, frames)
	}
	// An envelope announcing more bytes than the body holds.
	truncated := envelope(`{"process":{"cmd":"true"}}`)
	binary.BigEndian.PutUint32(truncated[1:], 1000)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.url+"/process.Process/Start", bytes.NewReader(truncated))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/connect+json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	frames = readFrames(t, res.Body)
	if len(frames) != 1 || frames[0].flags != 0x02 || !strings.Contains(frames[0].data, `"error"`) {
		t.Errorf("truncated envelope: status %d frames %v", res.StatusCode, frames)
	}
	// The daemon still serves.
	if _, frames := postStart(t, e, `{"process":{"cmd":"true"}}`); len(frames) < 3 {
		t.Errorf("Start after bad input: frames %v", frames)
	}
}

// At the SDK's timeoutMs envd kills the process and ends the stream with
// deadline_exceeded, without an end event (design/envd.md, Lifetime).
func TestWireStartDeadline(t *testing.T) {
	e := startEnvd(t, Config{})
	resp, frames := postStartWithTimeout(t, e, `{"process":{"cmd":"/bin/sh","args":["-c","echo up; sleep 600"]},"stdin":false}`, "1000")
	if resp.StatusCode != http.StatusOK || len(frames) != 3 || !strings.HasPrefix(frames[0].data, `{"event":{"start":{"pid":`) ||
		frames[1].data != `{"event":{"data":{"stdout":"dXAK"}}}` || frames[2].flags != 0x02 || !strings.HasPrefix(frames[2].data, `{"error":{"code":"deadline_exceeded"`) {
		t.Errorf("status %d frames %v, want start, stdout, end-stream deadline_exceeded", resp.StatusCode, frames)
	}
}

// The same deadline over gRPC-Web with binary protobuf (grpc-timeout): the
// trailers say DEADLINE_EXCEEDED (4) after the start and output, no end.
func TestWireStartDeadlineGRPCWeb(t *testing.T) {
	e := startEnvd(t, Config{})
	msg, err := proto.Marshal(&pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", "echo up; sleep 600"}}, Stdin: ptr(false)})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.url+"/process.Process/Start", bytes.NewReader(envelope(string(msg))))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/grpc-web+proto")
	req.Header.Set("X-Grpc-Web", "1")
	req.Header.Set("Grpc-Timeout", "1000m")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	br := bufio.NewReader(resp.Body)
	var events []string
	var trailers string
	for {
		var head [5]byte
		if _, err := io.ReadFull(br, head[:]); err != nil {
			break
		}
		data := make([]byte, binary.BigEndian.Uint32(head[1:]))
		if _, err := io.ReadFull(br, data); err != nil {
			t.Fatalf("reading a frame: %v", err)
		}
		if head[0]&0x80 != 0 {
			trailers = string(data)
			continue
		}
		var ev pb.StartResponse
		if err := proto.Unmarshal(data, &ev); err != nil {
			t.Fatalf("frame %x: %v", data, err)
		}
		switch {
		case ev.GetEvent().GetStart() != nil:
			events = append(events, "start")
		case ev.GetEvent().GetData() != nil:
			events = append(events, "data:"+string(ev.GetEvent().GetData().GetStdout()))
		case ev.GetEvent().GetEnd() != nil:
			events = append(events, "end")
		}
	}
	if strings.Join(events, ",") != "start,data:up\n" || !strings.Contains(strings.ToLower(trailers), "grpc-status: 4") {
		t.Errorf("events %q trailers %q, want start, up and grpc-status 4", events, trailers)
	}
}

// unary posts a Connect unary JSON call.
func unary(t *testing.T, e *testEnvd, procedure string, body []byte) response {
	t.Helper()
	r := do(t, http.MethodPost, e.url+procedure, "application/json", bytes.NewReader(body), map[string]string{"Connect-Protocol-Version": "1"})
	// protojson randomises insignificant whitespace; compare compacted.
	var compact bytes.Buffer
	if json.Compact(&compact, r.body) == nil {
		r.body = compact.Bytes()
	}
	return r
}

func TestWireUnaryJSON(t *testing.T) {
	e := startEnvd(t, Config{})
	stream, pid := startStream(t, t.Context(), e, shell("sleep 600"))

	r := unary(t, e, "/process.Process/List", []byte("{}"))
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"pid":`+strconv.Itoa(int(pid))) || !strings.Contains(string(r.body), `"cmd":"/bin/sh"`) {
		t.Errorf("List = %d %s", r.status, r.body)
	}
	r = unary(t, e, "/process.Process/SendSignal", []byte(`{"process":{"pid":`+strconv.Itoa(int(pid))+`},"signal":"SIGNAL_SIGKILL"}`))
	if r.status != http.StatusOK || string(r.body) != "{}" {
		t.Errorf("SendSignal = %d %s", r.status, r.body)
	}
	res := collect(t, stream)
	if res.end.GetExitCode() != -1 {
		t.Errorf("end %v", res.end)
	}
	r = unary(t, e, "/process.Process/SendSignal", []byte(`{"process":{"tag":"nobody"},"signal":9}`))
	if r.status != http.StatusNotFound || string(r.body) != `{"code":"not_found","message":"process with tag nobody not found"}` {
		t.Errorf("SendSignal to unknown tag = %d %s", r.status, r.body)
	}
	r = unary(t, e, "/process.Process/List", []byte("{not json"))
	if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), `"code":"invalid_argument"`) {
		t.Errorf("malformed List = %d %s", r.status, r.body)
	}
	// An oversized message is refused without taking the daemon down.
	big := append(append([]byte(`{"process":{"pid":1},"input":{"stdin":"`), bytes.Repeat([]byte("A"), maxMessageBytes+1)...), `"}}`...)
	r = unary(t, e, "/process.Process/SendInput", big)
	if r.status != http.StatusTooManyRequests || !strings.Contains(string(r.body), `"code":"resource_exhausted"`) {
		t.Errorf("oversized SendInput = %d %.200s", r.status, r.body)
	}
	r = unary(t, e, "/filesystem.Filesystem/WatchDir", []byte(`{"path":"/"}`))
	if r.status == http.StatusOK {
		t.Errorf("WatchDir as unary = %d", r.status)
	}
	if r := unary(t, e, "/process.Process/List", []byte("{}")); r.status != http.StatusOK {
		t.Errorf("List after bad input = %d", r.status)
	}
}

// TestWireProcessErrorsAsEnvd posts the SDK's unary JSON calls that envd
// refuses and checks code and message as envd 0.6.13 answers them (its
// process service's input.go, signal.go, update.go and handler.go).
func TestWireProcessErrorsAsEnvd(t *testing.T) {
	e := startEnvd(t, Config{})
	call := func(procedure, body string) response {
		return unary(t, e, "/process.Process/"+procedure, []byte(body))
	}
	_, noStdin := startStream(t, t.Context(), e, &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "sleep", Args: []string{"600"}}, Stdin: ptr(false)})
	sel := `{"pid":` + strconv.Itoa(int(noStdin)) + `}`
	checkRPCError(t, call("SendInput", `{"process":`+sel+`,"input":{"stdin":"aGk="}}`), http.StatusInternalServerError,
		rpcError{"internal", "error writing to stdin: stdin not enabled or closed"})
	checkRPCError(t, call("SendInput", `{"process":`+sel+`,"input":{"pty":"aGk="}}`), http.StatusInternalServerError,
		rpcError{"internal", "error writing to tty: tty not assigned to process — input should be written to the stdin, not the tty"})
	checkRPCError(t, call("SendInput", `{"process":`+sel+`}`), http.StatusNotImplemented,
		rpcError{"unimplemented", "invalid input type <nil>"})
	checkRPCError(t, call("Update", `{"process":`+sel+`,"pty":{"size":{"cols":80,"rows":24}}}`), http.StatusInternalServerError,
		rpcError{"internal", "error resizing tty: tty not assigned to process"})
	checkRPCError(t, call("SendSignal", `{"process":`+sel+`}`), http.StatusNotImplemented,
		rpcError{"unimplemented", "invalid signal: SIGNAL_UNSPECIFIED"})
	checkRPCError(t, call("SendSignal", `{"process":{},"signal":"SIGNAL_SIGKILL"}`), http.StatusNotImplemented,
		rpcError{"unimplemented", "invalid input type *process.ProcessSelector"})

	// Stdin closed by CloseStdin is stdin not enabled; closing again is a no-op.
	_, withStdin := startStream(t, t.Context(), e, &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "sleep", Args: []string{"600"}}, Tag: ptr("with-stdin")})
	sel = `{"pid":` + strconv.Itoa(int(withStdin)) + `}`
	for range 2 {
		if r := call("CloseStdin", `{"process":`+sel+`}`); r.status != http.StatusOK || string(r.body) != "{}" {
			t.Errorf("CloseStdin = %d %s", r.status, r.body)
		}
	}
	checkRPCError(t, call("SendInput", `{"process":`+sel+`,"input":{"stdin":"aGk="}}`), http.StatusInternalServerError,
		rpcError{"internal", "error writing to stdin: stdin not enabled or closed"})

	// A process that ended is not found, by pid and by tag, though Connect
	// still replays its end.
	stream, endedPid := startStream(t, t.Context(), e, &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "true"}, Tag: ptr("ended")})
	collect(t, stream)
	sel = `{"pid":` + strconv.Itoa(int(endedPid)) + `}`
	notFound := rpcError{"not_found", "process with pid " + strconv.Itoa(int(endedPid)) + " not found"}
	checkRPCError(t, call("SendInput", `{"process":`+sel+`,"input":{"stdin":"aGk="}}`), http.StatusNotFound, notFound)
	checkRPCError(t, call("CloseStdin", `{"process":`+sel+`}`), http.StatusNotFound, notFound)
	checkRPCError(t, call("Update", `{"process":`+sel+`,"pty":{"size":{"cols":80,"rows":24}}}`), http.StatusNotFound, notFound)
	checkRPCError(t, call("CloseStdin", `{"process":{"tag":"ended"}}`), http.StatusNotFound, rpcError{"not_found", "process with tag ended not found"})
	replay := collect(t, func() *connect.ServerStreamForClient[pb.ConnectResponse] {
		stream, err := e.process().Connect(t.Context(), connect.NewRequest(&pb.ConnectRequest{Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Tag{Tag: "ended"}}}))
		if err != nil {
			t.Fatal(err)
		}
		return stream
	}())
	if replay.pid != endedPid || replay.end == nil {
		t.Errorf("Connect to the ended process replayed pid %d end %v", replay.pid, replay.end)
	}
}

// TestWireStartInAFile starts a process whose cwd is a file: as on envd the
// exec fails, while a cwd that does not exist is refused before.
func TestWireStartInAFile(t *testing.T) {
	e := startEnvd(t, Config{})
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, frames := postStart(t, e, `{"process":{"cmd":"pwd","cwd":"`+file+`"},"stdin":false}`)
	want := frame{0x02, `{"error":{"code":"invalid_argument","message":"error starting process 'pwd': fork/exec /bin/sh: not a directory"}}`}
	if len(frames) != 1 || frames[0] != want {
		t.Errorf("frames %v, want %v", frames, want)
	}
	_, frames = postStart(t, e, `{"process":{"cmd":"pwd","cwd":"`+file+`"},"pty":{"size":{"cols":80,"rows":24}}}`)
	want = frame{0x02, `{"error":{"code":"invalid_argument","message":"error starting pty with command 'pwd' in dir '` + file + `' with '80' cols and '24' rows: fork/exec /bin/sh: not a directory"}}`}
	if len(frames) != 1 || frames[0] != want {
		t.Errorf("PTY: frames %v, want %v", frames, want)
	}
	missing := filepath.Join(filepath.Dir(file), "missing")
	_, frames = postStart(t, e, `{"process":{"cmd":"pwd","cwd":"`+missing+`"},"stdin":false}`)
	want = frame{0x02, `{"error":{"code":"invalid_argument","message":"cwd '` + missing + `' does not exist"}}`}
	if len(frames) != 1 || frames[0] != want {
		t.Errorf("frames %v, want %v", frames, want)
	}
}

// TestWireTagLookupPastOtherTags finds each of several tagged processes by
// its tag: envd's lookup stops at the first process with another tag, so it
// misses some (design/envd.md, Deliberate differences).
func TestWireTagLookupPastOtherTags(t *testing.T) {
	e := startEnvd(t, Config{})
	tags := []string{"tag-a", "tag-b", "tag-c", "tag-d"}
	for _, tag := range tags {
		startStream(t, t.Context(), e, &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "sleep", Args: []string{"600"}}, Tag: ptr(tag)})
	}
	for range 3 { // the table's order varies
		for _, tag := range tags {
			if r := unary(t, e, "/process.Process/CloseStdin", []byte(`{"process":{"tag":"`+tag+`"}}`)); r.status != http.StatusOK {
				t.Errorf("CloseStdin of tag %s = %d %s", tag, r.status, r.body)
			}
		}
	}
}
