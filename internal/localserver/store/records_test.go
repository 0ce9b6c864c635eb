package store

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// oldBuildRecord and oldLogRecord are a build and a log line as the store
// wrote them while it kept E2B's wire types (e2b.TemplateBuildStartV2,
// BuildStatusReason, BuildLogEntry) in its records.
const (
	oldBuildRecord = `{"id":"b1","templateID":"t1","status":"error","reason":{"message":"command exited with code 1","step":"2","logEntries":[{"timestamp":"2026-11-30T12:00:00Z","message":"boom","level":"error","step":"2"}]},"tags":["default"],"cpuCount":2,"memoryMB":512,"stepCount":2,"createdAt":"2026-11-30T12:00:00Z","updatedAt":"2026-11-30T12:00:00Z","finishedAt":"2026-11-30T12:00:00Z","request":{"fromTemplate":"base","force":true,"steps":[{"type":"COPY","args":["src","/app","user","0644"],"filesHash":"abc","force":true},{"type":"RUN","args":["make"],"force":false}],"startCmd":"serve","readyCmd":"true"},"result":{"Image":"img","User":"user","Workdir":"/app","Env":{"K":"v"},"StartCmd":"serve","ReadyCmd":"true","EnvdVersion":"0.2.0"}}`
	oldLogRecord   = `{"timestamp":"2026-11-30T12:00:00Z","message":"hello","level":"info","step":"1"}`
)

// TestRecordsReadWhatEarlierStoresWrote checks a data directory written
// while the store kept wire types reads into the store's own records, field
// for field, and that the records encode to the same bytes again.
func TestRecordsReadWhatEarlierStoresWrote(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openStore(t, path)
	err := s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketBuilds).Put(buildKey("t1", "b1"), []byte(oldBuildRecord)); err != nil {
			return err
		}
		logs, err := tx.Bucket(bucketLogs).CreateBucket([]byte("b1"))
		if err != nil {
			return err
		}
		return logs.Put(u64(1), []byte(oldLogRecord))
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Open migrates the log to the current layout, every entry kept.
	s = openStore(t, path)
	defer s.Close()

	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	want := Build{
		ID: "b1", TemplateID: "t1", Status: "error",
		Reason: &BuildReason{Message: "command exited with code 1", Step: "2", LogEntries: []LogEntry{{Timestamp: at, Message: "boom", Level: "error", Step: "2"}}},
		Tags:   []string{"default"}, CPUCount: 2, MemoryMB: 512, StepCount: 2, CreatedAt: at, UpdatedAt: at, FinishedAt: &at,
		Request: &BuildRequest{FromTemplate: "base", Force: true, StartCmd: "serve", ReadyCmd: "true", Steps: []BuildStep{
			{Type: "COPY", Args: []string{"src", "/app", "user", "0644"}, FilesHash: "abc", Force: true},
			{Type: "RUN", Args: []string{"make"}},
		}},
		Result: &BuildResult{Image: "img", User: "user", Workdir: "/app", Env: map[string]string{"K": "v"}, StartCmd: "serve", ReadyCmd: "true", EnvdVersion: "0.2.0"},
	}
	got, err := s.Catalog.Build("t1", "b1")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("build read as\n%+v\nwant\n%+v", got, want)
	}
	if raw, _ := json.Marshal(got); string(raw) != oldBuildRecord {
		t.Errorf("build encodes as\n%s\nwas\n%s", raw, oldBuildRecord)
	}

	logs, err := s.Catalog.Logs("b1", 0, -1, "")
	if err != nil {
		t.Fatal(err)
	}
	wantLog := LogEntry{Timestamp: at, Message: "hello", Level: "info", Step: "1"}
	if len(logs) != 1 || logs[0] != wantLog {
		t.Errorf("logs read as %+v, want [%+v]", logs, wantLog)
	}
	if raw, _ := json.Marshal(logs[0]); string(raw) != oldLogRecord {
		t.Errorf("log line encodes as %s, was %s", raw, oldLogRecord)
	}
}
