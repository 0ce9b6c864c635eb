// Command terraform-provider-e2b is the Terraform provider for E2B sandbox
// templates. Started by Terraform without arguments it serves the provider
// over the plugin protocol; the first argument may instead name one of the
// other roles the same binary carries (command.Binary; `help` lists them).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/command"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/provider"
)

// version and commit are set at build time with
// -ldflags "-X main.version=<version> -X main.commit=<commit>"; without them
// the Go build information stands in (command.Binary).
var (
	version = "dev"
	commit  = ""
)

// providerAddress is the registry address Terraform knows the provider by.
const providerAddress = "registry.terraform.io/e2b-terraform/e2b"

// One binary carries every role so that a release has one version everywhere.
func main() {
	binary := command.Binary{Version: version, Commit: commit, Provider: serveProvider}
	os.Exit(binary.Run(os.Args[1:], os.Stdout, os.Stderr))
}

// serveProvider serves the Terraform provider until Terraform stops it.
func serveProvider(args []string) int {
	flags := flag.NewFlagSet("terraform-provider-e2b", flag.ContinueOnError)
	debug := flags.Bool("debug", false, "start the provider in debug mode for debuggers like delve; prints TF_REATTACH_PROVIDERS to use")
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}

	opts := providerserver.ServeOpts{
		Address:         providerAddress,
		Debug:           *debug,
		ProtocolVersion: 6,
	}
	if err := providerserver.Serve(context.Background(), provider.New(version), opts); err != nil {
		fmt.Fprintln(os.Stderr, "terraform-provider-e2b:", err)
		return 1
	}
	return 0
}
