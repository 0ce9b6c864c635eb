package readycmd

import "testing"

// The expected strings are the SDK's own test vectors
// (packages/js-sdk/tests/template/utils/readycmd.test.ts in e2b-dev/E2B at
// commit 706c55329540101d3572694ee47022c14285b79f) and further cases worked
// out from readycmd.ts and shellQuote (utils.ts) at the commits the package
// comment names.
func TestCommands(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{WaitForPort(80), `[ -n "$(ss -Htuln sport = :80)" ]`},
		{WaitForPort(8000), `[ -n "$(ss -Htuln sport = :8000)" ]`},
		{WaitForURL("http://localhost:3000/health?ready=1&x=y", DefaultStatusCode),
			`curl -s -o /dev/null -w "%{http_code}" 'http://localhost:3000/health?ready=1&x=y' | grep -q "200"`},
		{WaitForURL("http://localhost:3000/health", DefaultStatusCode),
			`curl -s -o /dev/null -w "%{http_code}" http://localhost:3000/health | grep -q "200"`},
		{WaitForURL("http://localhost:8080/", 204), `curl -s -o /dev/null -w "%{http_code}" http://localhost:8080/ | grep -q "204"`},
		{WaitForProcess("my daemon"), `pgrep 'my daemon' > /dev/null`},
		{WaitForProcess("nginx"), `pgrep nginx > /dev/null`},
		{WaitForFile("/tmp/ready file"), `[ -f '/tmp/ready file' ]`},
		{WaitForFile("/tmp/ready"), `[ -f /tmp/ready ]`},
		{WaitForTimeout(5000), `sleep 5`},
		{WaitForTimeout(100), `sleep 1`},
		{WaitForTimeout(1999), `sleep 1`},
		{WaitForTimeout(0), `sleep 1`},
		{WaitForTimeout(-2500), `sleep 1`},
		{WaitForTimeout(61000), `sleep 61`},
	} {
		if c.got != c.want {
			t.Errorf("got  %s\nwant %s", c.got, c.want)
		}
	}
}

// TestQuote checks shellQuote's rules: Python's shlex.quote with ASCII \w.
func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		"":                        "''",
		"a-Z_0.9/@%+=:,":          "a-Z_0.9/@%+=:,",
		"it's":                    `'it'"'"'s'`,
		"$HOME":                   "'$HOME'",
		"a b":                     "'a b'",
		"tab\there":               "'tab\there'",
		"caf\u00e9":               "'caf\u00e9'",
		"x;rm -rf /":              "'x;rm -rf /'",
		"'":                       `''"'"''`,
		"http://h/p?q=1":          "'http://h/p?q=1'",
		"http://h:80/p#f":         "'http://h:80/p#f'",
		"http://user@h/p%20x,y=1": "http://user@h/p%20x,y=1",
	} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}
