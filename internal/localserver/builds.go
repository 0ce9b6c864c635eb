package localserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/failure"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/steps"
)

// runningBuild is a build whose Engine.Build call is in flight.
type runningBuild struct {
	templateID string
	cancel     context.CancelCauseFunc
}

// handleStartBuild serves POST /v2/templates/{templateID}/builds/{buildID}.
func (s *Server) handleStartBuild(w http.ResponseWriter, r *http.Request) error {
	templateID, buildID := r.PathValue("templateID"), r.PathValue("buildID")
	if err := e2b.ValidateBuildID(buildID); err != nil {
		return failure.New(failure.Invalid, "%v", err)
	}
	if _, err := s.store.Build(templateID, buildID); err != nil {
		return failure.MissingAs(err, failure.NotFound, "build '%s' of template '%s' not found", buildID, templateID)
	}
	var req e2b.TemplateBuildStartV2
	if err := decodeBody(w, r, &req, false); err != nil {
		return err
	}
	// The build outlives the request: it runs under the server's context.
	if err := s.startBuild(templateID, buildID, req); err != nil {
		return err
	}
	w.WriteHeader(http.StatusAccepted)
	return nil
}

// startBuild starts a registered build of templateID: it checks req, marks
// the build building (cancelling the builds it supersedes) and runs it on
// the engine in the background. An unknown step type fails the build (as
// on E2B), not the request.
func (s *Server) startBuild(templateID, buildID string, req e2b.TemplateBuildStartV2) error {
	spec, unknown, err := s.buildSpec(templateID, buildID, &req)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return failure.New(failure.Unavailable, "the server is shutting down")
	}
	b, superseded, err := s.store.StartBuild(templateID, buildID, buildRequestRecord(req))
	if err != nil {
		return err
	}
	for _, id := range superseded {
		if rb, ok := s.running[id]; ok {
			rb.cancel(errors.New(store.ReasonSuperseded))
		}
	}
	spec.CPUCount, spec.MemoryMB = b.CPUCount, b.MemoryMB
	ctx, cancel := context.WithCancelCause(s.ctx)
	s.running[buildID] = &runningBuild{templateID: templateID, cancel: cancel}
	tooLong := fmt.Errorf("build status polling timed out. Maximum build time is %s.", s.cfg.MaxBuildTime) //nolint:staticcheck // E2B's reason, word for word
	limited, stopLimit := context.WithTimeoutCause(ctx, s.cfg.MaxBuildTime, tooLong)
	s.tasks.Go(func() {
		defer func() {
			s.mu.Lock()
			delete(s.running, buildID)
			s.mu.Unlock()
			stopLimit()
			cancel(nil)
		}()
		s.runBuild(limited, spec, unknown)
	})
	return nil
}

// buildSpec checks a start request and turns it into what the engine runs:
// the base image or build, the steps with their types normalised and the
// archives of their COPY steps. unknown is the failure of the first step
// of an unknown type, nil when there is none.
func (s *Server) buildSpec(templateID, buildID string, req *e2b.TemplateBuildStartV2) (spec engine.BuildSpec, unknown *store.BuildReason, err error) {
	switch {
	case req.FromImage != "" && req.FromTemplate != "":
		return spec, nil, failure.New(failure.Invalid, "cannot specify both fromImage and fromTemplate")
	case req.FromImage == "" && req.FromTemplate == "":
		return spec, nil, failure.New(failure.Invalid, "must specify either fromImage or fromTemplate")
	}
	spec = engine.BuildSpec{
		TemplateID: templateID, BuildID: buildID,
		BaseImage: req.FromImage, PullBase: req.FromImage != "", RegistryAuth: req.FromImageRegistry,
		StartCmd: req.StartCmd, ReadyCmd: req.ReadyCmd, Force: req.Force,
		Archives: map[string]string{},
	}
	if req.FromTemplate != "" {
		_, base, err := s.store.Resolve(req.FromTemplate)
		if err != nil {
			return spec, nil, failure.New(failure.Invalid, "fromTemplate '%s': %v", req.FromTemplate, err)
		}
		if base.Result == nil {
			return spec, nil, failure.New(failure.Invalid, "fromTemplate '%s': its build %s has no result", req.FromTemplate, base.ID)
		}
		spec.BaseImage, spec.FromBuild = base.Result.Image, (*engine.BuildResult)(base.Result)
	}
	for i := range req.Steps {
		step := &req.Steps[i]
		// The server takes types in any case; the engine gets them normalised.
		typ, known := steps.Normalize(strings.ToUpper(step.Type))
		step.Type = typ
		if !known && unknown == nil {
			unknown = &store.BuildReason{Message: fmt.Sprintf("command type %s is not implemented", step.Type), Step: strconv.Itoa(i + 1)}
		}
		if step.Type != steps.Copy {
			continue
		}
		if step.FilesHash == "" {
			return spec, nil, failure.New(failure.Invalid, "step %d (COPY) has no filesHash", i+1)
		}
		archive, ok, err := s.store.ArchivePath(step.FilesHash)
		if err != nil {
			return spec, nil, failure.OwnFailure(err)
		}
		if !ok {
			return spec, nil, failure.New(failure.Invalid, "step %d (COPY): files with hash %s were not uploaded", i+1, step.FilesHash)
		}
		spec.Archives[step.FilesHash] = archive
	}
	spec.Steps = req.Steps
	return spec, unknown, nil
}

