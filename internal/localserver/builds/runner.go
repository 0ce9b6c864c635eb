package builds

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/failure"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

// runBuild runs one build on the engine, storing its log as it arrives,
// and records how it ended.
func (s *Manager) runBuild(ctx context.Context, spec engine.BuildSpec, reason *store.BuildReason) {
	logs := s.newLogWriter(spec.BuildID)
	spec.Log = logs.add
	var result *engine.BuildResult
	if reason == nil {
		var err error
		result, err = s.engine.Build(ctx, spec)
		if err != nil {
			reason = &store.BuildReason{Message: err.Error()}
			var stepErr *engine.StepError
			if errors.As(err, &stepErr) {
				reason.Message, reason.Step = stepErr.Err.Error(), stepErr.Step
			}
			if cause := context.Cause(ctx); cause != nil {
				reason.Message = cause.Error()
			}
		}
	}
	if err := logs.close(); err != nil && reason == nil {
		// A build that reports ready with its log lost would hide
		// whatever the log said; the image it committed goes with it.
		reason = &store.BuildReason{Message: fmt.Sprintf("the build log could not be stored: %v", err), Step: "finalize"}
		if rmErr := s.engine.RemoveImage(context.WithoutCancel(ctx), result.Image); rmErr != nil {
			s.log.Warn("remove the image of a build whose log was lost", "build", spec.BuildID, "err", rmErr)
		}
	}
	if reason != nil {
		s.log.Info("build failed", "template", spec.TemplateID, "build", spec.BuildID, "step", reason.Step, "reason", reason.Message)
		result = nil
	} else {
		s.log.Info("build ready", "template", spec.TemplateID, "build", spec.BuildID, "image", result.Image)
	}
	recorded, err := s.catalog.FinishBuild(spec.TemplateID, spec.BuildID, (*store.BuildResult)(result), reason)
	if err != nil {
		s.log.Error("record build result", "build", spec.BuildID, "err", err)
	}
	if result == nil {
		return
	}
	// A build whose record ended meanwhile (superseded) or whose template
	// was deleted made an image no record owns.
	if _, err := s.catalog.TemplateByID(spec.TemplateID); !recorded || failure.KindOf(err) == failure.NotFound {
		if err := s.engine.RemoveImage(context.WithoutCancel(ctx), result.Image); err != nil {
			s.log.Warn("remove the image of a build that ended after its record or template", "build", spec.BuildID, "err", err)
		}
	}
}

// logWriter stores a build's log entries from the engine's goroutine in
// batches, so that a chatty step costs one transaction per batch, not per line.
type logWriter struct {
	entries chan store.LogEntry
	done    chan struct{}
	now     func() time.Time

	mu     sync.Mutex
	closed bool // entries sent after Build returned are dropped, not a panic
	// err is the first failure to store entries, reported by close; under
	// errMu, not mu, which add holds while it may block on a full channel.
	errMu sync.Mutex
	err   error
}

func (s *Manager) newLogWriter(buildID string) *logWriter {
	lw := &logWriter{entries: make(chan store.LogEntry, 1024), done: make(chan struct{}), now: s.cfg.Now}
	appendLogs := s.cfg.AppendLogs
	if appendLogs == nil {
		appendLogs = func(buildID string, entries []store.LogEntry) error {
			return s.catalog.AppendLogs(buildID, s.cfg.LogBound, entries)
		}
	}
	go func() {
		defer close(lw.done)
		for e := range lw.entries {
			batch := []store.LogEntry{e}
		drain:
			for len(batch) < 1000 {
				select {
				case more, ok := <-lw.entries:
					if !ok {
						break drain
					}
					batch = append(batch, more)
				default:
					break drain
				}
			}
			if err := appendLogs(buildID, batch); err != nil {
				s.log.Error("store build log", "build", buildID, "err", err)
				lw.errMu.Lock()
				if lw.err == nil {
					lw.err = err
				}
				lw.errMu.Unlock()
			}
		}
	}()
	return lw
}

func (lw *logWriter) add(line e2b.BuildLogEntry) {
	e := store.LogEntry{Timestamp: line.Timestamp, Message: line.Message, Level: line.Level, Step: line.Step}
	if e.Timestamp.IsZero() {
		e.Timestamp = lw.now()
	}
	if e.Level == "" {
		e.Level = e2b.LogInfo
	}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if !lw.closed {
		lw.entries <- e
	}
}

// close waits until every entry is stored and reports the first failure
// to store some.
func (lw *logWriter) close() error {
	lw.mu.Lock()
	lw.closed = true
	close(lw.entries)
	lw.mu.Unlock()
	<-lw.done
	lw.errMu.Lock()
	defer lw.errMu.Unlock()
	return lw.err
}
