package command

import (
	"bytes"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// run runs b with args and returns the exit code, stdout, stderr and the
// arguments the provider was served with (nil when it was not).
func run(t *testing.T, args ...string) (code int, stdout, stderr string, served []string) {
	t.Helper()
	var out, errOut bytes.Buffer
	b := Binary{Version: "0.1.0", Commit: "abc1234", Provider: func(args []string) int {
		served = append([]string{"served"}, args...)
		return 0
	}}
	code = b.Run(args, &out, &errOut)
	return code, out.String(), errOut.String(), served
}

func TestRunHelpListsTheRoles(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}, {"-help"}} {
		code, stdout, _, served := run(t, args...)
		if code != 0 || served != nil {
			t.Errorf("%v: exit %d, served %v; want the list and exit 0", args, code, served)
		}
		for _, want := range []string{"server ", "server prune", "envd ", "version ", "serve the provider", "0.1.0"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("%v: the list lacks %q:\n%s", args, want, stdout)
			}
		}
	}
}

func TestRunUnknownRoleNamesItAndExits2(t *testing.T) {
	code, stdout, stderr, served := run(t, "sever")
	if code != 2 || served != nil || stdout != "" {
		t.Errorf("exit %d, served %v, stdout %q; want exit 2 and nothing served", code, served, stdout)
	}
	if !strings.Contains(stderr, `unknown role "sever"`) || !strings.Contains(stderr, "Run 'terraform-provider-e2b help'") {
		t.Errorf("stderr lacks the role at fault or where the list is:\n%s", stderr)
	}
}

func TestRunVersion(t *testing.T) {
	for _, arg := range []string{"version", "--version", "-version", "-v"} {
		code, stdout, _, _ := run(t, arg)
		if code != 0 {
			t.Errorf("%s: exit %d", arg, code)
		}
		for _, want := range []string{"0.1.0", "commit abc1234", runtime.Version()} {
			if !strings.Contains(stdout, want) {
				t.Errorf("%s: %q lacks %q", arg, stdout, want)
			}
		}
	}
	// Without -ldflags, a build from a checkout names no made-up commit.
	if got := (Binary{}).describe(); !strings.HasPrefix(got, "terraform-provider-e2b dev (commit ") {
		t.Errorf("unstamped build: %q", got)
	}
}

// TestRunServesTheProviderAsTerraformStartsIt: Terraform and OpenTofu start
// the binary without arguments and with the handshake cookie; -debug is for
// debuggers. Without the cookie a person ran it: the list, exit 2.
func TestRunServesTheProviderAsTerraformStartsIt(t *testing.T) {
	t.Setenv(pluginCookieEnv, "")
	if code, _, stderr, served := run(t); code != 2 || served != nil || !strings.Contains(stderr, "Roles:") {
		t.Errorf("no arguments, no cookie: exit %d, served %v, stderr %q", code, served, stderr)
	}
	t.Setenv(pluginCookieEnv, "cookie")
	if code, _, _, served := run(t); code != 0 || !slices.Equal(served, []string{"served"}) {
		t.Errorf("no arguments with the cookie: exit %d, served %v", code, served)
	}
	if code, _, _, served := run(t, "-debug"); code != 0 || !slices.Equal(served, []string{"served", "-debug"}) {
		t.Errorf("-debug: exit %d, served %v", code, served)
	}
}

// TestRoleHelpOnStdout: every way of asking for help prints it on stdout and exits 0.
func TestRoleHelpOnStdout(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"server", "--help"}, {"server", "-h"}, {"server", "prune", "--help"}, {"envd", "--help"}} {
		code, stdout, stderr, _ := run(t, args...)
		if code != 0 || stderr != "" || !strings.Contains(stdout, "Usage: terraform-provider-e2b") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want the help on stdout and exit 0", args, code, stdout, stderr)
		}
	}
}

// TestRoleBadFlag: a bad flag or argument is named on stderr with where help is,
// without the list of every flag, and exits 2.
func TestRoleBadFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"server", "--no-such-flag"}, "flag provided but not defined: -no-such-flag"},
		{[]string{"server", "--max-cpu", "many"}, `invalid value "many" for flag -max-cpu`},
		{[]string{"server", "extra"}, "unexpected arguments: extra"},
		{[]string{"server", "--network", "bridge"}, `--network "bridge" is not one of none, host`},
		{[]string{"envd", "--no-such-flag"}, "flag provided but not defined: -no-such-flag"},
		{[]string{"server", "prune", "--listen", ":0"}, "flag provided but not defined: -listen"},
		{[]string{"server", "prune", "extra"}, "unexpected arguments: extra"},
	} {
		code, stdout, stderr, _ := run(t, c.args...)
		role := c.args[0]
		if c.args[1] == "prune" {
			role = "server prune"
		}
		if code != 2 || stdout != "" || !strings.Contains(stderr, c.want) ||
			!strings.Contains(stderr, "Run 'terraform-provider-e2b "+role+" --help' for its flags.") || strings.Count(stderr, "\n") > 3 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2, the error and where help is", c.args, code, stdout, stderr)
		}
	}
}
