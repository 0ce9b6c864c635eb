package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-version"
	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/acctest"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/openapitest"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/steps"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/templatebuild"
)

// What happens outside Terraform: objects deleted, tags moved, builds that failed, and
// then plan, apply and destroy, on every CLI (scripts select these tests with -run
// '_outside'), against the local server through E2B's OpenAPI spec (outsideServer). Each test's last step destroys right after a change outside, and
// terraform-plugin-testing checks that every apply leaves an empty plan.

// outside changes objects on the local server as a user or another tool would. Its
// methods return PreConfig functions; pointers are read when the step runs, after
// earlier steps captured them.
type outside struct {
	t   *testing.T
	api *e2bapi.Client
}

// outsideServer is the shared local server behind a proxy that checks every API request
// and answer against E2B's OpenAPI spec (openapitest), so that the outside cases run
// against answers E2B could give, the 404s of deleted objects included.
func outsideServer(t *testing.T) *acctest.Server {
	t.Helper()
	srv := localServer(t)
	target, err := url.Parse(srv.APIURL)
	acctest.Must(t, err)
	checked := httptest.NewServer(openapitest.E2B(t).Middleware(t, httputil.NewSingleHostReverseProxy(target),
		openapitest.SkipRequests(func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/_local/") })))
	t.Cleanup(checked.Close)
	proxied := *srv
	proxied.APIURL = checked.URL
	return &proxied
}

func outsideOf(t *testing.T, srv *acctest.Server) outside {
	return outside{t: t, api: testAPI(t, srv)}
}

// deleteTemplate deletes the template *id; its builds and tags go with it.
func (o outside) deleteTemplate(id *string) func() {
	return func() { acctest.Must(o.t, o.api.DeleteTemplate(context.Background(), *id)) }
}

// deleteTag deletes tag of template.
func (o outside) deleteTag(template, tag string) func() {
	return func() { acctest.Must(o.t, o.api.DeleteTags(context.Background(), template, []string{tag})) }
}

// moveTag points tag of template at the build *buildID.
func (o outside) moveTag(template, tag string, buildID *string) func() {
	return func() {
		_, err := o.api.AssignTags(context.Background(), template+":"+*buildID, []string{tag})
		acctest.Must(o.t, err)
	}
}

// build runs a build of the template *templateID from image with tags and one RUN step
// of command, to its end, and returns its ID and whether it failed.
func (o outside) build(templateID *string, image, command string, tags ...string) (buildID string, failed bool) {
	o.t.Helper()
	b, err := templatebuild.Plan(context.Background(), templatebuild.Spec{TemplateID: *templateID, FromImage: image,
		Tags: tags, Steps: []templatebuild.Step{{Step: steps.NewRun(steps.RunArgs{Command: command})}}}, tflogLogger{})
	acctest.Must(o.t, err)
	res, err := templatebuild.NewRunner(o.api).Run(context.Background(), b, templatebuild.Options{})
	var failedErr *templatebuild.FailedError
	if err != nil && !errors.As(err, &failedErr) {
		o.t.Fatalf("build of %s outside Terraform: %v", *templateID, err)
	}
	return res.BuildID, err != nil
}

// buildsFinished waits until the template named name has a failed build and no build in
// progress.
func (o outside) buildsFinished(name string) func() {
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		for {
			alias, err := o.api.GetTemplateByAlias(ctx, name)
			acctest.Must(o.t, err)
			tpl, err := o.api.GetTemplate(ctx, alias.TemplateID)
			acctest.Must(o.t, err)
			failed, running := false, false
			for _, b := range tpl.Builds {
				failed = failed || b.Status == e2b.BuildError
				running = running || b.Status == e2b.BuildBuilding
			}
			if failed && !running {
				return
			}
			select {
			case <-ctx.Done():
				o.t.Fatalf("builds of %s still running or none failed: %+v", name, tpl.Builds)
			case <-time.After(time.Second):
			}
		}
	}
}

// identityOnCLIs is statecheck.ExpectIdentity where the CLI keeps identities (Terraform
// and OpenTofu 1.12 and later); older CLIs store none, so there it checks nothing and
// says so, while the rest of the test runs on every CLI.
func identityOnCLIs(t *testing.T, address string, identity map[string]knownvalue.Check) statecheck.StateCheck {
	return cliVersionCheck{t: t, check: statecheck.ExpectIdentity(address, identity)}
}

type cliVersionCheck struct {
	t     *testing.T
	check statecheck.StateCheck
}

func (c cliVersionCheck) CheckState(ctx context.Context, req statecheck.CheckStateRequest, resp *statecheck.CheckStateResponse) {
	if req.State == nil {
		resp.Error = errors.New("no state to check the identity in")
		return
	}
	v, err := version.NewVersion(req.State.TerraformVersion)
	if err != nil {
		resp.Error = fmt.Errorf("the CLI's version %q: %w", req.State.TerraformVersion, err)
		return
	}
	if v.Core().LessThan(tfversion.Version1_12_0) {
		c.t.Logf("identity not checked: the CLI (%s) keeps no resource identities before 1.12", v)
		return
	}
	c.check.CheckState(ctx, req, resp)
}

// differs is a value check that the value is a string other than *old.
func differs(old *string) knownvalue.Check {
	return stringValue{"another than the one before", func(s string) error {
		if s == *old {
			return fmt.Errorf("still %q", s)
		}
		return nil
	}}
}

// outsideSteps are the steps of one change outside Terraform: config applied (first
// checks), the change made, then a plan of actions whose apply converges (then checks),
// and the change made again (again, or change when nil) before destroy.
func outsideSteps(config string, first []statecheck.StateCheck, change, again func(), actions map[string]plancheck.ResourceActionType, then []statecheck.StateCheck) []tfresource.TestStep {
	if again == nil {
		again = change
	}
	var planned []plancheck.PlanCheck
	for address, action := range actions {
		planned = append(planned, plancheck.ExpectResourceAction(address, action))
	}
	return []tfresource.TestStep{
		{Config: config, ConfigStateChecks: first},
		{
			PreConfig:         change,
			Config:            config,
			ConfigPlanChecks:  tfresource.ConfigPlanChecks{PreApply: planned},
			ConfigStateChecks: then,
		},
		{PreConfig: again, Config: config, Destroy: true},
	}
}

// TestAccTemplate_outsideDeleted deletes the template outside Terraform: the plan creates
// it again, the apply converges with a new ID and identity, and destroy after a second
// deletion finds nothing to destroy.
func TestAccTemplate_outsideDeleted(t *testing.T) {
	srv := outsideServer(t)
	out := outsideOf(t, srv)
	var id string
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: outsideSteps(templateConfig(srv.ProviderConfig(), uniqueName("acc-outside-template"), false),
			[]statecheck.StateCheck{statecheck.ExpectKnownValue("e2b_template.t", tfjsonpath.New("id"), capture(&id))},
			out.deleteTemplate(&id), nil,
			map[string]plancheck.ResourceActionType{"e2b_template.t": plancheck.ResourceActionCreate},
			[]statecheck.StateCheck{
				statecheck.ExpectKnownValue("e2b_template.t", tfjsonpath.New("id"), differs(&id)),
				identityOnCLIs(t, "e2b_template.t", map[string]knownvalue.Check{"id": differs(&id)}),
				statecheck.ExpectKnownValue("e2b_template.t", tfjsonpath.New("id"), capture(&id)),
			}),
	})
}

