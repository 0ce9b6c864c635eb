//go:build linux

package localserver

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd"
	envdclient "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
)

// received is what a sink connection got: its byte count and SHA-256.
type received struct {
	n   int64
	sum string
}

// byteSink is a loopback TCP server that reads each connection to its end
// and reports what arrived.
func byteSink(t *testing.T) (string, <-chan received) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got := make(chan received, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				h := sha256.New()
				n, _ := io.Copy(h, c)
				got <- received{n: n, sum: hex.EncodeToString(h.Sum(nil))}
			}()
		}
	}()
	return ln.Addr().String(), got
}

// patternOf is what `yes line | head -c size` writes, and its SHA-256.
func patternOf(line string, size int64) received {
	h := sha256.New()
	// Whole lines, so that every chunk but the last ends where a line does.
	rep := bytes.Repeat([]byte(line+"\n"), 1<<16/(len(line)+1)+1)
	for left := size; left > 0; {
		chunk := rep[:min(int64(len(rep)), left)]
		h.Write(chunk)
		left -= int64(len(chunk))
	}
	return received{n: size, sum: hex.EncodeToString(h.Sum(nil))}
}

// connectUploadScript, run with bash in a sandbox, opens a CONNECT tunnel
// to addr through envd's egress proxy, reads the proxy's answer, writes
// size bytes of `yes line` and closes the socket right after the last
// byte, as a client writing to /dev/tcp does.
func connectUploadScript(addr, line string, size int64) string {
	return fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%[1]d || exit 1
printf 'CONNECT %[2]s HTTP/1.1\r\nHost: %[2]s\r\n\r\n' >&3
IFS= read -r status <&3; IFS= read -r blank <&3
case "$status" in *" 200 "*) ;; *) echo "CONNECT answered: $status"; exit 1;; esac
yes %[3]q | head -c %[4]d >&3
exec 3>&-
echo sent`, envd.EgressProxyPort, addr, line, size)
}

// egressUploadServer starts a server whose egress proxy allows the
// returned sink alone, and a sandbox of a Debian template with memoryMB.
func egressUploadServer(t *testing.T, memoryMB int32) (*testServer, *probeSandbox, string, <-chan received) {
	t.Helper()
	debian := debianImage(t)
	sinkAddr, got := byteSink(t)
	eng, _ := egressEngine(t, sinkAddr, nil)
	ts := startServer(t, eng)
	var reg e2b.TemplateRequestResponseV3
	ts.call("POST", "/v3/templates", e2b.TemplateBuildRequestV3{Name: "egress-upload", MemoryMB: int32p(memoryMB)}, http.StatusAccepted, &reg)
	ts.start(reg, e2b.TemplateBuildStartV2{FromImage: debian})
	if info := ts.waitBuild(reg); info.Status != "ready" {
		t.Fatalf("build = %+v", info)
	}
	ts.deleteTemplateAtEnd(reg.TemplateID)
	return ts, ts.probeSandbox("egress-upload"), sinkAddr, got
}

// A client that closes its socket right after its last byte loses none
// of them through the egress proxy (issue #35): several rounds of uploads
// of sizes around the buffers on the way (the sandbox's socket buffers,
// yamux's 8 MiB window), each checked by count and hash at the sink.
// E2B_TEST_UPLOAD_SIZES (bytes, comma-separated) and E2B_TEST_UPLOAD_ROUNDS
// change them, for a longer search.
func TestDockerEgressUploadHalfClose(t *testing.T) {
	_, sb, sinkAddr, got := egressUploadServer(t, 1024)
	sizes := []int64{1 << 20, 8<<20 + 12345, 64<<20 + 1, 256 << 20}
	if s := os.Getenv("E2B_TEST_UPLOAD_SIZES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, n)
		}
	}
	rounds := 3
	if s := os.Getenv("E2B_TEST_UPLOAD_ROUNDS"); s != "" {
		rounds, _ = strconv.Atoi(s)
	}
	for round := range rounds {
		for _, size := range sizes {
			line := fmt.Sprintf("round %d of %d bytes", round, size)
			out, code := sb.bash("root", connectUploadScript(sinkAddr, line, size))
			if code != 0 || !strings.Contains(out, "sent") {
				t.Fatalf("round %d, %d bytes: the upload failed (exit %d): %s", round, size, code, out)
			}
			want := patternOf(line, size)
			if r := <-got; r != want {
				t.Errorf("round %d: the sink got %d bytes (sha256 %s), want %d (%s): %d lost", round, r.n, r.sum, want.n, want.sum, want.n-r.n)
			} else {
				t.Logf("round %d: %d bytes arrived whole", round, size)
			}
		}
	}
}

// bash runs a bash script as user, for as long as it takes, and returns
// its combined output and exit code.
func (p *probeSandbox) bash(user, script string) (string, int) {
	p.t.Helper()
	res, err := p.client.Run(p.t.Context(), envdclient.RunRequest{Cmd: "/bin/bash", Args: []string{"-c", script}, User: user, Timeout: 30 * time.Minute})
	if err != nil {
		p.t.Fatalf("run %q: %v", script, err)
	}
	return string(res.Stdout) + string(res.Stderr), res.ExitCode
}

// cgroupMemory reads the memory cgroup (v1 or v2) of the container's main
// process on the host (for gVisor, the Sentry's): usage, peak and limit,
// the shared memory among them (gVisor's memory file) and the largest
// resident process, in MiB.
func cgroupMemory(pid int) string {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return err.Error()
	}
	dir := ""
	for line := range strings.Lines(string(raw)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		switch {
		case len(parts) != 3:
		case strings.Contains(parts[1], "memory"):
			dir = filepath.Join("/sys/fs/cgroup/memory", parts[2])
		case parts[1] == "" && dir == "":
			dir = filepath.Join("/sys/fs/cgroup", parts[2])
		}
	}
	mib := func(names ...string) string {
		for _, n := range names {
			if b, err := os.ReadFile(filepath.Join(dir, n)); err == nil {
				if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
					return strconv.FormatInt(v>>20, 10)
				}
			}
		}
		return "?"
	}
	shmem := "?"
	stat, _ := os.ReadFile(filepath.Join(dir, "memory.stat"))
	for l := range strings.Lines(string(stat)) {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "shmem" {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			shmem = strconv.FormatInt(v>>20, 10)
		}
	}
	largest, largestKB := "", 0
	procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	for _, p := range strings.Fields(string(procs)) {
		status, _ := os.ReadFile("/proc/" + p + "/status")
		for l := range strings.Lines(string(status)) {
			if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				if kb, _ := strconv.Atoi(strings.Fields(v)[0]); kb > largestKB {
					largest, largestKB = p, kb
				}
			}
		}
	}
	return fmt.Sprintf("usage %s MiB, peak %s MiB, limit %s MiB, shmem %s MiB; largest process %s: %d MiB resident",
		mib("memory.usage_in_bytes", "memory.current"), mib("memory.max_usage_in_bytes", "memory.peak"), mib("memory.limit_in_bytes", "memory.max"), shmem, largest, largestKB>>10)
}

// keyringScript, run as root, adds keys to its session keyring until the
// kernel refuses one (or 2,000), and prints how many it added.
const keyringScript = `python3 -c '
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
n = 0
for i in range(2000):
    if libc.syscall(248, b"user", b"k%d" % i, b"x" * 1000, 1000, -3) < 0:
        break
    n += 1
