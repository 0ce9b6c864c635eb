package provider

import (
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/function"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/readycmd"
)

// NewWaitForTimeoutFunction is provider::e2b::wait_for_timeout(ms).
func NewWaitForTimeoutFunction() function.Function {
	return oneArgReadyCmd("wait_for_timeout", function.Definition{
		Summary: "Ready command: wait a fixed time",
		MarkdownDescription: "Returns a ready command that sleeps for `ms` milliseconds, in whole seconds rounded down " +
			"and at least one (`sleep 5` for 5000), and then succeeds.",
		Parameters: []function.Parameter{function.Int64Parameter{
			Name:                "ms",
			MarkdownDescription: "Milliseconds to wait, at least 0; less than 2000 waits one second.",
			Validators:          []function.Int64ParameterValidator{int64validator.AtLeast(0)},
		}},
	}, readycmd.WaitForTimeout)
}
