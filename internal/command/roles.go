package command

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
)

// pluginCookieEnv is the variable Terraform and OpenTofu set when they start
// a provider (terraform-plugin-go's handshake). Without it and without
// arguments, a person ran the binary: they get the list of roles.
const pluginCookieEnv = "TF_PLUGIN_MAGIC_COOKIE"

// Binary is what the entry point knows of the build and how it serves the
// provider, which this package does not import.
type Binary struct {
	// Version and Commit are set with -ldflags -X; empty or "dev" values
	// are filled from the Go build information where it has them.
	Version, Commit string
	// Provider serves the Terraform provider with the given arguments
	// (-debug) and returns the exit code.
	Provider func(args []string) int
}

// role is one thing the binary does, chosen by its first argument.
type role struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) int
}

// Run chooses the role the arguments name and returns its exit code.
// Without arguments (as Terraform starts it) or with -debug it serves the
// provider; help, -h and --help list the roles on stdout (exit 0); version,
// -v and --version print the build; an unknown first argument is named, with
// where the list is, on stderr (exit 2).
func (b Binary) Run(args []string, stdout, stderr io.Writer) int {
	var roles []role
	roles = []role{
		{"server", "run a local E2B-compatible server: templates build and sandboxes run as Docker containers (server prune: clean the engine after it)", Server},
		{"envd", "the daemon inside the local server's sandboxes (started by the server, not by hand)", Envd},
		{"version", "print the provider's version, commit and Go version (also -v, --version)", func([]string, io.Writer, io.Writer) int {
			fmt.Fprintln(stdout, b.describe())
			return 0
		}},
		{"help", "print this list (also -h, --help)", func([]string, io.Writer, io.Writer) int {
			b.usage(stdout, roles)
			return 0
		}},
	}
	if len(args) == 0 {
		if os.Getenv(pluginCookieEnv) == "" {
			b.usage(stderr, roles)
			return 2
		}
		return b.Provider(nil)
	}
	first := args[0]
	switch first {
	case "-debug", "--debug":
		return b.Provider(args)
	case "-h", "-help", "--help":
		first = "help"
	case "-v", "-version", "--version":
		first = "version"
	}
	for _, r := range roles {
		if r.name == first {
			return r.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "terraform-provider-e2b: unknown role %q\nRun 'terraform-provider-e2b help' for the roles.\n", args[0])
	return 2
}

// usage lists the roles, one line each.
func (b Binary) usage(w io.Writer, roles []role) {
	fmt.Fprintf(w, "terraform-provider-e2b %s: the Terraform provider for E2B sandbox templates.\n\n", b.version())
	fmt.Fprintln(w, "Usage: terraform-provider-e2b [role] [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Roles:")
	fmt.Fprintf(w, "  %-8s %s\n", "(none)", "serve the provider: Terraform and OpenTofu start it so (-debug: for a debugger)")
	for _, r := range roles {
		fmt.Fprintf(w, "  %-8s %s\n", r.name, r.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run terraform-provider-e2b <role> --help for a role's flags.")
}

// describe is the version line: the provider's version, the commit it was
// built from and the Go version.
func (b Binary) describe() string {
	return fmt.Sprintf("terraform-provider-e2b %s (commit %s, %s, %s/%s)", b.version(), b.commit(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// version is the -ldflags version or, for `go install …@v0.1.0`, the
// module's version.
func (b Binary) version() string {
	if b.Version != "" && b.Version != "dev" {
		return b.Version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return strings.TrimPrefix(info.Main.Version, "v")
	}
	return "dev"
}

// commit is the -ldflags commit or the VCS revision Go stamped into a
// build from a checkout ("-dirty" when it had uncommitted changes).
func (b Binary) commit() string {
	if b.Commit != "" {
		return b.Commit
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	revision, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if revision == "" {
		return "unknown"
	}
	if dirty {
		revision += "-dirty"
	}
	return revision
}