print("keys:", n, ctypes.get_errno())
'`

// namespaceScript, run as root, enters new namespaces of every kind
// repeatedly, as a container runtime inside the sandbox would.
const namespaceScript = `n=0; for i in $(seq 200); do unshare -Urmnipuf --mount-proc true 2>/dev/null && n=$((n+1)); done; echo "namespaces: $n"`

// A sandbox that ran the hostile probes of issue #33 (4,096 inotify
// instances, a flood of connections through the server's proxy,
// namespaces and keys) then uploads 512 MiB through the egress proxy, in a
// 512 MiB template as issue #33's: the sandbox and envd stay alive and
// every byte arrives. The container's memory is logged as it goes.
func TestDockerEgressUploadAfterProbes(t *testing.T) {
	ts, sb, sinkAddr, got := egressUploadServer(t, 512)
	pid := containerOf(t, sb.id).State.Pid
	t.Logf("memory before the probes: %s", cgroupMemory(pid))

	if out, code := sb.sh("root", inotifyHogScript); code != 0 {
		t.Fatalf("start the inotify hog: %s", out)
	}
	held := ""
	for deadline := time.Now().Add(time.Minute); held == "" && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		held, _ = sb.sh("root", "cat /tmp/inotify-held 2>/dev/null; true")
	}
	t.Logf("inotify instances held: %s", held)
	out, _ := sb.sh("root", keyringScript+"; "+namespaceScript)
	t.Logf("probes: %s", strings.TrimSpace(out))

	// The flood: 500 connections held open through the server's proxy to
	// an echo server in the sandbox, and 2,000 requests beside them.
	const port = 8080
	sb.serve(fmt.Sprintf("0.0.0.0:%d", port), "flood")
	waitProxy(t, ts.URL, sb.id, port)
	host := fmt.Sprintf("%d-%s.localhost", port, sb.id)
	var heldConns []net.Conn
	t.Cleanup(func() {
		for _, c := range heldConns {
			c.Close()
		}
	})
	for range 500 {
		c, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET /echo HTTP/1.1\r\nHost: %s\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n", host)
		heldConns = append(heldConns, c)
	}
	upgraded := 0
	for _, c := range heldConns {
		buf := make([]byte, 12)
		if _, err := io.ReadFull(c, buf); err == nil && string(buf) == "HTTP/1.1 101" {
			upgraded++
		}
	}
	var wg sync.WaitGroup
	var okReqs atomic.Int32
	for range 50 {
		wg.Go(func() {
			for range 40 {
				req, _ := http.NewRequestWithContext(t.Context(), "GET", ts.URL+"/flood", nil)
				req.Host = host
				if resp, err := http.DefaultClient.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						okReqs.Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	t.Logf("flood: %d of 500 connections upgraded and held, %d of 2000 requests answered 200", upgraded, okReqs.Load())
	t.Logf("memory after the probes: %s", cgroupMemory(pid))

	const size = 512 << 20
	line := "after the probes"
	sampled := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		defer close(sampled)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Second):
				t.Logf("memory during the upload (sample %d, every 5 s): %s", i+1, cgroupMemory(pid))
			}
		}
	}()
	res, err := sb.client.Run(t.Context(), envdclient.RunRequest{Cmd: "/bin/bash", Args: []string{"-c", connectUploadScript(sinkAddr, line, size)}, User: "root", Timeout: 30 * time.Minute})
	close(stop)
	<-sampled
	t.Logf("memory after the upload: %s", cgroupMemory(pid))
	if err != nil {
		t.Errorf("the upload's process: %v", err)
	} else if res.ExitCode != 0 {
		t.Errorf("the upload exited %d: %s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	if r, want := <-got, patternOf(line, size); r != want {
		t.Errorf("the sink got %d bytes (sha256 %s), want %d (%s)", r.n, r.sum, want.n, want.sum)
	}
	if out, code := sb.sh("root", "echo alive"); code != 0 || out != "alive\n" {
		t.Errorf("the sandbox after the upload: %q (exit %d)", out, code)
	}
}

