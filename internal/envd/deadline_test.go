package envd

import (
	"testing"
	"time"
)

func TestDeadlineRoundTrip(t *testing.T) {
	end := time.UnixMilli(1_764_000_000_123)
	raw := FormatDeadline(end)
	if string(raw) != "1764000000123\n" {
		t.Fatalf("FormatDeadline = %q", raw)
	}
	got, ok := ParseDeadline(raw)
	if !ok || !got.Equal(end) {
		t.Fatalf("ParseDeadline(%q) = %v, %v; want %v", raw, got, ok, end)
	}
	for _, bad := range []string{"", "soon\n", "12.5"} {
		if _, ok := ParseDeadline([]byte(bad)); ok {
			t.Errorf("ParseDeadline(%q) holds an end", bad)
		}
	}
}