// runBuild runs one build on the engine, storing its log as it arrives,
// and records how it ended.
func (s *Server) runBuild(ctx context.Context, spec engine.BuildSpec, failure *store.BuildReason) {
	logs := s.newLogWriter(spec.BuildID)
	spec.Log = logs.add
	var result *engine.BuildResult
	if failure == nil {
		var err error
		result, err = s.engine.Build(ctx, spec)
		if err != nil {
			failure = &store.BuildReason{Message: err.Error()}
			var stepErr *engine.StepError
			if errors.As(err, &stepErr) {
				failure.Message, failure.Step = stepErr.Err.Error(), stepErr.Step
			}
			if cause := context.Cause(ctx); cause != nil {
				failure.Message = cause.Error()
			}
		}
	}
	if err := logs.close(); err != nil && failure == nil {
		// A build that reports ready with its log lost would hide
		// whatever the log said; the image it committed goes with it.
		failure = &store.BuildReason{Message: fmt.Sprintf("the build log could not be stored: %v", err), Step: "finalize"}
		if rmErr := s.engine.RemoveImage(context.WithoutCancel(ctx), result.Image); rmErr != nil {
			s.log.Warn("remove the image of a build whose log was lost", "build", spec.BuildID, "err", rmErr)
		}
	}
	if failure != nil {
		s.log.Info("build failed", "template", spec.TemplateID, "build", spec.BuildID, "step", failure.Step, "reason", failure.Message)
		result = nil
	} else {
		s.log.Info("build ready", "template", spec.TemplateID, "build", spec.BuildID, "image", result.Image)
	}
	if _, err := s.store.FinishBuild(spec.TemplateID, spec.BuildID, (*store.BuildResult)(result), failure); err != nil {
		s.log.Error("record build result", "build", spec.BuildID, "err", err)
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

func (s *Server) newLogWriter(buildID string) *logWriter {
	lw := &logWriter{entries: make(chan store.LogEntry, 1024), done: make(chan struct{}), now: s.cfg.Now}
	appendLogs := s.cfg.appendLogs
	if appendLogs == nil {
		appendLogs = func(buildID string, entries []store.LogEntry) error {
			return s.store.AppendLogs(buildID, s.cfg.LogBound, entries)
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

// buildLogsQuery reads what both build log endpoints take: where to start
// (the parameter named position, def when absent), limit (default 100)
// and the least level.
func buildLogsQuery(r *http.Request, position string, def int64) (start, limit int64, level string, err error) {
	if start, err = queryInt(r, position, def); err != nil {
		return 0, 0, "", err
	}
	if limit, err = queryInt(r, "limit", 100); err != nil {
		return 0, 0, "", err
	}
	if level, err = queryLevel(r); err != nil {
		return 0, 0, "", err
	}
	return start, limit, level, nil
}

func (s *Server) handleBuildStatus(w http.ResponseWriter, r *http.Request) error {
	templateID, buildID := r.PathValue("templateID"), r.PathValue("buildID")
	offset, limit, level, err := buildLogsQuery(r, "logsOffset", 0)
	if err != nil {
		return err
	}
	b, err := s.store.Build(templateID, buildID)
	if err != nil {
		return failure.MissingAs(err, failure.Invalid, "Build '%s' not found", buildID)
	}
	info := e2b.TemplateBuildInfo{
		TemplateID: templateID, BuildID: buildID, Status: b.Status,
		Logs: []string{}, LogEntries: []e2b.BuildLogEntry{}, Reason: wireReason(b.Reason),
	}
	if b.Status != e2b.BuildWaiting {
		entries, err := s.store.Logs(buildID, int(offset), int(min(limit, 100)), level)
		if err != nil {
			return failure.OwnFailure(err)
		}
		info.LogEntries = wireLogEntries(entries)
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}

// handleBuildLogs serves the /logs variant: a page of the kept entries by
// time (store.LogPage), forward by default.
func (s *Server) handleBuildLogs(w http.ResponseWriter, r *http.Request) error {
	templateID, buildID := r.PathValue("templateID"), r.PathValue("buildID")
	cursor, limit, level, err := buildLogsQuery(r, "cursor", -1)
	if err != nil {
		return err
	}
	direction, err := queryDirection(r, "forward")
	if err != nil {
		return err
	}
	if source := r.URL.Query().Get("source"); source != "" && source != "temporary" && source != "persistent" {
		return failure.New(failure.Invalid, "source %q must be temporary or persistent", source)
	}
	if _, err := s.store.Build(templateID, buildID); err != nil {
		return err
	}
	out, err := s.store.LogPage(buildID, store.LogQuery{Cursor: cursor, Backward: direction == "backward", Limit: int(min(limit, 100)), MinLevel: level})
	if err != nil {
		return failure.OwnFailure(err)
	}
	writeJSON(w, http.StatusOK, e2b.TemplateBuildLogsResponse{Logs: wireLogEntries(out)})
	return nil
}
