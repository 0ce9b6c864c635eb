package templatebuild

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/steps"
)

const (
	// pollInterval is how often a build's status is asked for, as the E2B SDK does.
	pollInterval = 200 * time.Millisecond
	// maxLogPage is the most log entries one status answer carries.
	maxLogPage = 100
	// failureLogLines is how many log lines a FailedError shows.
	failureLogLines = 30
)

// FailedError is a build that ended in error.
type FailedError struct {
	TemplateID string
	BuildID    string
	Reason     *e2b.BuildStatusReason
	// Steps are the build's steps, to name the one that failed; may be nil.
	Steps []steps.Step
	// Tail is the last log lines (at most failureLogLines).
	Tail []e2b.BuildLogEntry
}

// Error says where and why the build failed, then its last log lines.
func (e *FailedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Build %s of template %s failed", e.BuildID, e.TemplateID)
	if e.Reason != nil && e.Reason.Step != "" {
		fmt.Fprintf(&b, " at %s", describeStep(e.Steps, e.Reason.Step))
	}
	if e.Reason != nil && e.Reason.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Reason.Message)
	}
	b.WriteString(".")
	if len(e.Tail) > 0 {
		fmt.Fprintf(&b, "\n\nLast %d log lines:\n", len(e.Tail))
		for _, l := range e.Tail {
			fmt.Fprintf(&b, "[%s] %s\n", cmp.Or(l.Step, "-"), strings.TrimRight(l.Message, "\n"))
		}
	}
	return b.String()
}

// poller follows builds; tests give it a fake clock.
type poller struct {
	interval time.Duration
	// sleep waits d or until ctx ends.
	sleep func(ctx context.Context, d time.Duration) error
}

// follow polls a started build until it is ready or failed, handing every log entry once,
// in order, to onLog with a description of its step (describeStep; steps may be nil), and
// returns the last status answer. It follows the SDK: poll with logsOffset advanced by the
// entries received; once the status is final, keep polling until an answer carries no
// entries (the server caps a page at maxLogPage, so the last entries may still be
// waiting). A full page is followed at once; otherwise it waits the poll interval. A
// failed build returns the final answer and a *FailedError; when ctx ends first, the error
// is ctx's and the build goes on.
func (p poller) follow(ctx context.Context, api *e2bapi.Client, templateID, buildID string, buildSteps []steps.Step, onLog func(e2b.BuildLogEntry, string)) (*e2b.TemplateBuildInfo, error) {
	var offset int32
	var tail []e2b.BuildLogEntry
	for {
		info, err := api.GetBuildStatus(ctx, templateID, buildID, offset)
		if err != nil {
			return nil, err
		}
		for _, entry := range info.LogEntries {
			if onLog != nil {
				onLog(entry, describeStep(buildSteps, entry.Step))
			}
			tail = append(tail, entry)
			if len(tail) > failureLogLines {
				tail = tail[len(tail)-failureLogLines:]
			}
		}
		offset += int32(len(info.LogEntries)) //nolint:gosec // at most maxLogPage
		switch info.Status {
		case e2b.BuildWaiting, e2b.BuildBuilding:
		case e2b.BuildReady, e2b.BuildError:
			if len(info.LogEntries) == 0 {
				if info.Status == e2b.BuildError {
					return info, &FailedError{TemplateID: templateID, BuildID: buildID, Reason: info.Reason, Steps: buildSteps, Tail: tail}
				}
				return info, nil
			}
		default:
			return info, fmt.Errorf("build %s of template %s has the unknown status %q", buildID, templateID, info.Status)
		}
		if len(info.LogEntries) >= maxLogPage {
			continue
		}
		if err := p.sleep(ctx, p.interval); err != nil {
			return nil, err
		}
	}
}

func sleepContext(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// describeStep names a log line's step: "3" is the third build step, described as
// steps.Step.Describe does, shortened to 80 characters.
func describeStep(buildSteps []steps.Step, step string) string {
	n, err := strconv.Atoi(step)
	if err != nil || n < 1 || n > len(buildSteps) {
		return step
	}
	line := buildSteps[n-1].Describe()
	if len(line) > 80 {
		line = line[:77] + "..."
	}
	return fmt.Sprintf("step %d (%s)", n, line)
}
