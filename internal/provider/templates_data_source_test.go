package provider

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
)

// TestAccTemplatesDataSource_filters lists a team's templates by name prefix and public:
// one made outside Terraform and public, one built here with a tag.
func TestAccTemplatesDataSource_filters(t *testing.T) {
	srv := localServer(t)
	api := testAPI(t, srv)
	prefix := uniqueName("acc-templates")
	publicID := builtTemplate(t, api, prefix+"-public")
	public := true
	_, err := api.UpdateTemplate(t.Context(), publicID, e2b.TemplateUpdateRequest{Public: &public})
	if err != nil {
		t.Fatal(err)
	}
	config := templateBuild(srv, prefix+"-built", "b", srv.BaseImage, `  tags = ["v1"]`) + fmt.Sprintf(`
data "e2b_templates" "all" {
  name_prefix = %[1]q
  depends_on  = [e2b_template_build.b]
}

data "e2b_templates" "public" {
  name_prefix = %[1]q
  public      = true
  depends_on  = [e2b_template_build.b]
}

data "e2b_templates" "private" {
  name_prefix = %[1]q
  public      = false
  depends_on  = [e2b_template_build.b]
}
`, prefix)
	listed := func(name, id string, public bool, defaultBuild knownvalue.Check, tags ...string) knownvalue.Check {
		tagChecks := []knownvalue.Check{}
		for _, tag := range tags {
			tagChecks = append(tagChecks, knownvalue.StringExact(tag))
		}
		var idCheck knownvalue.Check = knownvalue.NotNull()
		if id != "" {
			idCheck = knownvalue.StringExact(id)
		}
		return knownvalue.ObjectExact(map[string]knownvalue.Check{
			"id": idCheck, "name": knownvalue.StringExact(name), "public": knownvalue.Bool(public),
			"names":            knownvalue.ListSizeExact(1),
			"default_build_id": defaultBuild,
			"tags":             knownvalue.ListExact(tagChecks),
		})
	}
	builtOne := listed(prefix+"-built", "", false, knownvalue.NotNull(), "default", "v1")
	// A template registered without a build has its default tag on the build registered
	// with it, which never runs: E2B's tag list names it whatever its status.
	publicOne := listed(prefix+"-public", publicID, true, knownvalue.NotNull(), "default")
	templates := tfjsonpath.New("templates")
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{{
			Config: config,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("data.e2b_templates.all", templates, knownvalue.ListExact([]knownvalue.Check{publicOne, builtOne})),
				statecheck.ExpectKnownValue("data.e2b_templates.public", templates, knownvalue.ListExact([]knownvalue.Check{publicOne})),
				statecheck.ExpectKnownValue("data.e2b_templates.private", templates, knownvalue.ListExact([]knownvalue.Check{builtOne})),
				statecheck.CompareValuePairs("data.e2b_templates.private", templates.AtSliceIndex(0).AtMapKey("id"),
					"e2b_template.t", tfjsonpath.New("id"), compare.ValuesSame()),
				statecheck.CompareValuePairs("data.e2b_templates.private", templates.AtSliceIndex(0).AtMapKey("default_build_id"),
					"e2b_template_build.b", tfjsonpath.New("build_id"), compare.ValuesSame()),
			},
		}},
	})
}
