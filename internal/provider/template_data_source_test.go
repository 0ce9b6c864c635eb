package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/acctest"
)

// templateLookupConfig is a template with one build and data sources looking it
// up by name, by name:tag, by ID and by name:<build ID> (lookups is false before the tag exists).
func templateLookupConfig(srv *acctest.Server, name string, lookups bool) string {
	config := templateBuild(srv, name, "b", srv.BaseImage, `  cpu_count = 1
  memory_mb = 256`)
	if !lookups {
		return config
	}
	return config + fmt.Sprintf(`
data "e2b_template" "by_name" {
  template   = %[1]q
  depends_on = [e2b_template_build.b]
}

data "e2b_template" "by_tag" {
  template   = "%[1]s:prod"
  depends_on = [e2b_template_build.b]
}

data "e2b_template" "by_id" {
  template   = e2b_template.t.id
  depends_on = [e2b_template_build.b]
}

data "e2b_template" "by_build" {
  template = "%[1]s:${e2b_template_build.b.build_id}"
}
`, name)
}

func TestAccTemplateDataSource_lookup(t *testing.T) {
	srv := localServer(t)
	api := testAPI(t, srv)
	name := uniqueName("acc-tpl-ds")
	same := func(address string) []statecheck.StateCheck {
		return []statecheck.StateCheck{
			statecheck.CompareValuePairs(address, tfjsonpath.New("id"), "e2b_template.t", tfjsonpath.New("id"), compare.ValuesSame()),
			statecheck.CompareValuePairs(address, tfjsonpath.New("build_id"), "e2b_template_build.b", tfjsonpath.New("build_id"), compare.ValuesSame()),
			statecheck.ExpectKnownValue(address, tfjsonpath.New("name"), knownvalue.StringExact(name)),
			statecheck.ExpectKnownValue(address, tfjsonpath.New("public"), knownvalue.Bool(false)),
			statecheck.ExpectKnownValue(address, tfjsonpath.New("build_status"), knownvalue.StringExact("ready")),
			statecheck.ExpectKnownValue(address, tfjsonpath.New("cpu_count"), knownvalue.Int64Exact(1)),
			statecheck.ExpectKnownValue(address, tfjsonpath.New("memory_mb"), knownvalue.Int64Exact(256)),
			statecheck.ExpectKnownValue(address, tfjsonpath.New("created_at"), knownvalue.StringRegexp(rfc3339Pattern)),
			statecheck.ExpectKnownValue(address, tfjsonpath.New("updated_at"), knownvalue.StringRegexp(rfc3339Pattern)),
			statecheck.ExpectKnownValue(address, tfjsonpath.New("builds"), knownvalue.ListExact([]knownvalue.Check{
				knownvalue.ObjectExact(map[string]knownvalue.Check{
					"build_id":    knownvalue.NotNull(),
					"status":      knownvalue.StringExact("ready"),
					"created_at":  knownvalue.StringRegexp(rfc3339Pattern),
					"finished_at": knownvalue.StringRegexp(rfc3339Pattern),
					"tags":        knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("default"), knownvalue.StringExact("prod")}),
				}),
				// The build E2B registered with the template, superseded by b
				// (another size), newest first.
				knownvalue.ObjectExact(map[string]knownvalue.Check{
					"build_id":    knownvalue.NotNull(),
					"status":      knownvalue.StringExact("error"),
					"created_at":  knownvalue.StringRegexp(rfc3339Pattern),
					"finished_at": knownvalue.StringRegexp(rfc3339Pattern),
					"tags":        knownvalue.ListSizeExact(0),
				}),
			})),
			statecheck.CompareValuePairs(address, tfjsonpath.New("builds").AtSliceIndex(0).AtMapKey("build_id"),
				"e2b_template_build.b", tfjsonpath.New("build_id"), compare.ValuesSame()),
		}
	}
	var checks []statecheck.StateCheck
	for _, address := range []string{"data.e2b_template.by_name", "data.e2b_template.by_tag", "data.e2b_template.by_id", "data.e2b_template.by_build"} {
		checks = append(checks, same(address)...)
	}
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{
			{Config: templateLookupConfig(srv, name, false)},
			{
				PreConfig: func() {
					_, err := api.AssignTags(context.Background(), name, []string{"prod"})
					acctest.Must(t, err)
				},
				Config:            templateLookupConfig(srv, name, true),
				ConfigStateChecks: checks,
			},
		},
	})
}

var rfc3339Pattern = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`)

// TestAccTemplateDataSource_missing looks up a template and a tag that do not exist.
func TestAccTemplateDataSource_missing(t *testing.T) {
	srv := localServer(t)
	name := uniqueName("acc-tpl-missing")
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{
			{
				Config: srv.ProviderConfig() + fmt.Sprintf(`
data "e2b_template" "t" {
  template = %q
}
`, name),
				ExpectError: errorText(`No template has the ID or name "` + name + `", or it belongs to another team and is not public. Check the spelling and that the API key is of the team that owns it`),
			},
			{
				Config: templateBuild(srv, name, "b", srv.BaseImage, "") + fmt.Sprintf(`
data "e2b_template" "t" {
  template   = "%s:nope"
  depends_on = [e2b_template_build.b]
}
`, name),
				ExpectError: errorText(`Template ` + name + ` has no tag "nope". A tag resolves to the newest ready build it was given. ` +
					`To see which build has which tag, read this data source with template = "` + name + `" (no tag)`),
			},
		},
	})
}

// errorText matches the words of text however Terraform wraps them.
func errorText(text string) *regexp.Regexp {
	return regexp.MustCompile(`(?s)` + strings.Join(strings.Fields(regexp.QuoteMeta(text)), `\s+`))
}

// TestAccTemplateDataSource_noReadyBuild looks a template up by name before its first
// build: the build E2B registered with the template carries the default tag but is not
// ready, so no build serves the name and build_id is null.
func TestAccTemplateDataSource_noReadyBuild(t *testing.T) {
	srv := localServer(t)
	name := uniqueName("acc-tpl-new")
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{{
			Config: srv.ProviderConfig() + fmt.Sprintf(`
resource "e2b_template" "t" {
  name = %q
}

data "e2b_template" "t" {
  template = e2b_template.t.name
}
`, name),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.CompareValuePairs("data.e2b_template.t", tfjsonpath.New("id"), "e2b_template.t", tfjsonpath.New("id"), compare.ValuesSame()),
				statecheck.ExpectKnownValue("data.e2b_template.t", tfjsonpath.New("build_id"), knownvalue.Null()),
			},
		}},
	})
}
