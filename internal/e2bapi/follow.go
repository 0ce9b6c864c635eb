package e2bapi

import (
	"context"
	"fmt"
	"time"
)

// DefaultPollInterval is how often FollowBuild polls, as the E2B SDK does.
const DefaultPollInterval = 200 * time.Millisecond

// maxLogPage is the most log entries one status answer carries.
const maxLogPage = 100

// FollowOptions configures FollowBuild.
type FollowOptions struct {
	// PollInterval defaults to DefaultPollInterval.
	PollInterval time.Duration
	// Sleep waits d or until ctx ends; tests inject a fake clock here.
	// Defaults to a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// OnLog receives every log entry once, in order.
	OnLog func(BuildLogEntry)
	// Level is the minimum log level to fetch; empty for all.
	Level string
}

// BuildFailedError is returned by FollowBuild when the build ends in the
// error status.
type BuildFailedError struct {
	TemplateID, BuildID string
	Reason              *BuildStatusReason
}

func (e *BuildFailedError) Error() string {
	msg := "no reason given"
	if e.Reason != nil && e.Reason.Message != "" {
		msg = e.Reason.Message
		if e.Reason.Step != "" {
			msg = fmt.Sprintf("step %s: %s", e.Reason.Step, msg)
		}
	}
	return fmt.Sprintf("build %s of template %s failed: %s", e.BuildID, e.TemplateID, msg)
}

// FollowBuild polls a started build until it is ready or failed, handing
// every log entry to OnLog, and returns the last status answer. It follows
// the SDK: poll with logsOffset advanced by the entries received; once the
// status is final, keep polling until an answer carries no entries (the
// server caps a page at 100, so the last entries may still be waiting).
// A full page is followed at once; otherwise it waits PollInterval. A
// failed build returns the final answer and a *BuildFailedError.
func (c *Client) FollowBuild(ctx context.Context, templateID, buildID string, opts FollowOptions) (*TemplateBuildInfo, error) {
	interval := opts.PollInterval
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	sleep := opts.Sleep
	if sleep == nil {
		sleep = sleepContext
	}
	var offset int32
	for {
		info, err := c.GetBuildStatus(ctx, templateID, buildID, BuildStatusQuery{LogsOffset: offset, Level: opts.Level})
		if err != nil {
			return nil, err
		}
		for _, entry := range info.LogEntries {
			if opts.OnLog != nil {
				opts.OnLog(entry)
			}
		}
		offset += int32(len(info.LogEntries))
		switch info.Status {
		case BuildWaiting, BuildBuilding:
		case BuildReady, BuildError:
			if len(info.LogEntries) == 0 {
				if info.Status == BuildError {
					return info, &BuildFailedError{TemplateID: templateID, BuildID: buildID, Reason: info.Reason}
				}
				return info, nil
			}
		default:
			return info, fmt.Errorf("build %s of template %s has the unknown status %q", buildID, templateID, info.Status)
		}
		if len(info.LogEntries) >= maxLogPage {
			continue
		}
		if err := sleep(ctx, interval); err != nil {
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
