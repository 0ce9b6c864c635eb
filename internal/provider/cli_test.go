package provider

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/acctest"
)

// cli runs the Terraform CLI of TF_ACC_TERRAFORM_PATH in a directory, with the provider
// binary of srv through dev_overrides, as a user (or a CI runner) runs it.
type cli struct {
	t         *testing.T
	path      string
	cliConfig string
	Dir       string
	// Env is added to the environment of every run (KEY=value).
	Env []string
}

func newCLI(t *testing.T, srv *acctest.Server, dir string) *cli {
	t.Helper()
	terraformCLI := os.Getenv("TF_ACC_TERRAFORM_PATH")
	if terraformCLI == "" {
		terraformCLI = "terraform"
	}
	cliConfig := filepath.Join(t.TempDir(), "terraformrc")
	acctest.Must(t, os.WriteFile(cliConfig, fmt.Appendf(nil, `provider_installation {
  dev_overrides {
    "e2b-terraform/e2b" = %q
  }
  direct {}
}
`, filepath.Dir(srv.Binary)), 0o600))
	return &cli{t: t, path: terraformCLI, cliConfig: cliConfig, Dir: dir}
}

// Run runs terraform with args in c.Dir and returns its combined output.
func (c *cli) Run(args ...string) (string, error) {
	// Not t.Context: a cleanup's destroy runs after it ends.
	cmd := exec.CommandContext(context.Background(), c.path, args...)
	cmd.Dir = c.Dir
	cmd.Env = append(append(os.Environ(), "TF_CLI_CONFIG_FILE="+c.cliConfig, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1"), c.Env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Must runs terraform and fails the test when it fails.
func (c *cli) Must(args ...string) string {
	c.t.Helper()
	out, err := c.Run(args...)
	if err != nil {
		c.t.Fatalf("terraform %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}
