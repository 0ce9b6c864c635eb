package provider

import (
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/function"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/readycmd"
)

// NewWaitForFileFunction is provider::e2b::wait_for_file(path).
func NewWaitForFileFunction() function.Function {
	return oneArgReadyCmd("wait_for_file", function.Definition{
		Summary:             "Ready command: wait until a file exists",
		MarkdownDescription: "Returns a ready command that succeeds once `path` is a regular file, checked with `[ -f path ]`.",
		Parameters: []function.Parameter{function.StringParameter{
			Name:                "path",
			MarkdownDescription: "The file, such as `/tmp/ready`; quoted for the shell where it needs to be.",
			Validators:          []function.StringParameterValidator{stringvalidator.LengthAtLeast(1)},
		}},
	}, readycmd.WaitForFile)
}
