package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	docker "github.com/docker/docker/client"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine/attach"
)

// fileLimitLabel carries a container's file limit (--inodes-per-sandbox),
// so that the limit it was created with holds across server restarts.
const fileLimitLabel = "file-limit"

// Bounds of one container's measure (fileWatch.measure).
const (
	// measureTimeout bounds a container's measure. The engine lists a
	// container's changes and sizes its files by walking its writable
	// layer: measured on a loaded 2-core machine, 17 to 31 s for 150,000
	// files, so a container near the default file limit takes minutes.
	measureTimeout = 5 * time.Minute
	// heldCountTimeout bounds the container's own count of its deleted
	// files still open, a walk of /proc.
	heldCountTimeout = 30 * time.Second
	// A container's next measure comes no later than it could reach a
	// limit from its last measure: its file limit at maxFileRate files a
	// second (root made 15,000 a second under runc on a 2-core machine),
	// its watched disk limit at maxByteRate bytes a second (a fast local
	// disk's write rate; 80 MiB/s here). Far from its limits, a container
	// is measured every maxMeasureGap: each measure walks its files twice
	// and runs a process in it, which took most of the engine's time
	// when every container was measured every 2 seconds.
	maxFileRate   = 20_000
	maxByteRate   = 1 << 30
	maxMeasureGap = 30 * time.Second
	// minMeasureGap: a container near a limit is measured again this soon.
	minMeasureGap = time.Second
	// maxUnmeasured is how many measures of a container in a row may fail
	// before it is stopped for it: one that cannot be measured must not
	// run free past its limits.
	maxUnmeasured = 3
)

// fileWatch measures every running sandbox and build container of the
// server against its limits: the number of files its writable layer holds
// (the engine's changes of it, whatever the disk limit), and where the
// disk limit is the watchdog's its size as the engine measures it plus the
// space held by its deleted files still open. Each container is measured
// in a goroutine of its own with its own deadline, so that one with many
// files delays no other's stop. A container past a limit is killed.
type fileWatch struct {
	cli      *docker.Client
	labels   labels
	channels *attach.Channels
	log      *slog.Logger
	// bytesWatched: the disk limit is the watchdog's.
	bytesWatched bool
	// changes streams a container's changes from the engine (countChanges).
	changes *http.Client

	mu sync.Mutex
	// measuring holds the containers whose measure runs.
	measuring map[string]bool
	// next is when each container's next measure may start.
	next map[string]time.Time
	// unmeasured counts each container's failed measures in a row.
	unmeasured map[string]int
	// stopped are the sandboxes stopped since the last pass, and errs the
	// errors met, for the pass to return.
	stopped []engine.DiskOverrun
	errs    []error
}

func newFileWatch(cli *docker.Client, l labels, channels *attach.Channels, log *slog.Logger, bytesWatched bool) *fileWatch {
	dial := cli.Dialer()
	return &fileWatch{
		cli: cli, labels: l, channels: channels, log: log, bytesWatched: bytesWatched,
		// The client's own dialer reaches the engine wherever it is (a
		// socket, TCP with TLS), so the URL's host is a placeholder.
		changes: &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		}},
		measuring: map[string]bool{}, next: map[string]time.Time{}, unmeasured: map[string]int{},
	}
}

// pass starts a measure of every running container of the server with a
// limit that is not being measured nor waiting for its next measure, and
// returns the sandboxes stopped (and the errors met) since the last pass.
// The measures outlive it: ctx must last as long as the server.
func (w *fileWatch) pass(ctx context.Context) ([]engine.DiskOverrun, error) {
	list, err := w.cli.ContainerList(ctx, container.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", w.labels.key("instance")+"="+w.labels.instance),
		filters.Arg("status", "running"),
	)})
	if err != nil {
		return nil, fmt.Errorf("list the containers to measure: %w", err)
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for id := range w.next {
		if !slices.ContainsFunc(list, func(c container.Summary) bool { return c.ID == id }) {
			delete(w.next, id)
			delete(w.unmeasured, id)
		}
	}
	for _, c := range list {
		lim := w.limitsOf(c.Labels)
		if lim.files <= 0 && (!w.bytesWatched || lim.bytes <= 0) {
			continue
		}
		// A container's first measure waits as long as it needs to reach
		// a limit from nothing: most sandboxes and build containers end
		// before it. A pooled one runs only envd until it is handed out,
		// so its wait starts then (a zero next: seen warm).
		next, seen := w.next[c.ID]
		switch a := w.attachmentOf(c); {
		case a != nil && a.Warm():
			w.next[c.ID] = time.Time{}
			continue
		case !seen:
			next = time.Unix(c.Created, 0).Add(nextMeasure(lim, measured{}, w.bytesWatched))
		case next.IsZero():
			next = now.Add(nextMeasure(lim, measured{}, w.bytesWatched))
		}
		w.next[c.ID] = next
		if w.measuring[c.ID] || now.Before(next) {
			continue
		}
		w.measuring[c.ID] = true
		go w.measure(ctx, c, lim)
	}
	stopped, errs := w.stopped, w.errs
	w.stopped, w.errs = nil, nil
	return stopped, errors.Join(errs...)
}

