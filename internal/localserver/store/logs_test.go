package store

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

var logEpoch = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// numbered returns entries from..to-1, each a millisecond after the last,
// every third a warn, messages their numbers.
func numbered(from, to int) []LogEntry {
	var out []LogEntry
	for i := from; i < to; i++ {
		level := "info"
		if i%3 == 0 {
			level = "warn"
		}
		out = append(out, LogEntry{Timestamp: logEpoch.Add(time.Duration(i) * time.Millisecond), Message: fmt.Sprint(i), Level: level, Step: "1"})
	}
	return out
}

func messages(entries []LogEntry) []string {
	out := []string{}
	for _, e := range entries {
		out = append(out, e.Message)
	}
	return out
}

func wantMessages(t *testing.T, what string, got []LogEntry, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if m := messages(got); !slices.Equal(m, want) {
		t.Errorf("%s = %q, want %q", what, m, want)
	}
}

func TestLogsPagingAndLevel(t *testing.T) {
	s := newStore(t)
	if err := s.Catalog.AppendLogs("b", LogBound{}, numbered(0, 10)); err != nil {
		t.Fatal(err)
	}
	page, _ := s.Catalog.Logs("b", 3, 4, "")
	wantMessages(t, "offset 3 limit 4", page, "3", "4", "5", "6")
	warn, _ := s.Catalog.Logs("b", 1, 10, "warn")
	wantMessages(t, "warn from 1", warn, "3", "6", "9")
	past, _ := s.Catalog.Logs("b", 10, 10, "")
	wantMessages(t, "offset past the end", past)
	none, _ := s.Catalog.Logs("missing", 0, 10, "")
	if none == nil || len(none) != 0 {
		t.Fatalf("missing build logs = %#v, want empty non-nil", none)
	}
}

// TestLogBoundKeepsHeadAndTail appends 100 entries in batches to a log
// bounded to 10: the first 5 and the last 5 stay, with a marker between
// them saying what went, and offsets count the kept entries.
func TestLogBoundKeepsHeadAndTail(t *testing.T) {
	s := newStore(t)
	bound := LogBound{MaxEntries: 10}
	all := numbered(0, 100)
	for batch := range slices.Chunk(all, 7) {
		if err := s.Catalog.AppendLogs("b", bound, batch); err != nil {
			t.Fatal(err)
		}
	}
	kept, err := s.Catalog.Logs("b", 0, -1, "")
	if err != nil {
		t.Fatal(err)
	}
	marker := "[90 log entries (175 bytes) dropped here: the log keeps its beginning and its end]"
	wantMessages(t, "kept", kept, "0", "1", "2", "3", "4", marker, "95", "96", "97", "98", "99")
	if m := kept[5]; m.Level != "warn" || m.Step != "1" || !m.Timestamp.Equal(all[5].Timestamp) {
		t.Errorf("marker = %+v, want warn at step 1 and the time of entry 5", m)
	}
	page, _ := s.Catalog.Logs("b", 4, 3, "")
	wantMessages(t, "offset 4 limit 3", page, "4", marker, "95")
	page, _ = s.Catalog.Logs("b", 9, 5, "")
	wantMessages(t, "offset 9", page, "98", "99")
	warn, _ := s.Catalog.Logs("b", 1, -1, "warn")
	wantMessages(t, "warn from 1", warn, "3", marker, "96", "99")
	errs, _ := s.Catalog.Logs("b", 0, -1, "error")
	wantMessages(t, "error", errs)

	n := 0
	err = s.db.View(func(tx *bolt.Tx) error {
		l, _, err := openLog(tx, "b", false)
		n = l.entries.Stats().KeyN
		return err
	})
	if err != nil || n != 11 {
		t.Errorf("stored entries = %d %v, want 11 (10 and the marker)", n, err)
	}
}

func TestLogBoundInBytes(t *testing.T) {
	s := newStore(t)
	bound := LogBound{MaxBytes: 40}
	var entries []LogEntry
	for i := range 20 {
		entries = append(entries, LogEntry{Timestamp: logEpoch, Message: fmt.Sprintf("line %04d", i), Level: "info"})
	}
	if err := s.Catalog.AppendLogs("b", bound, entries); err != nil {
		t.Fatal(err)
	}
	// 9 bytes a line: the head takes 2 (18 of 20 bytes), the tail 2.
	kept, _ := s.Catalog.Logs("b", 0, -1, "")
	wantMessages(t, "kept", kept, "line 0000", "line 0001",
		"[16 log entries (144 bytes) dropped here: the log keeps its beginning and its end]", "line 0018", "line 0019")
	// A line larger than the tail's share is dropped as it comes.
	if err := s.Catalog.AppendLogs("b", bound, []LogEntry{{Timestamp: logEpoch, Message: strings.Repeat("x", 30), Level: "info"}}); err != nil {
		t.Fatal(err)
	}
	kept, _ = s.Catalog.Logs("b", 0, -1, "")
	wantMessages(t, "after a long line", kept, "line 0000", "line 0001",
		"[19 log entries (192 bytes) dropped here: the log keeps its beginning and its end]")
}

