package provider

import (
	"fmt"
	"regexp"
	"testing"

	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
)

// templateConfig is a template of the given name on srv's provider.
func templateConfig(providerConfig, name string, public bool) string {
	return providerConfig + fmt.Sprintf(`
resource "e2b_template" "t" {
  name   = %q
  public = %t
}
`, name, public)
}

// TestAccTemplate_import creates a template and imports it by ID and by name, with the
// import command and with an import block (a plan that changes nothing).
func TestAccTemplate_import(t *testing.T) {
	srv := localServer(t)
	name := uniqueName("acc-tpl-import")
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{
			{
				Config: templateConfig(srv.ProviderConfig(), name, false),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("e2b_template.t", tfjsonpath.New("id"), knownvalue.StringRegexp(regexp.MustCompile(`^[a-z0-9]{20}$`))),
				},
			},
			{
				ResourceName:      "e2b_template.t",
				ImportState:       true,
				ImportStateVerify: true,
			},
			{
				ResourceName:      "e2b_template.t",
				ImportState:       true,
				ImportStateId:     name,
				ImportStateVerify: true,
			},
			{
				ResourceName:    "e2b_template.t",
				ImportState:     true,
				ImportStateKind: tfresource.ImportBlockWithID,
				ImportStateId:   name,
			},
		},
	})
}

// TestAccTemplate_public changes public in place; a second template cannot take the
// name. It needs no build.
func TestAccTemplate_public(t *testing.T) {
	srv := localServer(t)
	name := uniqueName("acc-pub")
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{
			{
				Config: templateConfig(srv.ProviderConfig(), name, false),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("e2b_template.t", tfjsonpath.New("public"), knownvalue.Bool(false)),
					statecheck.ExpectKnownValue("e2b_template.t", tfjsonpath.New("names"), knownvalue.ListExact([]knownvalue.Check{
						knownvalue.StringRegexp(regexp.MustCompile(`^(.+/)?` + regexp.QuoteMeta(name) + `$`)),
					})),
				},
			},
			{
				Config: templateConfig(srv.ProviderConfig(), name, true),
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("e2b_template.t", plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("e2b_template.t", tfjsonpath.New("public"), knownvalue.Bool(true)),
				},
			},
			{
				Config: templateConfig(srv.ProviderConfig(), name, true) + fmt.Sprintf(`
resource "e2b_template" "again" {
  name = %q
}
`, name),
				ExpectError: regexp.MustCompile(`(?s)Template name already in use`),
			},
		},
	})
}

func TestAccTemplate_planErrors(t *testing.T) {
	planErrors(t, map[string]struct{ config, err string }{
		"bad template name": {`
resource "e2b_template" "t" {
  name = "Bad Name!"
}
`, `(?s)Invalid name.*name is "Bad Name!"; it must be an E2B template name.*It\s+has\s+spaces\s+or\s+upper-case\s+letters`},
		"name with spaces": {`
resource "e2b_template" "t" {
  name = "My App"
}
`, `(?s)Invalid name.*name is "My App";.*write "my-app"`},
		"template name with a tag": {`
resource "e2b_template" "t" {
  name = "good:v1"
}
`, `(?s)must\s+not\s+carry\s+a\s+tag`},
	})
}

// TestAccTemplate_identity sets the template's identity at create and imports it by
// identity, with the ID (the identity as it is) and with the name.
func TestAccTemplate_identity(t *testing.T) {
	srv := localServer(t)
	name := uniqueName("acc-tpl-identity")
	var id string
	idCheck := knownvalue.StringRegexp(regexp.MustCompile(`^[a-z0-9]{20}$`))
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_12_0)},
		Steps: []tfresource.TestStep{
			{
				Config: templateConfig(srv.ProviderConfig(), name, false),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectIdentity("e2b_template.t", map[string]knownvalue.Check{"id": idCheck}),
					statecheck.ExpectIdentityValueMatchesState("e2b_template.t", tfjsonpath.New("id")),
					statecheck.ExpectKnownValue("e2b_template.t", tfjsonpath.New("id"), capture(&id)),
				},
			},
			{
				ResourceName:    "e2b_template.t",
				ImportState:     true,
				ImportStateKind: tfresource.ImportBlockWithResourceIdentity,
			},
			{
				// An identity may name the template; the imported identity is its ID.
				Config: templateConfig(srv.ProviderConfig(), name, false) + fmt.Sprintf(`
import {
  to       = e2b_template.by_name
  identity = { id = %q }
}

resource "e2b_template" "by_name" {
  name = %q
}
`, name, name),
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("e2b_template.by_name", plancheck.ResourceActionNoop),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectIdentity("e2b_template.by_name", map[string]knownvalue.Check{"id": equalTo("the template's ID", &id)}),
				},
			},
		},
	})
}
