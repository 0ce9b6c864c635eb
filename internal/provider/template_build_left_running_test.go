package provider

import "testing"

// TestLeftRunningBuilds hands a build from the destroy of a tainted object to one create
// of the same template and spec hash; a state without spec hash hands nothing.
func TestLeftRunningBuilds(t *testing.T) {
	l := newLeftRunningBuilds()
	l.record(someTemplateID, "", "ignored")
	l.record(someTemplateID, "aaaa", "b1")
	if got := l.peek(someTemplateID, "bbbb"); got != "" {
		t.Errorf("another spec hash: %q", got)
	}
	if got := l.peek("zyxwvutsrqponmlkjihg", "aaaa"); got != "" {
		t.Errorf("another template: %q", got)
	}
	if got := l.peek(someTemplateID, "aaaa"); got != "b1" {
		t.Errorf("peek = %q, want b1", got)
	}
	if got := l.take(someTemplateID, "aaaa"); got != "b1" {
		t.Errorf("take = %q, want b1", got)
	}
	if got := l.take(someTemplateID, "aaaa"); got != "" {
		t.Errorf("a second take = %q, want none: one create adopts a build", got)
	}
	if got := l.take(someTemplateID, ""); got != "" {
		t.Errorf("no spec hash: %q", got)
	}
}
