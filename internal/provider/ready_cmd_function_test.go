package provider

import (
	"testing"

	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
)

// functionOutputs applies outputs (name => HCL expression) and checks each
// output's value; provider functions need Terraform 1.8 or OpenTofu 1.7. The
// expected strings are those of the E2B JS SDK's helpers (internal/readycmd
// names the source and its commit).
func functionOutputs(t *testing.T, outputs map[string]struct{ expr, want string }) {
	t.Helper()
	accPreCheck(t)
	config := ""
	var checks []statecheck.StateCheck
	for name, o := range outputs {
		config += "output \"" + name + "\" {\n  value = " + o.expr + "\n}\n"
		checks = append(checks, statecheck.ExpectKnownOutputValue(name, knownvalue.StringExact(o.want)))
	}
	tfresource.Test(t, tfresource.TestCase{
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_8_0)},
		ProtoV6ProviderFactories: factories(),
		Steps:                    []tfresource.TestStep{{Config: config, ConfigStateChecks: checks}},
	})
}

// functionErrors plans each expression as an output, which must fail matching
// its text (errorText).
func functionErrors(t *testing.T, cases map[string]struct{ expr, err string }) {
	t.Helper()
	accPreCheck(t)
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			tfresource.Test(t, tfresource.TestCase{
				TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_8_0)},
				ProtoV6ProviderFactories: factories(),
				Steps: []tfresource.TestStep{{
					Config:      "output \"x\" {\n  value = " + c.expr + "\n}\n",
					PlanOnly:    true,
					ExpectError: errorText(c.err),
				}},
			})
		})
	}
}