// socketHogScript, run as root, grows its memory 10 MiB at a time and
// sends each piece through a loopback connection to a child that drains
// it, until it is killed: a process that exhausts the sandbox's memory
// while gVisor's kernel copies its data (which under gVisor once took
// the whole sandbox with it).
const socketHogScript = `python3 -c '
import os, socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
if os.fork() == 0:
    sv, _ = s.accept()
    while sv.recv(1 << 20): pass
    os._exit(0)
c = socket.create_connection(s.getsockname())
held = []
for i in range(400):
    held.append(bytearray(os.urandom(1) * (10 << 20)))
    c.sendall(held[-1])
print("never killed")
'`

// A process that exhausts the sandbox's memory is killed and the sandbox
// and envd go on, with the cause in the sandbox's log under gVisor (whose
// kernel has no out-of-memory killer: envd is the sandbox's).
func TestDockerMemoryExhaustion(t *testing.T) {
	eng, _ := dockerEngine(t)
	debian := debianImage(t)
	rt := runtimeOf(t, eng)
	ts := startServer(t, eng)
	var reg e2b.TemplateRequestResponseV3
	ts.call("POST", "/v3/templates", e2b.TemplateBuildRequestV3{Name: "memory-hog", MemoryMB: int32p(256)}, http.StatusAccepted, &reg)
	ts.start(reg, e2b.TemplateBuildStartV2{FromImage: debian})
	if info := ts.waitBuild(reg); info.Status != "ready" {
		t.Fatalf("build = %+v", info)
	}
	ts.deleteTemplateAtEnd(reg.TemplateID)
	sb := ts.probeSandbox("memory-hog")
	pid := containerOf(t, sb.id).State.Pid
	for round := range 3 {
		out, code := sb.sh("root", socketHogScript)
		t.Logf("round %d: the hog exited %d; memory: %s", round, code, cgroupMemory(pid))
		if code == 0 || strings.Contains(out, "never killed") {
			t.Fatalf("round %d: the process that exhausts the sandbox's memory was not stopped (exit %d): %s", round, code, out)
		}
		if out, code := sb.sh("root", "echo alive"); code != 0 || out != "alive\n" {
			t.Fatalf("round %d: the sandbox after a process exhausted its memory: %q (exit %d)", round, out, code)
		}
	}
	if !rt.GVisor {
		return // the kernel's own killer, logged by the engine
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		var logs e2b.SandboxLogsV2Response
		ts.call("GET", "/v2/sandboxes/"+sb.id+"/logs?level=warn&search=out+of+memory", nil, http.StatusOK, &logs)
		if len(logs.Logs) > 0 {
			t.Logf("the sandbox's log: %s", logs.Logs[0].Message)
			if !strings.Contains(logs.Logs[0].Message, "python3") {
				t.Errorf("the log names another process than the hog: %s", logs.Logs[0].Message)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no out-of-memory line in the sandbox's log")
		}
	}
}

// fdHogScript, run as root in a sandbox, opens files until its process may
// open no more (at most 65,536, its limit raised that far), prints how
// many it holds and the error that stopped it, and holds them for a
// minute.
const fdHogScript = `nohup python3 -c '
import os, resource, sys, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65536), hard))
fds = []
try:
    while True:
        fds.append(os.open("/dev/null", os.O_RDONLY))
except OSError as e:
    print(len(fds), e.errno, flush=True)
time.sleep(60)
' > /tmp/fd-hog.out 2>&1 &
for i in $(seq 100); do [ -s /tmp/fd-hog.out ] && break; sleep 0.2; done
cat /tmp/fd-hog.out`

// A process that exhausts its file descriptors is refused more (EMFILE)
// and envd, the channel and the sandbox's other processes go on, as in a
// VM: the limit is the process's, not the sandbox's.
func TestDockerDescriptorExhaustion(t *testing.T) {
	eng, _ := dockerEngine(t)
	ts := startServer(t, eng)
	ts.readyTemplate(debianImage(t), "fd-hog")
	sb := ts.probeSandbox("fd-hog")
	out, code := sb.sh("root", fdHogScript)
	var held, errno int
	if _, err := fmt.Sscan(out, &held, &errno); err != nil || code != 0 {
		t.Fatalf("the descriptor hog: %q (exit %d)", out, code)
	}
	t.Logf("the hog holds %d descriptors, then errno %d", held, errno)
	if errno != int(syscall.EMFILE) || held < 1000 {
		t.Errorf("the hog held %d descriptors and stopped with errno %d, want EMFILE after at least 1,000", held, errno)
	}
	for _, user := range []string{"root", "user"} {
		if out, code := sb.sh(user, "cat /etc/hostname >/dev/null && echo alive"); code != 0 || out != "alive\n" {
			t.Errorf("a process of %s while the hog holds its descriptors: %q (exit %d)", user, out, code)
		}
	}
}
