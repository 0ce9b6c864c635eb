package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/acctest"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
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

func TestAccAlias_planErrors(t *testing.T) {
	planErrors(t, map[string]struct{ config, err string }{
		"alias with a bad build_id": {`
resource "e2b_alias" "a" {
  template = "good"
  tag      = "prod"
  build_id = "latest"
}
`, `(?s)build_id`},
		"gate with both command and cmd": {`
resource "e2b_alias" "a" {
  template = "good"
  tag      = "prod"
  build_id = "1f0c6f2e-8f5b-4b8e-9a8e-1c2d3e4f5a6b"
  gate     = { command = "true", cmd = "/bin/true" }
}
`, `(?s)gate.*command.*cmd`},
		"gate without a command": {`
resource "e2b_alias" "a" {
  template = "good"
  tag      = "prod"
  build_id = "1f0c6f2e-8f5b-4b8e-9a8e-1c2d3e4f5a6b"
  gate     = { env = { A = "b" } }
}
`, `(?s)gate.*command.*cmd`},
		"gate args without cmd": {`
resource "e2b_alias" "a" {
  template = "good"
  tag      = "prod"
  build_id = "1f0c6f2e-8f5b-4b8e-9a8e-1c2d3e4f5a6b"
  gate     = { command = "echo", args = ["a"] }
}
`, `(?s)Invalid gate\.args.*gate\.args is set without cmd`},
		"gate timeout out of range": {`
resource "e2b_alias" "a" {
  template = "good"
  tag      = "prod"
  build_id = "1f0c6f2e-8f5b-4b8e-9a8e-1c2d3e4f5a6b"
  gate     = { command = "true", timeout = "25h" }
}
`, `(?s)Invalid gate\.timeout.*\d+:\s+gate\s+=.*gate\.timeout is "25h"; it must be a duration\s+such\s+as\s+30s\s+or\s+5m,\s+from\s+1s\s+to\s+24h`},
		"timeouts out of range": {`
resource "e2b_alias" "a" {
  template = "good"
  tag      = "prod"
  build_id = "1f0c6f2e-8f5b-4b8e-9a8e-1c2d3e4f5a6b"
  timeouts = { create = "0s" }
}
`, `(?s)timeouts\.create.*out of range`},
	})
}

// tagOn checks on the server that tag of template points at the build in the state.
func tagOn(api *e2bapi.Client, template, tag string, build *string) serverCheck {
	return func(ctx context.Context) error {
		tags, err := api.ListTags(ctx, template)
		if err != nil {
			return err
		}
		for _, t := range tags {
			if t.Tag == tag && t.BuildID == *build {
				return nil
			}
		}
		return fmt.Errorf("tag %s of %s is not on %s: %+v", tag, template, *build, tags)
	}
}

// twoBuilds is a template with two tagged builds, v1 and then v2, each writing its name
// to /opt/version.
func twoBuilds(srv *acctest.Server, name string) string {
	return srv.ProviderConfig() + fmt.Sprintf(`
resource "e2b_template" "t" {
  name = %[1]q
}

resource "e2b_template_build" "v1" {
  template_id = e2b_template.t.id
  from_image  = %[2]q
  steps       = [{ run = { command = "echo v1 > /opt/version", user = "root" } }]
  tags        = ["v1"]
}

resource "e2b_template_build" "v2" {
  template_id = e2b_template.t.id
  from_image  = %[2]q
  steps       = [{ run = { command = "echo v2 > /opt/version", user = "root" } }]
  tags        = ["v2"]
  depends_on  = [e2b_template_build.v1]
}
`, name, srv.DebianImage)
}

// defaultConfig is twoBuilds with the alias live on the default tag on the build named
// by build (with the HCL lines extra) and a sandbox started from the bare template name,
// as Sandbox.create("name") does.
func defaultConfig(srv *acctest.Server, name, build, extra string) string {
	return twoBuilds(srv, name) + fmt.Sprintf(`
resource "e2b_alias" "live" {
  template = e2b_template.t.name
  tag      = "default"
  build_id = e2b_template_build.%[1]s.build_id
%[2]s}

data "e2b_process" "bare_name" {
  template = e2b_template.t.name
  command  = "cat /opt/version"
  env      = { BUILD = e2b_alias.live.build_id }
}
`, build, extra)
}