// aliasOutsideConfig is a template, a build of it and the alias prod on the build.
func aliasOutsideConfig(srv *acctest.Server, name string) string {
	return templateBuild(srv, name, "b", srv.BaseImage, "") + `
resource "e2b_alias" "prod" {
  template = e2b_template.t.name
  tag      = "prod"
  build_id = e2b_template_build.b.build_id
}
`
}

// TestAccAlias_outsideTagDeleted deletes the alias's tag outside Terraform: the plan
// creates the alias again, the apply puts the tag back, and destroy after a second
// deletion finds no tag to remove.
func TestAccAlias_outsideTagDeleted(t *testing.T) {
	srv := outsideServer(t)
	out := outsideOf(t, srv)
	name := uniqueName("acc-outside-tag")
	var buildID string
	aliasIdentity := identityOnCLIs(t, "e2b_alias.prod", map[string]knownvalue.Check{
		"template": knownvalue.StringExact(name), "tag": knownvalue.StringExact("prod"),
	})
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: outsideSteps(aliasOutsideConfig(srv, name),
			[]statecheck.StateCheck{
				statecheck.ExpectKnownValue("e2b_template_build.b", tfjsonpath.New("build_id"), capture(&buildID)),
				aliasIdentity,
			},
			out.deleteTag(name, "prod"), nil,
			map[string]plancheck.ResourceActionType{
				"e2b_alias.prod":       plancheck.ResourceActionCreate,
				"e2b_template_build.b": plancheck.ResourceActionNoop,
			},
			[]statecheck.StateCheck{tagOn(out.api, name, "prod", &buildID), aliasIdentity}),
	})
}

