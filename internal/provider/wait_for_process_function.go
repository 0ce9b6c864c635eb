package provider

import (
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/function"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/readycmd"
)

// NewWaitForProcessFunction is provider::e2b::wait_for_process(name).
func NewWaitForProcessFunction() function.Function {
	return oneArgReadyCmd("wait_for_process", function.Definition{
		Summary:             "Ready command: wait until a process runs",
		MarkdownDescription: "Returns a ready command that succeeds once a process whose name matches `name` runs, checked with `pgrep`.",
		Parameters: []function.Parameter{function.StringParameter{
			Name:                "name",
			MarkdownDescription: "The process name, a `pgrep` pattern such as `nginx`; quoted for the shell where it needs to be.",
			Validators:          []function.StringParameterValidator{stringvalidator.LengthAtLeast(1)},
		}},
	}, readycmd.WaitForProcess)
}