// TestAccAlias_default promotes builds to default, which sandboxes started from the bare
// name run: create on v2 (the template's first build, v1, had it), move to v1, import;
// the plan warns of a build without tags of the template whichever of the two plans
// second; destroying the alias leaves default where it was.
func TestAccAlias_default(t *testing.T) {
	srv := localServer(t)
	api := testAPI(t, srv)
	name := uniqueName("acc-default")
	warnings := &planWarnings{}
	var v1, v2 string
	untagged := `
resource "e2b_template_build" "untagged" {
  template_id = e2b_template.t.id
  from_image  = %q
%s}
`
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: warnings.factories(),
		Steps: []tfresource.TestStep{
			{
				Config: defaultConfig(srv, name, "v2", ""),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("e2b_template_build.v1", tfjsonpath.New("build_id"), capture(&v1)),
					statecheck.ExpectKnownValue("e2b_template_build.v2", tfjsonpath.New("build_id"), capture(&v2)),
					statecheck.CompareValuePairs("e2b_alias.live", tfjsonpath.New("build_id"), "e2b_template_build.v2", tfjsonpath.New("build_id"), compare.ValuesSame()),
					statecheck.ExpectKnownValue("e2b_alias.live", tfjsonpath.New("id"), knownvalue.StringExact(name+":default")),
					statecheck.ExpectKnownValue("data.e2b_process.bare_name", tfjsonpath.New("stdout"), knownvalue.StringExact("v2\n")),
					tagOn(api, name, "default", &v2),
					warnings.none(),
				},
			},
			{
				Config: defaultConfig(srv, name, "v1", ""),
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("e2b_alias.live", plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.e2b_process.bare_name", tfjsonpath.New("stdout"), knownvalue.StringExact("v1\n")),
					tagOn(api, name, "default", &v1),
				},
			},
			{
				ResourceName:            "e2b_alias.live",
				ImportState:             true,
				ImportStateId:           name + ":default",
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"timeouts"},
			},
			{
				ResourceName:    "e2b_alias.live",
				ImportState:     true,
				ImportStateKind: tfresource.ImportBlockWithID,
				ImportStateId:   name + ":default",
			},
			{
				// The build plans first (the alias depends on it), the alias warns.
				PreConfig:          warnings.reset,
				Config:             defaultConfig(srv, name, "v1", "  depends_on = [e2b_template_build.untagged]\n") + fmt.Sprintf(untagged, srv.DebianImage, ""),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PostApplyPreRefresh: []plancheck.PlanCheck{
					warnings.only("e2b_alias", "A build takes the default tag before this alias"),
				}},
			},
			{
				// The alias plans first (the build depends on it), the build warns.
				PreConfig:          warnings.reset,
				Config:             defaultConfig(srv, name, "v1", "") + fmt.Sprintf(untagged, srv.DebianImage, "  depends_on = [e2b_alias.live]\n"),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PostApplyPreRefresh: []plancheck.PlanCheck{
					warnings.only("e2b_template_build", "Build takes the default tag before e2b_alias"),
				}},
			},
			{
				// Without the alias: default stays on v1, which the bare name still runs.
				Config: twoBuilds(srv, name) + `
data "e2b_process" "bare_name" {
  template = e2b_template.t.name
  command  = "cat /opt/version"
}
`,
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("e2b_alias.live", plancheck.ResourceActionDestroy),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.e2b_process.bare_name", tfjsonpath.New("stdout"), knownvalue.StringExact("v1\n")),
					tagOn(api, name, "default", &v1),
				},
			},
		},
	})
}

// liveSandboxes are the running sandboxes of the template named name (GET /sandboxes).
func liveSandboxes(t *testing.T, srv *acctest.Server, name string) []string {
	t.Helper()
	tpl, err := testAPI(t, srv).GetTemplateByAlias(t.Context(), name)
	acctest.Must(t, err)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.APIURL+"/sandboxes", nil)
	acctest.Must(t, err)
	req.Header.Set("X-API-Key", srv.APIKey)
	resp, err := http.DefaultClient.Do(req)
	acctest.Must(t, err)
	defer resp.Body.Close()
	var listed []e2b.ListedSandbox
	acctest.Must(t, json.NewDecoder(resp.Body).Decode(&listed))
	var live []string
	for _, sb := range listed {
		if sb.TemplateID == tpl.TemplateID {
			live = append(live, sb.SandboxID)
		}
	}
	return live
}

