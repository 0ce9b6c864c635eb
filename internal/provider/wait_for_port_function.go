package provider

import (
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/function"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/readycmd"
)

// NewWaitForPortFunction is provider::e2b::wait_for_port(port).
func NewWaitForPortFunction() function.Function {
	return oneArgReadyCmd("wait_for_port", function.Definition{
		Summary:             "Ready command: wait until a port is listening",
		MarkdownDescription: "Returns a ready command that succeeds once something listens on `port` (TCP or UDP, that port exactly), checked with `ss`.",
		Parameters: []function.Parameter{function.Int64Parameter{
			Name:                "port",
			MarkdownDescription: "The port, from 1 to 65535.",
			Validators:          []function.Int64ParameterValidator{int64validator.Between(1, 65535)},
		}},
	}, readycmd.WaitForPort)
}
