package command

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// How every role answers its command line: --help prints what the role is and its
// flags on stdout and exits 0; a bad flag or argument prints the error and where help
// is on stderr and exits 2, without the whole list of flags.

// parseFlags parses args with fs, silencing the flag package's own output (the error
// followed by every flag). On --help it prints intro and the flags to stdout and
// returns flag.ErrHelp; arguments left after the flags are an error.
func parseFlags(fs *flag.FlagSet, args []string, intro string, stdout io.Writer) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fmt.Fprintf(stdout, "%s\n\nFlags:\n", intro)
		fs.PrintDefaults()
	case err == nil && fs.NArg() > 0:
		err = fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	return err
}

// usageExit is the exit code of a command line parseFlags (or a check of the values)
// refused: 0 for --help, else 2 after printing err and where help is.
func usageExit(stderr io.Writer, role string, err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(stderr, "terraform-provider-e2b %s: %v\nRun 'terraform-provider-e2b %s --help' for its flags.\n", role, err, role)
	return 2
}