// gateConfig is twoBuilds with the alias prod on the build named by build behind the HCL
// lines gate.
func gateConfig(srv *acctest.Server, name, build, gate string) string {
	return twoBuilds(srv, name) + fmt.Sprintf(`
resource "e2b_alias" "prod" {
  template = e2b_template.t.name
  tag      = "prod"
  build_id = e2b_template_build.%s.build_id
%s}
`, build, gate)
}

// smokeGate passes on v1 only, telling on stderr why it fails.
const smokeGate = `
  gate = {
    command = "test \"$(cat /opt/version)\" = \"$WANT\" || { echo \"smoke test failed on $(cat /opt/version)\" >&2; exit 3; }"
    env     = { WANT = "v1" }
    timeout = "2m"
  }
`

// TestAccAlias_gate runs the gate once per move, in a sandbox of the new build, counted on
// the server by the template's spawn count: passing, the tag moves; failing, the error
// shows its stderr and the tag stays; plans, refreshes and a change of the gate alone run
// nothing; a gate outliving timeouts.update stops the move.
func TestAccAlias_gate(t *testing.T) {
	srv := localServer(t)
	api := testAPI(t, srv)
	name := uniqueName("acc-gate")
	var v1 string
	// spawned checks how many sandboxes were started from the template so far.
	spawned := func(want int64) serverCheck {
		return func(ctx context.Context) error {
			a, err := api.GetTemplateByAlias(ctx, name)
			if err != nil {
				return err
			}
			tpl, err := api.GetTemplate(ctx, a.TemplateID)
			if err != nil {
				return err
			}
			if tpl.SpawnCount != want {
				return fmt.Errorf("%d sandboxes started from %s, want %d", tpl.SpawnCount, name, want)
			}
			return nil
		}
	}
	// still checks between steps that the tag stayed on v1, how many sandboxes started
	// and that none of them is left running.
	still := func(sandboxes int64) func() {
		return func() {
			acctest.Must(t, tagOn(api, name, "prod", &v1)(t.Context()))
			acctest.Must(t, spawned(sandboxes)(t.Context()))
			if live := liveSandboxes(t, srv, name); len(live) != 0 {
				t.Errorf("gate sandboxes left running: %v", live)
			}
		}
	}
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{
			{
				Config: gateConfig(srv, name, "v1", smokeGate),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("e2b_template_build.v1", tfjsonpath.New("build_id"), capture(&v1)),
					tagOn(api, name, "prod", &v1),
					spawned(1),
				},
			},
			{
				Config:      gateConfig(srv, name, "v2", smokeGate),
				ExpectError: regexp.MustCompile(`(?s)Gate failed.*exited with code 3.*tag "prod" was not moved.*smoke test failed on v2`),
			},
			{
				PreConfig:          still(2),
				Config:             gateConfig(srv, name, "v2", smokeGate),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
			{
				PreConfig:          still(2),
				RefreshState:       true,
				ExpectNonEmptyPlan: true,
			},
			{
				// Only the gate changes: recorded, not run (it would fail on v1).
				PreConfig: still(2),
				Config: gateConfig(srv, name, "v1", `
  gate = {
    cmd  = "/bin/false"
    args = ["never run"]
  }
`),
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("e2b_alias.prod", plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("e2b_alias.prod", tfjsonpath.New("gate").AtMapKey("cmd"), knownvalue.StringExact("/bin/false")),
					tagOn(api, name, "prod", &v1),
					spawned(2),
				},
			},
			{
				Config: gateConfig(srv, name, "v2", `
  gate     = { command = "sleep 600", timeout = "15m" }
  timeouts = { update = "20s" }
`),
				ExpectError: regexp.MustCompile(`(?s)Tag not moved in time.*timeouts\.update \(20s\) elapsed`),
			},
			{
				PreConfig: still(3),
				Config:    gateConfig(srv, name, "v1", ""),
				ConfigStateChecks: []statecheck.StateCheck{
					tagOn(api, name, "prod", &v1),
					spawned(3),
				},
			},
		},
	})
}

// failedTagConfig is a template with one build, the tag prod on it through an e2b_alias,
// and extra (data sources reading prod).
func failedTagConfig(srv *acctest.Server, name, extra string) string {
	return templateBuild(srv, name, "v1", srv.BaseImage, `  steps = [{ run = { command = "echo v1" } }]`) + `
resource "e2b_alias" "prod" {
  template = e2b_template.t.name
  tag      = "prod"
  build_id = e2b_template_build.v1.build_id
}
` + extra
}

