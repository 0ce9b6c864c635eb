package provider

import (
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/acctest"
)

// pinnedBaseConfig is a base template with builds v1 and v2 (its owner's) and,
// with app, an app template built on the build the base's tag prod points at.
func pinnedBaseConfig(srv *acctest.Server, base, app string) string {
	config := srv.ProviderConfig() + fmt.Sprintf(`
resource "e2b_template" "base" {
  name = %[1]q
}

resource "e2b_template_build" "v1" {
  template_id = e2b_template.base.id
  from_image  = %[2]q
  steps       = [{ run = { command = "echo v1 > /tmp/version" } }]
}

resource "e2b_template_build" "v2" {
  template_id = e2b_template.base.id
  from_image  = %[2]q
  steps       = [{ run = { command = "echo v2 > /tmp/version" } }]
  depends_on  = [e2b_template_build.v1]
}
`, base, srv.BaseImage)
	if app == "" {
		return config
	}
	return config + fmt.Sprintf(`
data "e2b_alias" "base" {
  template = e2b_template.base.name
  tag      = "prod"
}

resource "e2b_template" "app" {
  name = %q
}

resource "e2b_template_build" "app" {
  template_id   = e2b_template.app.id
  from_template = "${e2b_template.base.name}:${data.e2b_alias.base.build_id}"
  steps         = [{ run = { command = "cat /tmp/version" } }]
}
`, app)
}

// TestAccAliasDataSource_pinnedBase builds on the build a tag of another team's
// template points at; when that tag moves (through the API, outside this
// configuration) the plan replaces the dependent build.
func TestAccAliasDataSource_pinnedBase(t *testing.T) {
	srv := localServer(t)
	api := testAPI(t, srv)
	base, app := uniqueName("acc-base"), uniqueName("acc-app")
	var v1, v2 string
	moveProd := func(build *string) func() {
		return func() {
			_, err := api.AssignTags(context.Background(), base+":"+*build, []string{"prod"})
			acctest.Must(t, err)
		}
	}
	pinnedTo := func(build string) []statecheck.StateCheck {
		return []statecheck.StateCheck{
			statecheck.CompareValuePairs("data.e2b_alias.base", tfjsonpath.New("build_id"), "e2b_template_build."+build, tfjsonpath.New("build_id"), compare.ValuesSame()),
		}
	}
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{
			{
				Config: pinnedBaseConfig(srv, base, ""),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("e2b_template_build.v1", tfjsonpath.New("build_id"), capture(&v1)),
					statecheck.ExpectKnownValue("e2b_template_build.v2", tfjsonpath.New("build_id"), capture(&v2)),
				},
			},
			{
				PreConfig:         moveProd(&v1),
				Config:            pinnedBaseConfig(srv, base, app),
				ConfigStateChecks: pinnedTo("v1"),
			},
			{
				PreConfig: moveProd(&v2),
				Config:    pinnedBaseConfig(srv, base, app),
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("e2b_template_build.app", plancheck.ResourceActionReplace),
					plancheck.ExpectResourceAction("e2b_template_build.v1", plancheck.ResourceActionNoop),
					plancheck.ExpectResourceAction("e2b_template_build.v2", plancheck.ResourceActionNoop),
				}},
				ConfigStateChecks: pinnedTo("v2"),
			},
		},
	})
}

// TestAccAliasDataSource_missing reads a tag of a template that does not exist
// and a tag that does not exist.
func TestAccAliasDataSource_missing(t *testing.T) {
	srv := localServer(t)
	name := uniqueName("acc-alias-missing")
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{
			{
				Config: srv.ProviderConfig() + fmt.Sprintf(`
data "e2b_alias" "a" {
  template = %q
  tag      = "prod"
}
`, name),
				ExpectError: errorText(`No template has the ID or name "` + name + `"`),
			},
			{
				Config: templateBuild(srv, name, "b", srv.BaseImage, "") + fmt.Sprintf(`
data "e2b_alias" "a" {
  template   = %q
  tag        = "prod"
  depends_on = [e2b_template_build.b]
}
`, name),
				ExpectError: errorText(`Template ` + name + ` has no tag "prod"`),
			},
		},
	})
}
