package provider

import (
	"testing"

	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
)

func TestAccFunctionWaitForFile_output(t *testing.T) {
	functionOutputs(t, map[string]struct{ expr, want string }{
		"plain":  {`provider::e2b::wait_for_file("/tmp/ready")`, `[ -f /tmp/ready ]`},
		"quoted": {`provider::e2b::wait_for_file("/tmp/ready file")`, `[ -f '/tmp/ready file' ]`},
		"quote":  {`provider::e2b::wait_for_file("/tmp/it's")`, `[ -f '/tmp/it'"'"'s' ]`},
	})
}

func TestAccFunctionWaitForFile_errors(t *testing.T) {
	functionErrors(t, map[string]struct{ expr, err string }{
		"empty": {`provider::e2b::wait_for_file("")`, `length must be at least 1`},
	})
}

// TestAccFunctionWaitForFile_readyCmd builds a template whose start command
// writes the file the function's ready command waits for; a sandbox from the
// build finds it.
func TestAccFunctionWaitForFile_readyCmd(t *testing.T) {
	srv := localServer(t)
	config := templateBuild(srv, uniqueName("acc-ready"), "b", srv.BaseImage, `  start_cmd = "sleep 1 && echo ok > /tmp/ready && sleep 3600"
  ready_cmd = provider::e2b::wait_for_file("/tmp/ready")`) + `
data "e2b_process" "ready" {
  template = "${e2b_template.t.name}:${e2b_template_build.b.build_id}"
  cmd      = "cat"
  args     = ["/tmp/ready"]
}
`
	tfresource.Test(t, tfresource.TestCase{
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_8_0)},
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{{
			Config: config,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("e2b_template_build.b", tfjsonpath.New("ready_cmd"), knownvalue.StringExact("[ -f /tmp/ready ]")),
				statecheck.ExpectKnownValue("data.e2b_process.ready", tfjsonpath.New("stdout"), knownvalue.StringExact("ok\n")),
			},
		}},
	})
}