// TestAccAlias_tagOnFailedBuild registers a build under the alias's tag outside Terraform
// and lets it fail: E2B lists the tag at the failed build while sandboxes keep running the
// alias's build, so the alias shows no change, and the data sources, which cannot name the
// build a sandbox runs, say so instead of naming the failed build.
func TestAccAlias_tagOnFailedBuild(t *testing.T) {
	srv := localServer(t)
	name := uniqueName("acc-failed-tag")
	var templateID string
	aliasData := `
data "e2b_alias" "prod" {
  template   = e2b_template.t.name
  tag        = "prod"
  depends_on = [e2b_alias.prod]
}
`
	templateData := fmt.Sprintf(`
data "e2b_template" "prod" {
  template   = "%s:prod"
  depends_on = [e2b_alias.prod]
}
`, name)
	moving := errorText(`Until it is ready, sandboxes started from ` + name + `:prod run an earlier ready build`)
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{
			{
				Config: failedTagConfig(srv, name, aliasData+templateData),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("e2b_template.t", tfjsonpath.New("id"), capture(&templateID)),
					statecheck.CompareValuePairs("data.e2b_alias.prod", tfjsonpath.New("build_id"), "e2b_template_build.v1", tfjsonpath.New("build_id"), compare.ValuesSame()),
					statecheck.CompareValuePairs("data.e2b_template.prod", tfjsonpath.New("build_id"), "e2b_template_build.v1", tfjsonpath.New("build_id"), compare.ValuesSame()),
					statecheck.ExpectKnownValue("data.e2b_template.prod", tfjsonpath.New("build_status"), knownvalue.StringExact("ready")),
				},
			},
			{
				PreConfig: func() {
					if _, failed := outsideOf(t, srv).build(&templateID, srv.BaseImage, "exit 3", "prod"); !failed {
						t.Fatal("the build under prod did not fail")
					}
				},
				Config:   failedTagConfig(srv, name, ""),
				PlanOnly: true, // the alias still holds: no change
			},
			{
				Config:      failedTagConfig(srv, name, aliasData),
				ExpectError: moving,
			},
			{
				Config:      failedTagConfig(srv, name, templateData),
				ExpectError: moving,
			},
		},
	})
}

// TestAccAlias_identity sets the alias's identity at create and imports it by identity.
func TestAccAlias_identity(t *testing.T) {
	srv := localServer(t)
	name := uniqueName("acc-alias-identity")
	config := templateBuild(srv, name, "b", srv.BaseImage, `  tags = ["v1"]`) + `
resource "e2b_alias" "prod" {
  template = e2b_template.t.name
  tag      = "prod"
  build_id = e2b_template_build.b.build_id
}
`
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_12_0)},
		Steps: []tfresource.TestStep{
			{
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectIdentity("e2b_alias.prod", map[string]knownvalue.Check{
						"template": knownvalue.StringExact(name),
						"tag":      knownvalue.StringExact("prod"),
					}),
				},
			},
			{
				ResourceName:    "e2b_alias.prod",
				ImportState:     true,
				ImportStateKind: tfresource.ImportBlockWithResourceIdentity,
			},
		},
	})
}

// TestAccAlias_buildOfAnotherTemplate points an alias at a build of another template
// that exists: the plan fails on build_id before anything moves.
func TestAccAlias_buildOfAnotherTemplate(t *testing.T) {
	srv := localServer(t)
	name := uniqueName("acc-alias-other")
	builds := srv.ProviderConfig() + fmt.Sprintf(`
resource "e2b_template" "a" {
  name = "%[1]s-a"
}

resource "e2b_template" "b" {
  name = "%[1]s-b"
}

resource "e2b_template_build" "a" {
  template_id = e2b_template.a.id
  from_image  = %[2]q
}

resource "e2b_template_build" "b" {
  template_id = e2b_template.b.id
  from_image  = %[2]q
}
`, name, srv.BaseImage)
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{
			{Config: builds},
			{
				Config: builds + `
resource "e2b_alias" "prod" {
  template = e2b_template.a.name
  tag      = "prod"
  build_id = e2b_template_build.b.build_id
}
`,
				ExpectError: regexp.MustCompile(`(?s)Build not of this template.*has no build.*build_id`),
			},
		},
	})
}