// containerLimits are a container's limits, from its labels.
type containerLimits struct {
	bytes, files int64
}

func (w *fileWatch) limitsOf(l map[string]string) containerLimits {
	return containerLimits{bytes: diskLimit(l[w.labels.key(diskLimitLabel)]), files: fileLimit(l[w.labels.key(fileLimitLabel)])}
}

// measure measures container c against its limits lim and stops it when
// it is past one, or when it could not be measured maxUnmeasured times in
// a row.
func (w *fileWatch) measure(ctx context.Context, c container.Summary, lim containerLimits) {
	mctx, cancel := context.WithTimeout(ctx, measureTimeout)
	m, err := w.over(mctx, w.attachmentOf(c), c.ID, lim)
	cancel()
	w.mu.Lock()
	delete(w.measuring, c.ID)
	wait := minMeasureGap // a failed measure is tried again soon
	if err == nil {
		wait = nextMeasure(lim, m, w.bytesWatched)
	}
	w.next[c.ID] = time.Now().Add(wait)
	o := m.overrun
	if err != nil && ctx.Err() == nil {
		w.unmeasured[c.ID]++
		if w.unmeasured[c.ID] >= maxUnmeasured {
			o = &engine.DiskOverrun{Limit: lim.bytes, FileLimit: lim.files, Unmeasured: err.Error()}
		} else {
			w.errs = append(w.errs, fmt.Errorf("measure container %s: %w", attach.ShortID(c.ID), err))
		}
	} else {
		delete(w.unmeasured, c.ID)
	}
	w.mu.Unlock()
	if o != nil && ctx.Err() == nil {
		o.SandboxID, o.BuildID = c.Labels[w.labels.key("sandbox-id")], c.Labels[w.labels.key("build-id")]
		w.stop(ctx, c, o)
	}
}

// nextMeasure is how long after measure m a container with limits lim is
// measured again: before it could reach one of them, at the rates above.
func nextMeasure(lim containerLimits, m measured, bytesWatched bool) time.Duration {
	wait := maxMeasureGap
	if lim.files > 0 {
		wait = min(wait, time.Duration(lim.files-m.files)*time.Second/maxFileRate)
	}
	if bytesWatched && lim.bytes > 0 {
		wait = min(wait, time.Duration(float64(lim.bytes-m.used)/maxByteRate*float64(time.Second)))
	}
	return max(wait, minMeasureGap)
}

// attachmentOf is container c's attachment, nil when this server has none
// for it.
func (w *fileWatch) attachmentOf(c container.Summary) *attach.Attachment {
	kind := c.Labels[w.labels.key("kind")]
	id := c.Labels[w.labels.key("sandbox-id")]
	if kind == kindBuild {
		id = c.Labels[w.labels.key("build-id")]
	}
	return w.channels.Get(attach.Key(kind, id))
}

// measured is a container's measure: the entries of its changes, the
// bytes its files use (where the disk limit is watched), and its overrun
// of its limits, nil when it is within them.
type measured struct {
	files, used int64
	overrun     *engine.DiskOverrun
}

