package localserver

import (
	"encoding/json"
	"math"
	"net/http"
	"slices"
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

// handleSandboxMetrics serves GET /sandboxes/{sandboxID}/metrics: one
// sample taken now, when now is within start..end (Unix seconds, both
// optional), else none. The server keeps no history.
func (s *Server) handleSandboxMetrics(w http.ResponseWriter, r *http.Request) error {
	id, err := sandboxID(r)
	if err != nil {
		return err
	}
	start, err := queryInt(r, "start", 0)
	if err != nil {
		return err
	}
	end, err := queryInt(r, "end", math.MaxInt64)
	if err != nil {
		return err
	}
	if start > end {
		return failure.New(failure.Invalid, "start %d is after end %d", start, end)
	}
	if _, err := s.store.Sandbox(id); err != nil {
		return err
	}
	m, err := s.engine.SandboxMetrics(r.Context(), id)
	if err != nil {
		return failure.OwnFailure(err)
	}
	out := []e2b.SandboxMetric{}
	at := m.Time.Unix()
	if start <= at && at <= end {
		out = append(out, metricOf(m))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// handleSandboxesMetrics serves GET /sandboxes/metrics?sandbox_ids=a,b: the
// latest sample of each live sandbox named.
func (s *Server) handleSandboxesMetrics(w http.ResponseWriter, r *http.Request) error {
	var ids []string
	for _, raw := range r.URL.Query()["sandbox_ids"] {
		ids = append(ids, strings.Split(raw, ",")...)
	}
	ids = slices.DeleteFunc(ids, func(id string) bool { return id == "" })
	if len(ids) == 0 || len(ids) > 100 {
		return failure.New(failure.Invalid, "sandbox_ids must name from 1 to 100 sandboxes, not %d", len(ids))
	}
	out := map[string]e2b.SandboxMetric{}
	for _, id := range ids {
		if _, err := s.store.Sandbox(id); err != nil {
			continue // as on E2B, sandboxes without metrics are left out
		}
		m, err := s.engine.SandboxMetrics(r.Context(), id)
		if err != nil {
			s.log.Warn("sample sandbox metrics", "sandbox", id, "err", err)
			continue
		}
		out[id] = metricOf(m)
	}
	writeJSON(w, http.StatusOK, map[string]any{"sandboxes": out})
	return nil
}

func metricOf(m engine.SandboxMetrics) e2b.SandboxMetric {
	at := m.Time.UTC().Truncate(time.Second)
	return e2b.SandboxMetric{
		Timestamp: at, TimestampUnix: at.Unix(), CPUCount: m.CPUCount, CPUUsedPct: float32(m.CPUUsedPct),
		MemUsed: m.MemUsed, MemTotal: m.MemTotal, MemCache: m.MemCache, DiskUsed: m.DiskUsed, DiskTotal: m.DiskTotal,
	}
}

// Sandbox logs: the lines the sandbox's container wrote, which are envd's
// own. E2B's are flat JSON objects; lines that are not become info entries
// of logger "envd".
const (
	defaultSandboxLogsLimit = 1000
	maxSandboxLogsLimit     = 1000
)

// storeSandboxLog takes into the store, within the log bound, the lines
// the sandbox's container wrote since the last one stored, and returns
// the sandbox's log ID. The store's log is what the endpoints page, so a
// page costs what it holds, not the log's length; a request reads from
// the engine only what is new.
func (s *Server) storeSandboxLog(r *http.Request) (string, error) {
	id, err := sandboxID(r)
	if err != nil {
		return "", err
	}
	if _, err := s.store.Sandbox(id); err != nil {
		return "", err
	}
	since, err := s.store.SandboxLogSince(id)
	if err != nil {
		return "", failure.OwnFailure(err)
	}
	logID := store.SandboxLogID(id)
	if !since.IsZero() {
		// Most requests find nothing new: the last line alone says so, and
		// Docker finds it from the end of its file, where reading from a
		// time scans the file from its start.
		newest, err := s.engine.SandboxLogs(r.Context(), id, time.Time{}, 1)
		if err != nil {
			return "", failure.OwnFailure(err)
		}
		if len(newest) == 0 || !newest[0].Time.After(since) {
			return logID, nil
		}
	}
	lines, err := s.engine.SandboxLogs(r.Context(), id, since, 0)
	if err != nil {
		return "", failure.OwnFailure(err)
	}
	entries := make([]store.LogEntry, len(lines))
	for i, l := range lines {
		e, _ := logEntry(l, e2b.LogInfo)
		entries[i] = store.LogEntry{Timestamp: l.Time.UTC(), Message: l.Text, Level: e.Level}
	}
	if err := s.store.AppendSandboxLogs(id, s.cfg.LogBound, entries); err != nil {
		return "", failure.OwnFailure(err)
	}
	return logID, nil
}

// sandboxLogEntry is a stored sandbox log line as E2B answers it, and its
// raw line; the marker of dropped lines keeps its level.
func sandboxLogEntry(e store.LogEntry) (e2b.SandboxLogEntry, string) {
	return logEntry(engine.LogLine{Time: e.Timestamp, Text: e.Message}, e.Level)
}

// handleSandboxLogs serves the deprecated GET /sandboxes/{sandboxID}/logs:
// the entries from start (Unix ms) on, oldest first, at most limit (1000).
func (s *Server) handleSandboxLogs(w http.ResponseWriter, r *http.Request) error {
	start, err := queryInt(r, "start", -1)
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit", defaultSandboxLogsLimit)
	if err != nil {
		return err
	}
	logID, err := s.storeSandboxLog(r)
	if err != nil {
		return err
	}
	page, err := s.store.LogPage(logID, store.LogQuery{Cursor: start, Limit: int(min(limit, math.MaxInt32))})
	if err != nil {
		return failure.OwnFailure(err)
	}
	out := e2b.SandboxLogs{Logs: []e2b.SandboxLog{}, LogEntries: []e2b.SandboxLogEntry{}}
	for _, stored := range page {
		e, line := sandboxLogEntry(stored)
		out.Logs = append(out.Logs, e2b.SandboxLog{Timestamp: e.Timestamp, Line: line})
		out.LogEntries = append(out.LogEntries, e)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// handleSandboxLogsV2 serves GET /v2/sandboxes/{sandboxID}/logs: a page
// by time as the build logs' (store.LogPage), but backward by default, as
// on E2B; level the least level; search a case-sensitive substring of the
// message; at most limit (1000).
func (s *Server) handleSandboxLogsV2(w http.ResponseWriter, r *http.Request) error {
	cursor, err := queryInt(r, "cursor", -1)
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit", defaultSandboxLogsLimit)
	if err != nil {
		return err
	}
	if limit > maxSandboxLogsLimit {
		return failure.New(failure.Invalid, "limit %d must be from 0 to %d", limit, maxSandboxLogsLimit)
	}
	direction, err := queryDirection(r, "backward")
	if err != nil {
		return err
	}
	level, err := queryLevel(r)
	if err != nil {
		return err
	}
	logID, err := s.storeSandboxLog(r)
	if err != nil {
		return err
	}
	q := store.LogQuery{Cursor: cursor, Backward: direction == "backward", Limit: int(limit), MinLevel: level}
	if search := r.URL.Query().Get("search"); search != "" {
		q.Match = func(e store.LogEntry) bool {
			se, _ := sandboxLogEntry(e)
			return strings.Contains(se.Message, search)
		}
	}
	page, err := s.store.LogPage(logID, q)
	if err != nil {
		return failure.OwnFailure(err)
	}
	out := make([]e2b.SandboxLogEntry, len(page))
	for i, stored := range page {
		out[i], _ = sandboxLogEntry(stored)
	}
	writeJSON(w, http.StatusOK, e2b.SandboxLogsV2Response{Logs: out})
	return nil
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