func TestLogPageCursors(t *testing.T) {
	s := newStore(t)
	if err := s.Catalog.AppendLogs("b", LogBound{MaxEntries: 10}, numbered(0, 20)); err != nil {
		t.Fatal(err)
	}
	marker := "[10 log entries (15 bytes) dropped here: the log keeps its beginning and its end]"
	ms := func(i int) int64 { return logEpoch.Add(time.Duration(i) * time.Millisecond).UnixMilli() }
	page := func(q LogQuery) []LogEntry {
		t.Helper()
		out, err := s.Catalog.LogPage("b", q)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	wantMessages(t, "forward", page(LogQuery{Cursor: -1, Limit: 3}), "0", "1", "2")
	wantMessages(t, "forward from 3", page(LogQuery{Cursor: ms(3), Limit: 4}), "3", "4", marker, "15")
	wantMessages(t, "forward from a dropped entry's time", page(LogQuery{Cursor: ms(8), Limit: 2}), "15", "16")
	wantMessages(t, "backward", page(LogQuery{Cursor: -1, Backward: true, Limit: 3}), "19", "18", "17")
	wantMessages(t, "backward from 16", page(LogQuery{Cursor: ms(16), Backward: true, Limit: 4}), "16", "15", marker, "4")
	wantMessages(t, "backward from before the log", page(LogQuery{Cursor: ms(0) - 1, Backward: true, Limit: 4}))
	wantMessages(t, "backward from after the log", page(LogQuery{Cursor: ms(99), Backward: true, Limit: 1}), "19")
	wantMessages(t, "forward from after the log", page(LogQuery{Cursor: ms(99), Limit: 1}))
	wantMessages(t, "warn forward", page(LogQuery{Cursor: -1, Limit: 10, MinLevel: "warn"}), "0", "3", marker, "15", "18")
	wantMessages(t, "warn backward from 17", page(LogQuery{Cursor: ms(17), Backward: true, Limit: 2, MinLevel: "warn"}), "15", marker)
	wantMessages(t, "matching", page(LogQuery{Cursor: -1, Limit: 10, Match: func(e LogEntry) bool { return strings.HasSuffix(e.Message, "7") }}), "17")
	missing, err := s.Catalog.LogPage("missing", LogQuery{Cursor: -1, Limit: 1})
	if err != nil || missing == nil || len(missing) != 0 {
		t.Errorf("page of a missing log = %#v %v, want empty non-nil", missing, err)
	}
}

// TestLogTimeKeysFollowAppendOrder checks an entry stamped earlier than
// the one before it stays in append order for the time cursors.
func TestLogTimeKeysFollowAppendOrder(t *testing.T) {
	s := newStore(t)
	entries := []LogEntry{
		{Timestamp: logEpoch.Add(time.Second), Message: "a", Level: "info"},
		{Timestamp: logEpoch, Message: "b", Level: "info"},
		{Timestamp: logEpoch.Add(2 * time.Second), Message: "c", Level: "info"},
	}
	if err := s.Catalog.AppendLogs("b", LogBound{}, entries); err != nil {
		t.Fatal(err)
	}
	out, _ := s.Catalog.LogPage("b", LogQuery{Cursor: -1, Limit: 10})
	wantMessages(t, "forward", out, "a", "b", "c")
	if !out[1].Timestamp.Equal(logEpoch) {
		t.Errorf("entry b's timestamp = %v, want its own %v", out[1].Timestamp, logEpoch)
	}
}

// TestOldLayoutLogsMigrate writes a log as the earlier store did
// (sequence → JSON in the log's bucket, longer than any bound) and checks
// Open keeps every entry, pages it both ways and appends to it.
func TestOldLayoutLogsMigrate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openStore(t, path)
	err := s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.Bucket(bucketLogs).CreateBucket([]byte("old"))
		if err != nil {
			return err
		}
		for i, e := range numbered(0, 50) {
			if err := putJSON(b, string(u64(uint64(i)+1)), e); err != nil {
				return err
			}
		}
		_, err = tx.Bucket(bucketLogs).CreateBucket([]byte("empty"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	s = openStore(t, path)
	defer s.Close()
	all, err := s.Catalog.Logs("old", 0, -1, "")
	if err != nil || len(all) != 50 || all[49].Message != "49" {
		t.Fatalf("migrated log = %d entries %v, want 50", len(all), err)
	}
	page, _ := s.Catalog.Logs("old", 47, 10, "")
	wantMessages(t, "offset 47", page, "47", "48", "49")
	back, _ := s.Catalog.LogPage("old", LogQuery{Cursor: -1, Backward: true, Limit: 2})
	wantMessages(t, "backward", back, "49", "48")
	if err := s.Catalog.AppendLogs("old", LogBound{MaxEntries: 10}, numbered(50, 60)); err != nil {
		t.Fatal(err)
	}
	page, _ = s.Catalog.Logs("old", 48, -1, "")
	wantMessages(t, "after an append", page, "48", "49", "[5 log entries (10 bytes) dropped here: the log keeps its beginning and its end]", "55", "56", "57", "58", "59")
	empty, err := s.Catalog.Logs("empty", 0, -1, "")
	if err != nil || len(empty) != 0 {
		t.Errorf("migrated empty log = %+v %v", empty, err)
	}
	// A second open finds nothing left to migrate.
	s.Close()
	s = openStore(t, path)
	if again, _ := s.Catalog.Logs("old", 0, -1, ""); len(again) != 56 {
		t.Errorf("after reopening: %d entries, want 56", len(again))
	}
}

func BenchmarkAppendLogBatch(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "state.db"), "local", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	batch := make([]LogEntry, 100)
	for i := range batch {
		batch[i] = LogEntry{Message: "a line of build output", Level: "info", Step: "1"}
	}
	bound := LogBound{MaxEntries: DefaultMaxLogEntries, MaxBytes: DefaultMaxLogBytes}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Catalog.AppendLogs("build", bound, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/entry")
}

// BenchmarkLogPage reads one-entry pages of a full log (the default bound)
// at its start, its end and through a warn filter that matches only the
// marker: the last is the cost of a sparse filter.
func BenchmarkLogPage(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "state.db"), "local", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	bound := LogBound{MaxEntries: DefaultMaxLogEntries, MaxBytes: DefaultMaxLogBytes}
	for i := range 30 {
		batch := make([]LogEntry, 1000)
		for j := range batch {
			batch[j] = LogEntry{Timestamp: logEpoch.Add(time.Duration(i*1000+j) * time.Millisecond), Message: "x", Level: "info", Step: "1"}
		}
		if err := s.Catalog.AppendLogs("build", bound, batch); err != nil {
			b.Fatal(err)
		}
	}
	for _, q := range []struct {
		name string
		q    LogQuery
	}{
		{"first", LogQuery{Cursor: -1, Limit: 1}},
		{"last", LogQuery{Cursor: -1, Backward: true, Limit: 1}},
		{"sparse-warn", LogQuery{Cursor: -1, Limit: 2, MinLevel: "warn"}},
	} {
		b.Run(q.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := s.Catalog.LogPage("build", q.q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A sandbox's log takes only lines later than its last, and none for a
// sandbox without a record, so no log outlives its sandbox.
func TestSandboxLogsAppendOnceAndOnlyForRecords(t *testing.T) {
	s := newStore(t)
	r := register(t, s, "app")
	if err := s.Sandboxes.CreateSandbox(Sandbox{ID: "i1", TemplateID: r.Template.ID}); err != nil {
		t.Fatal(err)
	}
	if err := s.Sandboxes.AppendSandboxLogs("i1", LogBound{}, numbered(0, 3)); err != nil {
		t.Fatal(err)
	}
	since, err := s.Sandboxes.SandboxLogSince("i1")
	if err != nil || !since.Equal(logEpoch.Add(2*time.Millisecond)) {
		t.Errorf("since = %v %v, want the last line's time", since, err)
	}
	if err := s.Sandboxes.AppendSandboxLogs("i1", LogBound{}, numbered(2, 5)); err != nil {
		t.Fatal(err)
	}
	page, _ := s.Sandboxes.SandboxLogPage("i1", LogQuery{Cursor: -1, Limit: 10})
	wantMessages(t, "read again from the last line", page, "0", "1", "2", "3", "4")
	if err := s.Sandboxes.AppendSandboxLogs("gone", LogBound{}, numbered(0, 3)); err != nil {
		t.Fatal(err)
	}
	page, _ = s.Sandboxes.SandboxLogPage("gone", LogQuery{Cursor: -1, Limit: 10})
	wantMessages(t, "a sandbox without a record", page)
}

// A failed build's reason takes the failed step's warn and error entries
// among those kept, the marker with them when the drop began in that step.
func TestFailedBuildReasonTakesKeptEntries(t *testing.T) {
	s := newStore(t)
	r := register(t, s, "app")
	if _, _, err := s.Catalog.StartBuild(r.Template.ID, r.Build.ID, BuildRequest{FromImage: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Catalog.AppendLogs(r.Build.ID, LogBound{MaxEntries: 6}, numbered(0, 20)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Catalog.FinishBuild(r.Template.ID, r.Build.ID, nil, &BuildReason{Message: "exit 1", Step: "1"}); err != nil {
		t.Fatal(err)
	}
	b, err := s.Catalog.Build(r.Template.ID, r.Build.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantMessages(t, "reason entries", b.Reason.LogEntries, "0",
		"[14 log entries (21 bytes) dropped here: the log keeps its beginning and its end]", "18")
}