// over measures container id against its limits lim. An error is a
// measure that failed, except that a count of held files the container's
// root broke (killed, stopped past its deadline, or answered with no
// number) is an overrun: root in a sandbox is not to be trusted to let its
// count run.
func (w *fileWatch) over(ctx context.Context, a *attach.Attachment, id string, lim containerLimits) (measured, error) {
	var m measured
	if lim.files > 0 {
		var err error
		if m.files, err = w.countChanges(ctx, id); err != nil {
			return m, err
		}
		if m.files > lim.files {
			m.overrun = &engine.DiskOverrun{Files: m.files, FileLimit: lim.files}
			return m, nil
		}
	}
	if !w.bytesWatched || lim.bytes <= 0 {
		return m, nil
	}
	insp, _, err := w.cli.ContainerInspectWithRaw(ctx, id, true)
	if err != nil {
		return m, fmt.Errorf("measure the container's files: %w", err)
	}
	if insp.SizeRootFs == nil {
		return m, errors.New("the engine did not measure the container's files")
	}
	o := &engine.DiskOverrun{Used: *insp.SizeRootFs, Limit: lim.bytes}
	if o.Used <= o.Limit {
		var freezes int
		if a != nil {
			freezes = a.Freezes()
		}
		hctx, cancel := context.WithTimeout(ctx, heldCountTimeout)
		held, err := heldByDeleted(hctx, w.cli, a, id)
		cancel()
		var broken *errHeldCount
		if errors.Is(err, attach.ErrFrozen) || (err != nil && a != nil && a.Freezes() != freezes) {
			return m, nil // frozen by a pause or a commit, not by the container
		}
		if errors.As(err, &broken) {
			o.Unmeasured = broken.Error()
			m.overrun = o
			return m, nil
		}
		if err != nil {
			return m, err
		}
		o.Used += held
		o.Held = held
	}
	m.used = o.Used
	if o.Used > o.Limit {
		m.overrun = o
	}
	return m, nil
}

// stop kills container c past its limits (o). A build container's overrun
// is recorded first, so that the step it ends finds it; a sandbox's is
// kept for the next pass to return, for the server to stop the sandbox
// and say why.
func (w *fileWatch) stop(ctx context.Context, c container.Summary, o *engine.DiskOverrun) {
	kind := c.Labels[w.labels.key("kind")]
	switch kind {
	case kindBuild:
		if a := w.channels.Get(attach.Key(kindBuild, o.BuildID)); a != nil {
			a.SetOverrun(o)
		}
	case kindSandbox:
		// Before the kill, so that its end is no SandboxEnd: the server
		// stops the sandbox and logs why, and removes the container even
		// if the kill failed.
		w.channels.Detach(attach.Key(kindSandbox, o.SandboxID))
	}
	err := w.cli.ContainerKill(ctx, c.ID, "KILL")
	if kind == kindBuild {
		// After the kill, its channel too: under gVisor the engine once
		// left the stream of the killed container's agent open, and the
		// step waited on it until the build's time was up.
		w.channels.Detach(attach.Key(kindBuild, o.BuildID))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil && !isNotFound(err) {
		w.errs = append(w.errs, fmt.Errorf("stop container %s past its limits: %w", attach.ShortID(c.ID), err))
	}
	if kind == kindSandbox {
		w.stopped = append(w.stopped, *o)
		return
	}
	w.log.Warn("container stopped: "+o.Error(), "container", attach.ShortID(c.ID), "kind", kind, "build", o.BuildID)
}

// withinFileLimit fails with the overrun when build container id holds
// more than limit files (none: at most 0): a step that made them faster
// than the watch measured must not have them committed.
func (w *fileWatch) withinFileLimit(ctx context.Context, id string, limit int64) error {
	if limit <= 0 {
		return nil
	}
	n, err := w.countChanges(ctx, id)
	if err != nil {
		return err
	}
	if n > limit {
		return &engine.DiskOverrun{Files: n, FileLimit: limit}
	}
	return nil
}

// countChanges counts the entries of container id's changes as the engine
// lists them (GET /containers/{id}/changes: every file and directory its
// writable layer added, changed or deleted): the engine walks the layer
// itself, so no process in the container can hide a file from it. The
// list is read as it comes, never held whole.
func (w *fileWatch) countChanges(ctx context.Context, id string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+docker.DummyHost+"/v"+w.cli.ClientVersion()+"/containers/"+id+"/changes", nil)
	if err != nil {
		return 0, err
	}
	resp, err := w.changes.Do(req)
	if err != nil {
		return 0, fmt.Errorf("list the container's changes: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("list the container's changes: %s", resp.Status)
	}
	dec := json.NewDecoder(resp.Body)
	// The engine answers null for a container with no changes.
	if tok, err := dec.Token(); err != nil || tok == nil {
		return 0, err
	}
	var n int64
	for dec.More() {
		var change struct{}
		if err := dec.Decode(&change); err != nil {
			return 0, fmt.Errorf("read the container's changes: %w", err)
		}
		n++
	}
	return n, nil
}

// fileLimit parses a file limit label; 0 when absent or bad.
func fileLimit(label string) int64 {
	n, err := strconv.ParseInt(label, 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}
