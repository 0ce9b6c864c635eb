package templatebuild

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/openapitest"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/steps"
)

const (
	testTemplate = "rki5dems9wqfm4r03t7g"
	testBuildID  = "0b9d3f2e-6c1a-4a8e-9f7d-2e5b8c1d4a6f"
)

// buildLog is a stand-in for the build status endpoint: poll n sees visible(n) of the
// entries, at most a page from the asked offset, and the status status(n).
type buildLog struct {
	entries []e2b.BuildLogEntry
	polls   atomic.Int32
	visible func(poll int) int
	status  func(poll int) string
	reason  *e2b.BuildStatusReason

	mu      sync.Mutex
	offsets []string
}

func newBuildLog(n int) *buildLog {
	b := &buildLog{}
	at := time.Date(2026, 11, 30, 1, 2, 3, 0, time.UTC)
	for i := range n {
		b.entries = append(b.entries, e2b.BuildLogEntry{Timestamp: at.Add(time.Duration(i) * time.Millisecond), Message: fmt.Sprintf("line %d", i), Level: e2b.LogInfo, Step: "1"})
	}
	return b
}

// client serves the build log and returns a client of it whose every call passes the
// validating transport of the E2B spec.
func (b *buildLog) client(t *testing.T) *e2bapi.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		poll := int(b.polls.Add(1))
		q := r.URL.Query().Get("logsOffset")
		b.mu.Lock()
		b.offsets = append(b.offsets, q)
		b.mu.Unlock()
		offset := 0
		if _, err := fmt.Sscan(q, &offset); err != nil {
			t.Errorf("logsOffset %q: %v", q, err)
		}
		end := min(b.visible(poll), offset+maxLogPage)
		page := []e2b.BuildLogEntry{}
		if offset < end {
			page = b.entries[offset:end]
		}
		info := e2b.TemplateBuildInfo{TemplateID: testTemplate, BuildID: testBuildID, Status: b.status(poll), Logs: []string{}, LogEntries: page}
		if info.Status == e2b.BuildError {
			info.Reason = b.reason
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(info)
	}))
	t.Cleanup(srv.Close)
	c, err := e2bapi.New(e2bapi.Config{BaseURL: srv.URL, APIKey: "e2b_0123456789abcdef",
		HTTPClient: &http.Client{Transport: openapitest.E2B(t).Transport(t, srv.URL, nil)}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestFollowPagesAndDrains(t *testing.T) {
	b := newBuildLog(250)
	// Poll 1: building, 30 lines. Poll 2: building, 150. From poll 3 the
	// build is ready with all 250 lines, more than one page behind.
	b.visible = func(poll int) int {
		switch poll {
		case 1:
			return 30
		case 2:
			return 150
		}
		return 250
	}
	b.status = func(poll int) string {
		if poll >= 3 {
			return e2b.BuildReady
		}
		return e2b.BuildBuilding
	}
	api := b.client(t)

	var fakeNow time.Duration
	var sleeps []time.Duration
	var logged []string
	p := poller{interval: time.Second, sleep: func(ctx context.Context, d time.Duration) error {
		sleeps = append(sleeps, d)
		fakeNow += d
		return nil
	}}
	info, err := p.follow(t.Context(), api, testTemplate, testBuildID, nil, func(e e2b.BuildLogEntry, _ string) { logged = append(logged, e.Message) })
	if err != nil {
		t.Fatalf("follow: %v", err)
	}
	if info.Status != e2b.BuildReady || len(info.LogEntries) != 0 {
		t.Errorf("final answer %+v, want ready with no entries (drained)", info)
	}
	if len(logged) != 250 {
		t.Fatalf("%d entries handed over, want 250", len(logged))
	}
	for i, m := range logged {
		if m != fmt.Sprintf("line %d", i) {
			t.Fatalf("entry %d is %q: entries were lost, repeated or reordered", i, m)
		}
	}
	// 0 → 30 lines; 30 → a full page; 130 → a full page (ready, draining);
	// 230 → 20; 250 → none: done.
	if got := strings.Join(b.offsets, ","); got != "0,30,130,230,250" {
		t.Errorf("logsOffsets %v, want 0,30,130,230,250", got)
	}
	// Full pages are followed at once; otherwise the poll interval passes.
	if len(sleeps) != 2 || fakeNow != 2*time.Second {
		t.Errorf("slept %v, want twice the poll interval", sleeps)
	}
}

func TestFollowFailure(t *testing.T) {
	b := newBuildLog(120)
	b.visible = func(int) int { return 120 }
	b.status = func(poll int) string {
		if poll == 1 {
			return e2b.BuildBuilding
		}
		return e2b.BuildError
	}
	b.reason = &e2b.BuildStatusReason{Message: "command failed: exit 1", Step: "2"}
	api := b.client(t)
	buildSteps := []steps.Step{steps.NewRun(steps.RunArgs{Command: "true"}), steps.NewRun(steps.RunArgs{Command: "exit 1"})}
	n := 0
	p := poller{interval: time.Second, sleep: func(context.Context, time.Duration) error { return nil }}
	info, err := p.follow(t.Context(), api, testTemplate, testBuildID, buildSteps, func(e2b.BuildLogEntry, string) { n++ })
	var failed *FailedError
	if !errors.As(err, &failed) || failed.Reason == nil || failed.Reason.Message != "command failed: exit 1" {
		t.Fatalf("error %v, want a *FailedError with the reason", err)
	}
	if !strings.Contains(err.Error(), "at step 2 (RUN exit 1): command failed: exit 1") {
		t.Errorf("error text %q lacks the step and reason", err)
	}
	if len(failed.Tail) != failureLogLines || failed.Tail[len(failed.Tail)-1].Message != "line 119" {
		t.Errorf("tail has %d lines ending %+v, want the last %d", len(failed.Tail), failed.Tail[len(failed.Tail)-1], failureLogLines)
	}
	if info == nil || info.Status != e2b.BuildError {
		t.Errorf("final answer %+v, want the error status", info)
	}
	if n != 120 {
		t.Errorf("%d entries handed over before failing, want all 120 (drained)", n)
	}
}

func TestFollowStopsWithContext(t *testing.T) {
	b := newBuildLog(0)
	b.visible = func(int) int { return 0 }
	b.status = func(int) string { return e2b.BuildBuilding }
	api := b.client(t)
	ctx, cancel := context.WithCancel(t.Context())
	p := poller{interval: time.Second, sleep: func(ctx context.Context, d time.Duration) error {
		cancel()
		return ctx.Err()
	}}
	_, err := p.follow(ctx, api, testTemplate, testBuildID, nil, nil)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
}

func TestFailedErrorShowsTheTail(t *testing.T) {
	buildSteps := []steps.Step{steps.NewRun(steps.RunArgs{Command: "true"}), steps.NewRun(steps.RunArgs{Command: "exit 7"})}
	var tail []e2b.BuildLogEntry
	for i := range 40 {
		tail = append(tail, e2b.BuildLogEntry{Message: fmt.Sprintf("line %d", i), Step: "2"})
	}
	tail = append(tail, e2b.BuildLogEntry{Message: "no step\n"})
	err := &FailedError{TemplateID: "tpl", BuildID: "bid", Reason: &e2b.BuildStatusReason{Message: "exit status 7", Step: "2"}, Steps: buildSteps, Tail: tail[11:]}
	got := err.Error()
	for _, want := range []string{"Build bid of template tpl failed at step 2 (RUN exit 7): exit status 7.", "Last 30 log lines", "[2] line 11", "[2] line 39", "[-] no step\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("message lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "line 10\n") {
		t.Errorf("message has more than the tail:\n%s", got)
	}
}

func TestDescribeStep(t *testing.T) {
	buildSteps := []steps.Step{steps.NewCopy(steps.CopyArgs{Src: "app", Dest: "/app"}), steps.NewRun(steps.RunArgs{Command: strings.Repeat("x", 100)})}
	for step, want := range map[string]string{
		"1":        "step 1 (COPY app /app)",
		"2":        "step 2 (RUN " + strings.Repeat("x", 73) + "...)",
		"3":        "3",
		"base":     "base",
		"finalize": "finalize",
	} {
		if got := describeStep(buildSteps, step); got != want {
			t.Errorf("describeStep(%q) = %q, want %q", step, got, want)
		}
	}
}
