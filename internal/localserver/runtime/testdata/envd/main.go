// Command envd is the tests' stand-in for the provider binary while its
// `envd` subcommand is not wired in: `<bin> envd --listen ...`.
package main

import (
	"os"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/server"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "envd" {
		os.Stderr.WriteString("usage: envd envd --listen ADDR\n")
		os.Exit(2)
	}
	os.Exit(server.Main(os.Args[2:]))
}
