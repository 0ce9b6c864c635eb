package build

import "testing"

func TestEscapeEnvValue(t *testing.T) {
	for in, want := range map[string]string{
		`$HOME/bin`:      `$HOME/bin`,
		`a "quoted" \ x`: `a \"quoted\" \\ x`,
		"`id`":           "\\`id\\`",
		`$(id) ${X}`:     `\$(id) ${X}`,
	} {
		if got := escapeEnvValue(in); got != want {
			t.Errorf("escapeEnvValue(%q) = %q, want %q", in, got, want)
		}
	}
}
