package sandboxes

import (
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/failure"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

// Sandbox metrics and logs (design/e2b-api.md "Metrics and logs", design/local-server.md
// Metrics and logs).

// Observer samples the sandboxes' metrics and keeps and pages their logs.
// It changes no sandbox, so it is a type apart from Manager.
type Observer struct {
	cfg     Config
	records Records
	engine  Engine
	log     *slog.Logger
}

// NewObserver makes the Observer.
func NewObserver(cfg Config, records Records, eng Engine) *Observer {
	return &Observer{cfg: cfg, records: records, engine: eng, log: cfg.Logger}
}

// Metrics is one sample of the sandbox taken now, when now is within
// start..end (Unix seconds), else none. The server keeps no history.
func (s *Observer) Metrics(ctx context.Context, id string, start, end int64) ([]e2b.SandboxMetric, error) {
	if start > end {
		return nil, failure.New(failure.Invalid, "start %d is after end %d", start, end)
	}
	if _, err := s.records.Sandbox(id); err != nil {
		return nil, err
	}
	m, err := s.engine.SandboxMetrics(ctx, id)
	if err != nil {
		return nil, failure.OwnFailure(err)
	}
	out := []e2b.SandboxMetric{}
	if at := m.Time.Unix(); start <= at && at <= end {
		out = append(out, metricOf(m))
	}
	return out, nil
}

// LatestMetrics is the latest sample of each live sandbox of ids (from 1
// to 100); as on E2B, sandboxes without metrics are left out.
func (s *Observer) LatestMetrics(ctx context.Context, ids []string) (map[string]e2b.SandboxMetric, error) {
	if len(ids) == 0 || len(ids) > 100 {
		return nil, failure.New(failure.Invalid, "sandbox_ids must name from 1 to 100 sandboxes, not %d", len(ids))
	}
	out := map[string]e2b.SandboxMetric{}
	for _, id := range ids {
		if _, err := s.records.Sandbox(id); err != nil {
			continue
		}
		m, err := s.engine.SandboxMetrics(ctx, id)
		if err != nil {
			s.log.Warn("sample sandbox metrics", "sandbox", id, "err", err)
			continue
		}
		out[id] = metricOf(m)
	}
	return out, nil
}

func metricOf(m engine.SandboxMetrics) e2b.SandboxMetric {
	at := m.Time.UTC().Truncate(time.Second)
	return e2b.SandboxMetric{
		Timestamp: at, TimestampUnix: at.Unix(), CPUCount: m.CPUCount, CPUUsedPct: float32(m.CPUUsedPct),
		MemUsed: m.MemUsed, MemTotal: m.MemTotal, MemCache: m.MemCache, DiskUsed: m.DiskUsed, DiskTotal: m.DiskTotal,
	}
}

// maxLogsLimit is the most entries a sandbox log answer carries.
const maxLogsLimit = 1000

// storeSandboxLog takes into the store, within the log bound, the lines
// the sandbox's container wrote since the last one stored. The store's
// log is what the endpoints page, so a page costs what it holds, not the
// log's length; a request reads from the engine only what is new.
func (s *Observer) storeSandboxLog(ctx context.Context, id string) error {
	if _, err := s.records.Sandbox(id); err != nil {
		return err
	}
	since, err := s.records.SandboxLogSince(id)
	if err != nil {
		return failure.OwnFailure(err)
	}
	if !since.IsZero() {
		// Most requests find nothing new: the last line alone says so, and
		// Docker finds it from the end of its file, where reading from a
		// time scans the file from its start.
		newest, err := s.engine.SandboxLogs(ctx, id, time.Time{}, 1)
		if err != nil {
			return failure.OwnFailure(err)
		}
		if len(newest) == 0 || !newest[0].Time.After(since) {
			return nil
		}
	}
	lines, err := s.engine.SandboxLogs(ctx, id, since, 0)
	if err != nil {
		return failure.OwnFailure(err)
	}
	entries := make([]store.LogEntry, len(lines))
	for i, l := range lines {
		e, _ := logEntry(l, e2b.LogInfo)
		entries[i] = store.LogEntry{Timestamp: l.Time.UTC(), Message: l.Text, Level: e.Level}
	}
	if err := s.records.AppendSandboxLogs(id, s.cfg.LogBound, entries); err != nil {
		return failure.OwnFailure(err)
	}
	return nil
}

// sandboxLogEntry is a stored sandbox log line as E2B answers it, and its
// raw line; the marker of dropped lines keeps its level.
func sandboxLogEntry(e store.LogEntry) (e2b.SandboxLogEntry, string) {
	return logEntry(engine.LogLine{Time: e.Timestamp, Text: e.Message}, e.Level)
}

// Logs is the sandbox's log from start (Unix ms) on, oldest first, at most
// limit entries: the deprecated endpoint's answer, which has no bound of
// its own.
func (s *Observer) Logs(ctx context.Context, id string, start, limit int64) (e2b.SandboxLogs, error) {
	if err := s.storeSandboxLog(ctx, id); err != nil {
		return e2b.SandboxLogs{}, err
	}
	page, err := s.records.SandboxLogPage(id, store.LogQuery{Cursor: start, Limit: int(min(limit, math.MaxInt32))})
	if err != nil {
		return e2b.SandboxLogs{}, failure.OwnFailure(err)
	}
	out := e2b.SandboxLogs{Logs: []e2b.SandboxLog{}, LogEntries: []e2b.SandboxLogEntry{}}
	for _, stored := range page {
		e, line := sandboxLogEntry(stored)
		out.Logs = append(out.Logs, e2b.SandboxLog{Timestamp: e.Timestamp, Line: line})
		out.LogEntries = append(out.LogEntries, e)
	}
	return out, nil
}

// LogPage is a page of the sandbox's log by time as q says (at most 1000
// entries), of the entries whose message contains search (any when empty).
func (s *Observer) LogPage(ctx context.Context, id string, q store.LogQuery, search string) ([]e2b.SandboxLogEntry, error) {
	if q.Limit > maxLogsLimit {
		return nil, failure.New(failure.Invalid, "limit %d must be from 0 to %d", q.Limit, maxLogsLimit)
	}
	if err := s.storeSandboxLog(ctx, id); err != nil {
		return nil, err
	}
	if search != "" {
		q.Match = func(e store.LogEntry) bool {
			se, _ := sandboxLogEntry(e)
			return strings.Contains(se.Message, search)
		}
	}
	page, err := s.records.SandboxLogPage(id, q)
	if err != nil {
		return nil, failure.OwnFailure(err)
	}
	out := make([]e2b.SandboxLogEntry, len(page))
	for i, stored := range page {
		out[i], _ = sandboxLogEntry(stored)
	}
	return out, nil
}

// logEntry turns a container log line into E2B's structured entry and its
// raw JSON line: a flat JSON object's "level" and "message" (or "msg")
// become the entry's, its other string, number and boolean members its
// fields, as E2B's log pipeline does; any other line is a message of
// logger "envd" at level (info but for the store's marker).
func logEntry(l engine.LogLine, level string) (e2b.SandboxLogEntry, string) {
	e := e2b.SandboxLogEntry{Timestamp: l.Time.UTC(), Level: level, Fields: map[string]string{}}
	var obj map[string]any
	if json.Unmarshal([]byte(l.Text), &obj) != nil || obj == nil {
		e.Message, e.Fields["logger"] = l.Text, "envd"
		raw, _ := json.Marshal(map[string]string{"level": e.Level, "logger": "envd", "message": l.Text})
		return e, string(raw)
	}
	for k, v := range obj {
		switch t := v.(type) {
		case string:
			e.Fields[k] = t
		case float64:
			e.Fields[k] = strconv.FormatFloat(t, 'G', -1, 64)
		case bool:
			e.Fields[k] = strconv.FormatBool(t)
		}
	}
	switch level := strings.ToLower(e.Fields["level"]); level {
	case e2b.LogDebug, e2b.LogInfo, e2b.LogWarn, e2b.LogError:
		e.Level = level
	case "warning":
		e.Level = e2b.LogWarn
	}
	e.Message = e.Fields["message"]
	if e.Message == "" {
		e.Message = e.Fields["msg"]
	}
	for _, k := range []string{"level", "message", "msg"} {
		delete(e.Fields, k)
	}
	return e, l.Text
}
