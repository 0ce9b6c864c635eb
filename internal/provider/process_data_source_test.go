package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/acctest"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
)

// processTemplate is a template of the Debian test image, which has the bash
// that sandboxes run shell commands with (bash -l -c).
func processTemplate(srv *acctest.Server, name string) string {
	return templateBuild(srv, name, "b", srv.DebianImage, `  steps = [{ workdir = "/" }]`) + `
locals {
  run_from = "${e2b_template.t.name}:${e2b_template_build.b.build_id}"
}
`
}

// runningSandboxes is the IDs of the sandboxes the server runs.
func runningSandboxes(ctx context.Context, srv *acctest.Server) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.APIURL+"/sandboxes", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-API-Key", srv.APIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list []e2b.ListedSandbox
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /sandboxes: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, err
	}
	var ids []string
	for _, sb := range list {
		ids = append(ids, sb.SandboxID)
	}
	return ids, nil
}

// noSandboxLeft checks that e2b_process killed the sandboxes it started.
func noSandboxLeft(srv *acctest.Server) statecheck.StateCheck {
	return serverCheck(func(ctx context.Context) error {
		ids, err := runningSandboxes(ctx, srv)
		if err != nil {
			return err
		}
		if len(ids) != 0 {
			return fmt.Errorf("sandboxes %q still run: e2b_process must kill the sandboxes it starts", ids)
		}
		return nil
	})
}

// TestAccProcessDataSource_outputs runs commands through the data source: exit codes,
// truncation, stdin, cmd+args, env, cwd and user, a background child's late output and a
// program that cannot start (exit 127, as on E2B); no sandbox is left behind.
func TestAccProcessDataSource_outputs(t *testing.T) {
	srv := localServer(t)
	base := processTemplate(srv, uniqueName("acc-proc"))
	reads := `
data "e2b_process" "exit" {
  template            = local.run_from
  command             = "echo out; echo err >&2; exit 3"
  allow_non_zero_exit = true
}

data "e2b_process" "truncated" {
  template         = local.run_from
  command          = "i=0; while [ $i -lt 50 ]; do echo 0123456789; i=$((i+1)); done; echo short >&2"
  max_output_bytes = 100
}

data "e2b_process" "stdin" {
  template = local.run_from
  cmd      = "/bin/cat"
  stdin    = "piped text\n"
}

data "e2b_process" "args" {
  template = local.run_from
  cmd      = "/bin/echo"
  args     = ["a", "b  c"]
}

data "e2b_process" "env" {
  template = local.run_from
  command  = "echo $FOO; pwd; id -u"
  env      = { FOO = "bar" }
  cwd      = "/tmp"
  user     = "root"
}

data "e2b_process" "background" {
  template = local.run_from
  command  = "(sleep 2; echo child) & echo parent"
}

data "e2b_process" "missing" {
  template            = local.run_from
  cmd                 = "no-such-command-xyz"
  allow_non_zero_exit = true
}
`
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{{
			Config: base + reads,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("data.e2b_process.exit", tfjsonpath.New("exit_code"), knownvalue.Int64Exact(3)),
				statecheck.ExpectKnownValue("data.e2b_process.exit", tfjsonpath.New("stdout"), knownvalue.StringExact("out\n")),
				statecheck.ExpectKnownValue("data.e2b_process.exit", tfjsonpath.New("stderr"), knownvalue.StringExact("err\n")),
				statecheck.ExpectKnownValue("data.e2b_process.exit", tfjsonpath.New("sandbox_id"), knownvalue.StringRegexp(regexp.MustCompile(`^[a-z0-9]+$`))),
				statecheck.ExpectKnownValue("data.e2b_process.truncated", tfjsonpath.New("stdout"), knownvalue.StringExact(strings.Repeat("0123456789\n", 10)[:100])),
				statecheck.ExpectKnownValue("data.e2b_process.truncated", tfjsonpath.New("stdout_truncated"), knownvalue.Bool(true)),
				statecheck.ExpectKnownValue("data.e2b_process.truncated", tfjsonpath.New("stderr_truncated"), knownvalue.Bool(false)),
				statecheck.ExpectKnownValue("data.e2b_process.truncated", tfjsonpath.New("stderr"), knownvalue.StringExact("short\n")),
				statecheck.ExpectKnownValue("data.e2b_process.stdin", tfjsonpath.New("stdout"), knownvalue.StringExact("piped text\n")),
				statecheck.ExpectKnownValue("data.e2b_process.args", tfjsonpath.New("stdout"), knownvalue.StringExact("a b  c\n")),
				statecheck.ExpectKnownValue("data.e2b_process.env", tfjsonpath.New("stdout"), knownvalue.StringExact("bar\n/tmp\n0\n")),
				statecheck.ExpectKnownValue("data.e2b_process.background", tfjsonpath.New("stdout"), knownvalue.StringExact("parent\nchild\n")),
				statecheck.ExpectKnownValue("data.e2b_process.missing", tfjsonpath.New("exit_code"), knownvalue.Int64Exact(127)),
				statecheck.ExpectKnownValue("data.e2b_process.missing", tfjsonpath.New("stderr"), knownvalue.StringRegexp(regexp.MustCompile(`no-such-command-xyz`))),
				noSandboxLeft(srv),
			},
		}},
	})
}

