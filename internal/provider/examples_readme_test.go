package provider

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/acctest"
)

// TestAccExamples_readmeCommands runs the commands of every example's README as
// written: each ```sh block, in a copy of the example's directory, with the provider
// through dev_overrides and no registry (TF_CLI_CONFIG_FILE), the local server's
// E2B_* variables exported as the README says, and `terraform` on PATH being the CLI
// under test. Every README of an example must have commands, so that none goes untested.
func TestAccExamples_readmeCommands(t *testing.T) {
	srv := localServer(t)
	root, err := acctest.ModuleRoot()
	acctest.Must(t, err)
	readmes, err := filepath.Glob(filepath.Join(root, "examples", "*", "README.md"))
	acctest.Must(t, err)
	if len(readmes) == 0 {
		t.Fatal("no example has a README")
	}
	terraformCLI := os.Getenv("TF_ACC_TERRAFORM_PATH")
	if terraformCLI == "" {
		terraformCLI, err = exec.LookPath("terraform")
		acctest.Must(t, err)
	}
	bin := t.TempDir()
	acctest.Must(t, os.Symlink(terraformCLI, filepath.Join(bin, "terraform")))
	for _, readme := range readmes {
		name := filepath.Base(filepath.Dir(readme))
		t.Run(name, func(t *testing.T) {
			blocks, err := shellBlocks(readme)
			acctest.Must(t, err)
			if len(blocks) == 0 {
				t.Fatalf("%s has no sh block of commands to run", readme)
			}
			work := filepath.Join(t.TempDir(), name)
			copyDir(t, filepath.Dir(readme), work, nil)
			tf := newCLI(t, srv, work)
			for _, block := range blocks {
				cmd := exec.CommandContext(context.Background(), "bash", "-euo", "pipefail", "-c", block)
				cmd.Dir = work
				cmd.Env = append(os.Environ(),
					"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
					"TF_CLI_CONFIG_FILE="+tf.cliConfig, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1",
					"E2B_API_URL="+srv.APIURL, "E2B_SANDBOX_URL="+srv.SandboxURL, "E2B_API_KEY="+srv.APIKey,
					"TF_VAR_template="+uniqueName("acc-readme-"+name), "TF_VAR_base_image="+srv.DebianImage)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("%s:\n%s\nfailed: %v\n%s", readme, block, err, out)
				}
			}
		})
	}
}

// shellBlocks are the ```sh blocks of a Markdown file.
func shellBlocks(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var blocks []string
	var block *strings.Builder
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		line := scanner.Text()
		switch {
		case block == nil && strings.TrimSpace(line) == "```sh":
			block = &strings.Builder{}
		case block != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, block.String())
			block = nil
		case block != nil:
			block.WriteString(line + "\n")
		}
	}
	return blocks, scanner.Err()
}
