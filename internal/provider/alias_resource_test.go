package provider

import (
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/acctest"
)

// aliasConfig is a template with two builds, v1 and then v2, each writing its name to
// /opt/version, and the tag prod on the build named by build; a sandbox from name:prod
// reads the version again whenever the tag moves.
func aliasConfig(srv *acctest.Server, name, build string) string {
	return srv.ProviderConfig() + fmt.Sprintf(`
resource "e2b_template" "t" {
  name = %[1]q
}

resource "e2b_template_build" "v1" {
  template_id = e2b_template.t.id
  from_image  = %[2]q
  steps       = [{ run = { command = "echo v1 > /opt/version", user = "root" } }]
}

resource "e2b_template_build" "v2" {
  template_id = e2b_template.t.id
  from_image  = %[2]q
  steps       = [{ run = { command = "echo v2 > /opt/version", user = "root" } }]
  # After v1: a template's first build runs on the build E2B registered with the
  # template, which a build registered meanwhile would supersede.
  depends_on = [e2b_template_build.v1]
}

resource "e2b_alias" "prod" {
  template = e2b_template.t.name
  tag      = "prod"
  build_id = e2b_template_build.%[3]s.build_id
}

data "e2b_process" "prod" {
  template = "${e2b_template.t.name}:${e2b_alias.prod.tag}"
  command  = "cat /opt/version"
  env      = { BUILD = e2b_alias.prod.build_id }
}
`, name, srv.DebianImage, build)
}

// aliasOn checks that the tag is on build and that a sandbox from name:prod runs it.
func aliasOn(build, version string) []statecheck.StateCheck {
	return []statecheck.StateCheck{
		statecheck.CompareValuePairs("e2b_alias.prod", tfjsonpath.New("build_id"), "e2b_template_build."+build, tfjsonpath.New("build_id"), compare.ValuesSame()),
		statecheck.ExpectKnownValue("data.e2b_process.prod", tfjsonpath.New("stdout"), knownvalue.StringExact(version+"\n")),
	}
}

// TestAccAlias_move points a tag at a build, moves it in place to another (sandboxes from
// name:tag then run the new build) and imports it.
func TestAccAlias_move(t *testing.T) {
	srv := localServer(t)
	name := uniqueName("acc-alias")
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{
			{
				Config:            aliasConfig(srv, name, "v1"),
				ConfigStateChecks: aliasOn("v1", "v1"),
			},
			{
				Config: aliasConfig(srv, name, "v2"),
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("e2b_alias.prod", plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: aliasOn("v2", "v2"),
			},
			{
				ResourceName:      "e2b_alias.prod",
				ImportState:       true,
				ImportStateId:     name + ":prod",
				ImportStateVerify: true,
			},
		},
	})
}

// TestAccAlias_drift moves the tag outside Terraform: the plan shows it, the apply moves
// it back.
func TestAccAlias_drift(t *testing.T) {
	srv := localServer(t)
	api := testAPI(t, srv)
	name := uniqueName("acc-drift")
	var v1Build string
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{
			{
				Config: aliasConfig(srv, name, "v2"),
				ConfigStateChecks: append(aliasOn("v2", "v2"),
					statecheck.ExpectKnownValue("e2b_template_build.v1", tfjsonpath.New("build_id"), capture(&v1Build))),
			},
			{
				PreConfig: func() {
					_, err := api.AssignTags(context.Background(), name+":"+v1Build, []string{"prod"})
					acctest.Must(t, err)
				},
				Config:             aliasConfig(srv, name, "v2"),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("e2b_alias.prod", plancheck.ResourceActionUpdate),
				}},
			},
			{
				Config:            aliasConfig(srv, name, "v2"),
				ConfigStateChecks: aliasOn("v2", "v2"),
			},
		},
	})
}

func TestAccAlias_planErrors(t *testing.T) {
	planErrors(t, map[string]struct{ config, err string }{
		"alias on the default tag": {`
resource "e2b_alias" "a" {
  template = "good"
  tag      = "default"
  build_id = "1f0c6f2e-8f5b-4b8e-9a8e-1c2d3e4f5a6b"
}
`, `(?s)tag "default" cannot be managed`},
		"alias with a bad build_id": {`
resource "e2b_alias" "a" {
  template = "good"
  tag      = "prod"
  build_id = "latest"
}
`, `(?s)build_id`},
	})
}