// TestAccProcessDataSource_failures fails on a non-zero exit, with the command's stderr,
// and on a timeout; the sandboxes are killed either way.
func TestAccProcessDataSource_failures(t *testing.T) {
	srv := localServer(t)
	base := processTemplate(srv, uniqueName("acc-proc-fail"))
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{
			{
				Config: base + `
data "e2b_process" "fails" {
  template = local.run_from
  command  = "echo the-reason >&2; exit 3"
}
`,
				ExpectError: regexp.MustCompile(`(?s)exited with code 3.*allow_non_zero_exit.*stderr:\s+the-reason`),
			},
			{
				Config: base + `
data "e2b_process" "slow" {
  template = local.run_from
  command  = "sleep 60"
  timeout  = "2s"
}
`,
				ExpectError: regexp.MustCompile(`(?s)did not end within the timeout of 2s`),
			},
			{
				Config:            base,
				ConfigStateChecks: []statecheck.StateCheck{noSandboxLeft(srv)},
			},
		},
	})
}

// TestAccProcessDataSource_runningSandbox runs a command in a running sandbox (started
// from name, the build's default tag), which is left running; while it runs, E2B refuses
// to delete the template.
func TestAccProcessDataSource_runningSandbox(t *testing.T) {
	srv := localServer(t)
	api := testAPI(t, srv)
	name := uniqueName("acc-proc-sb")
	base := processTemplate(srv, name)
	var sandboxID string
	t.Cleanup(func() {
		if sandboxID != "" {
			_ = api.KillSandbox(context.Background(), sandboxID)
		}
	})
	inSandbox := `
variable "sandbox_id" {
  type = string
}

data "e2b_process" "in_sandbox" {
  sandbox_id = var.sandbox_id
  command    = "echo kept > /tmp/mark; cat /tmp/mark"
}
`
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{
			{
				// The template the sandbox starts from.
				Config: base,
			},
			{
				PreConfig: func() {
					sb, err := api.CreateSandbox(context.Background(), e2b.NewSandbox{TemplateID: name})
					acctest.Must(t, err)
					sandboxID = sb.SandboxID
					t.Setenv("TF_VAR_sandbox_id", sandboxID)
				},
				Config: base + inSandbox,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.e2b_process.in_sandbox", tfjsonpath.New("stdout"), knownvalue.StringExact("kept\n")),
					serverCheck(func(ctx context.Context) error {
						if _, err := api.GetSandbox(ctx, sandboxID); err != nil {
							return fmt.Errorf("the sandbox given by sandbox_id is gone: %w", err)
						}
						return nil
					}),
				},
			},
			{
				Config:      base + inSandbox,
				Destroy:     true,
				ExpectError: regexp.MustCompile(`(?s)Cannot delete template.*sandboxes`),
			},
			{
				PreConfig: func() {
					acctest.Must(t, api.KillSandbox(context.Background(), sandboxID))
					sandboxID = ""
				},
				Config: base,
			},
		},
	})
}

func TestAccProcessDataSource_planErrors(t *testing.T) {
	planErrors(t, map[string]struct{ config, err string }{
		"process with template and sandbox_id": {`
data "e2b_process" "p" {
  template   = "good"
  sandbox_id = "iabc"
  command    = "true"
}
`, `(?s)Invalid Attribute Combination`},
		"process without command": {`
data "e2b_process" "p" {
  template = "good"
}
`, `(?s)Missing Attribute Configuration.*command,cmd`},
		"process with a bad timeout": {`
data "e2b_process" "p" {
  template = "good"
  command  = "true"
  timeout  = "soon"
}
`, `(?s)not a duration`},
	})
}

// TestAccProcessDataSource_timeoutRange refuses, at plan, timeouts out of the range a
// sandbox's lifetime can have, saying the range: a sandbox's lifetime is sent in whole
// seconds as an int32, so longer values were sent negative or wrapped around.
func TestAccProcessDataSource_timeoutRange(t *testing.T) {
	process := func(timeout string) string {
		return fmt.Sprintf(`
data "e2b_process" "p" {
  template = "base"
  command  = "true"
  timeout  = %q
}
`, timeout)
	}
	planErrors(t, map[string]struct{ config, err string }{
		"a hundred years": {process("876000h"), `(?s)"876000h" is out of range: it must be from 1s\s+to 24h`},
		"int32 wrap":      {process("1193046h2236s"), `(?s)"1193046h2236s" is out of range: it must be from 1s to\s+24h`},
		"too long":        {process("100000000h"), `(?s)"100000000h" is too long: it must be from 1s to\s+24h`},
		"zero":            {process("0s"), `(?s)"0s" is out of range`},
		"garbage":         {process("soon"), `(?s)"soon" is not a duration such as 30s or 5m \(from 1s to\s+24h\)`},
	})
}