// TestAccAlias_outsideTagMoved moves the alias's tag outside Terraform to another build:
// the plan shows the move back as a change (drift), the apply makes it, and destroy after
// a second move removes the tag.
func TestAccAlias_outsideTagMoved(t *testing.T) {
	srv := outsideServer(t)
	out := outsideOf(t, srv)
	name := uniqueName("acc-outside-move")
	var templateID, buildID, other string
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: outsideSteps(aliasOutsideConfig(srv, name),
			[]statecheck.StateCheck{
				statecheck.ExpectKnownValue("e2b_template.t", tfjsonpath.New("id"), capture(&templateID)),
				statecheck.ExpectKnownValue("e2b_template_build.b", tfjsonpath.New("build_id"), capture(&buildID)),
			},
			func() {
				var failed bool
				if other, failed = out.build(&templateID, srv.BaseImage, "true", "other"); failed {
					t.Fatal("the other build failed")
				}
				out.moveTag(name, "prod", &other)()
			},
			out.moveTag(name, "prod", &other),
			map[string]plancheck.ResourceActionType{"e2b_alias.prod": plancheck.ResourceActionUpdate},
			[]statecheck.StateCheck{
				tagOn(out.api, name, "prod", &buildID),
				identityOnCLIs(t, "e2b_alias.prod", map[string]knownvalue.Check{
					"template": knownvalue.StringExact(name), "tag": knownvalue.StringExact("prod"),
				}),
			}),
	})
}

// TestAccAlias_outsideTemplateDeleted deletes the template under the alias outside
// Terraform: the plan creates the template, its build and the alias again.
func TestAccAlias_outsideTemplateDeleted(t *testing.T) {
	srv := outsideServer(t)
	out := outsideOf(t, srv)
	name := uniqueName("acc-outside-alias-template")
	var templateID, buildID string
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: outsideSteps(aliasOutsideConfig(srv, name),
			[]statecheck.StateCheck{statecheck.ExpectKnownValue("e2b_template.t", tfjsonpath.New("id"), capture(&templateID))},
			out.deleteTemplate(&templateID), nil,
			map[string]plancheck.ResourceActionType{
				"e2b_template.t":       plancheck.ResourceActionCreate,
				"e2b_template_build.b": plancheck.ResourceActionCreate,
				"e2b_alias.prod":       plancheck.ResourceActionCreate,
			},
			[]statecheck.StateCheck{
				statecheck.ExpectKnownValue("e2b_template.t", tfjsonpath.New("id"), capture(&templateID)),
				statecheck.ExpectKnownValue("e2b_template_build.b", tfjsonpath.New("build_id"), capture(&buildID)),
				tagOn(out.api, name, "prod", &buildID),
			}),
	})
}

// TestAccTemplateBuild_outsideTemplateDeleted deletes the template of a ready build
// outside Terraform, which takes the build with it: the plan creates both again.
func TestAccTemplateBuild_outsideTemplateDeleted(t *testing.T) {
	srv := outsideServer(t)
	out := outsideOf(t, srv)
	var templateID, buildID string
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: outsideSteps(templateBuild(srv, uniqueName("acc-outside-build"), "b", srv.BaseImage, ""),
			[]statecheck.StateCheck{
				statecheck.ExpectKnownValue("e2b_template.t", tfjsonpath.New("id"), capture(&templateID)),
				statecheck.ExpectKnownValue("e2b_template_build.b", tfjsonpath.New("build_id"), capture(&buildID)),
			},
			out.deleteTemplate(&templateID), nil,
			map[string]plancheck.ResourceActionType{
				"e2b_template.t":       plancheck.ResourceActionCreate,
				"e2b_template_build.b": plancheck.ResourceActionCreate,
			},
			[]statecheck.StateCheck{
				statecheck.ExpectKnownValue("e2b_template_build.b", tfjsonpath.New("status"), knownvalue.StringExact(e2b.BuildReady)),
				statecheck.ExpectKnownValue("e2b_template_build.b", tfjsonpath.New("build_id"), differs(&buildID)),
				identityOnCLIs(t, "e2b_template_build.b", map[string]knownvalue.Check{
					"template_id": differs(&templateID), "build_id": differs(&buildID),
				}),
				statecheck.ExpectKnownValue("e2b_template.t", tfjsonpath.New("id"), capture(&templateID)),
			}),
	})
}

// failingThenFixed is a build whose RUN step fails, or, fixed, succeeds.
func failingThenFixed(srv *acctest.Server, name string, fixed bool) string {
	command := "echo broken; exit 3"
	if fixed {
		command = "echo fixed"
	}
	return templateBuild(srv, name, "b", srv.BaseImage, fmt.Sprintf(`  steps = [{ run = { command = %q } }]`, command))
}

// TestAccTemplateBuild_outsideFailedThenFixed applies a build whose RUN step fails, then
// the fixed configuration: the failed build leaves the state at refresh, the apply builds
// the fixed one and the next plan is empty; after a second failure, destroy works.
func TestAccTemplateBuild_outsideFailedThenFixed(t *testing.T) {
	srv := outsideServer(t)
	name := uniqueName("acc-outside-failed")
	failed := regexp.MustCompile(`(?s)Build failed.*exit 3`)
	var templateID string
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{
			{
				Config:      failingThenFixed(srv, name, false),
				ExpectError: failed,
			},
			{
				Config: failingThenFixed(srv, name, true),
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("e2b_template.t", plancheck.ResourceActionNoop),
					plancheck.ExpectResourceAction("e2b_template_build.b", plancheck.ResourceActionCreate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("e2b_template.t", tfjsonpath.New("id"), capture(&templateID)),
					statecheck.ExpectKnownValue("e2b_template_build.b", tfjsonpath.New("status"), knownvalue.StringExact(e2b.BuildReady)),
					identityOnCLIs(t, "e2b_template_build.b", map[string]knownvalue.Check{
						"template_id": equalTo("the template's ID", &templateID), "build_id": knownvalue.NotNull(),
					}),
				},
			},
			{
				Config:      failingThenFixed(srv, name, false),
				ExpectError: failed,
			},
			{
				Config:  failingThenFixed(srv, name, false),
				Destroy: true,
			},
		},
	})
}

// TestAccTemplateBuild_outsideFailedWhileBuilding leaves a build running (its apply
// stopped waiting), which then fails on the server while the state holds it as building:
// the next plan creates the build again rather than replacing it, the apply converges,
// and destroy after a second such failure works.
func TestAccTemplateBuild_outsideFailedWhileBuilding(t *testing.T) {
	srv := outsideServer(t)
	out := outsideOf(t, srv)
	name := uniqueName("acc-outside-building")
	slowFailing := templateBuild(srv, name, "b", srv.BaseImage, fmt.Sprintf(`  steps    = [{ run = { command = "sleep 12; exit 3 # %s" } }]
  timeouts = { create = "2s" }`, name))
	stillRunning := regexp.MustCompile(`(?s)Build still running`)
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{
			{
				Config:      slowFailing,
				ExpectError: stillRunning,
			},
			{
				PreConfig: out.buildsFinished(name),
				Config:    failingThenFixed(srv, name, true),
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("e2b_template_build.b", plancheck.ResourceActionCreate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("e2b_template_build.b", tfjsonpath.New("status"), knownvalue.StringExact(e2b.BuildReady)),
				},
			},
			{
				Config:      slowFailing,
				ExpectError: stillRunning,
			},
			{
				PreConfig: out.buildsFinished(name),
				Config:    slowFailing,
				Destroy:   true,
			},
		},
	})
}
