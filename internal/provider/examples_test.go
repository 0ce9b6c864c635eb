package provider

// The examples under examples/, applied as users apply them.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/config"
	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/acctest"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
)

// copyDir copies the regular files and directories below src to dst, with their
// permissions; then, when not nil, calls after with each path it wrote.
func copyDir(t *testing.T, src, dst string, after func(path string, dir bool) error) {
	t.Helper()
	acctest.Must(t, filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			err = os.MkdirAll(target, 0o755)
		} else {
			var info os.FileInfo
			var b []byte
			if info, err = d.Info(); err == nil {
				if b, err = os.ReadFile(p); err == nil {
					err = os.WriteFile(target, b, info.Mode().Perm())
				}
			}
		}
		if err != nil || after == nil {
			return err
		}
		return after(target, d.IsDir())
	}))
}

// TestAccExamplePromotion_releaseModule applies the release module of examples/promotion
// as it is written (the provider configured through the E2B_* environment
// variables): a passing smoke test (the alias's gate) moves :prod to the
// candidate; a candidate whose smoke test fails stops the apply with the test's
// stderr and :prod stays on the build that passed; planning runs no smoke test.
func TestAccExamplePromotion_releaseModule(t *testing.T) {
	srv := localServer(t)
	t.Setenv(EnvAPIURL, srv.APIURL)
	t.Setenv(EnvAPIKey, srv.APIKey)
	t.Setenv(EnvSandboxURL, srv.SandboxURL)
	// The module requires e2b-terraform/e2b, the provider's registry address.
	t.Setenv("TF_ACC_PROVIDER_NAMESPACE", "e2b-terraform")
	api := testAPI(t, srv)
	root, err := acctest.ModuleRoot()
	acctest.Must(t, err)
	app := filepath.Join(t.TempDir(), "app")
	copyDir(t, filepath.Join(root, "examples", "promotion", "app"), app, nil)
	name := uniqueName("acc-promo")
	vars := config.Variables{
		"name":            config.StringVariable(name),
		"base_image":      config.StringVariable(srv.DebianImage),
		"context":         config.StringVariable(app),
		"expected_output": config.StringVariable("smoke test passed"),
	}
	module := config.StaticDirectory(filepath.Join(root, "examples", "promotion", "modules", "release"))
	var passed, templateID string
	var spawned int64
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{
			{
				ConfigDirectory: module,
				ConfigVariables: vars,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.CompareValuePairs("e2b_alias.prod", tfjsonpath.New("build_id"), "e2b_template_build.candidate", tfjsonpath.New("build_id"), compare.ValuesSame()),
					statecheck.ExpectKnownValue("e2b_alias.prod", tfjsonpath.New("build_id"), capture(&passed)),
					statecheck.ExpectKnownValue("e2b_template.this", tfjsonpath.New("id"), capture(&templateID)),
					// The candidate, the template's first build, ran on the
					// build registered with the template and got its tag.
					serverCheck(func(ctx context.Context) error {
						tpl, err := api.GetTemplate(ctx, templateID)
						if err != nil {
							return err
						}
						if len(tpl.Builds) != 1 || tpl.Builds[0].BuildID != passed {
							return fmt.Errorf("builds %+v, want only the candidate %s", tpl.Builds, passed)
						}
						tags, err := api.ListTags(ctx, templateID)
						if err != nil {
							return err
						}
						for _, tag := range tags {
							if tag.Tag == "candidate" && tag.BuildID == passed {
								return nil
							}
						}
						return fmt.Errorf("tag candidate does not point at %s: %+v", passed, tags)
					}),
				},
			},
			{
				// A broken candidate: its smoke test fails, :prod stays.
				PreConfig: func() {
					acctest.Must(t, os.WriteFile(filepath.Join(app, "version.txt"), nil, 0o644))
				},
				ConfigDirectory: module,
				ConfigVariables: vars,
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("e2b_template_build.candidate", plancheck.ResourceActionReplace),
				}},
				ExpectError: regexp.MustCompile(`(?s)Gate failed.*smoke test failed: /app/version.txt is empty`),
			},
			{
				// The tag is where it was; the plan moves it again, without a smoke test.
				ConfigDirectory:    module,
				ConfigVariables:    vars,
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				PreConfig: func() {
					tags, err := api.ListTags(context.Background(), name)
					acctest.Must(t, err)
					for _, tag := range tags {
						if tag.Tag == "prod" && tag.BuildID != passed {
							t.Errorf(":prod points at %s after a failed smoke test; it was %s", tag.BuildID, passed)
						}
					}
					spawned = spawnCount(t, api, templateID)
				},
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PostApplyPreRefresh: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("e2b_alias.prod", plancheck.ResourceActionUpdate),
					planCheck(func() error {
						if n := spawnCount(t, api, templateID); n != spawned {
							return fmt.Errorf("planning started %d sandboxes", n-spawned)
						}
						return nil
					}),
				}},
			},
		},
	})
}

// spawnCount is how many sandboxes were started from the template so far.
func spawnCount(t *testing.T, api *e2bapi.Client, templateID string) int64 {
	t.Helper()
	tpl, err := api.GetTemplate(t.Context(), templateID)
	acctest.Must(t, err)
	return tpl.SpawnCount
}

// TestAccExamplePromotion_cli applies examples/promotion as a user would, with the Terraform
// CLI and the provider binary through dev_overrides: the release module in staging (the
// shared server), then in production (a server of its own), each through its own provider
// configuration. Each environment ends with its own template, :prod on a build that passed
// its smoke test; a second plan has nothing to do; destroy removes both templates.
func TestAccExamplePromotion_cli(t *testing.T) {
	staging := localServer(t)
	production := acctest.Another(t)
	root, err := acctest.ModuleRoot()
	acctest.Must(t, err)
	work := t.TempDir()
	example := filepath.Join(work, "promotion")
	copyDir(t, filepath.Join(root, "examples", "promotion"), example, nil)
	name := uniqueName("acc-promo-example")
	vars := fmt.Sprintf(`
staging            = { api_url = %q, sandbox_url = %q, template_name = %q }
production         = { api_url = %q, sandbox_url = %q, template_name = %q }
staging_api_key    = %q
production_api_key = %q
base_image         = %q
`, staging.APIURL, staging.SandboxURL, name, production.APIURL, production.SandboxURL, name, staging.APIKey, production.APIKey, staging.DebianImage)
	acctest.Must(t, os.WriteFile(filepath.Join(example, "terraform.tfvars"), []byte(vars), 0o600))
	tf := newCLI(t, staging, example)
	terraform, mustTerraform := tf.Run, tf.Must
	destroyed := false
	t.Cleanup(func() {
		if !destroyed {
			if out, err := terraform("destroy", "-auto-approve", "-input=false", "-no-color"); err != nil {
				t.Errorf("terraform destroy: %v\n%s", err, out)
			}
		}
	})

	mustTerraform("get", "-no-color") // the local release module; the provider comes from dev_overrides
	mustTerraform("apply", "-auto-approve", "-input=false", "-no-color")
	var outputs map[string]struct{ Value string }
	acctest.Must(t, json.Unmarshal([]byte(mustTerraform("output", "-json")), &outputs))
	for env, srv := range map[string]*acctest.Server{"staging": staging, "production": production} {
		api := testAPI(t, srv)
		_, err := api.GetTemplateByAlias(t.Context(), name)
		acctest.Must(t, err)
		tags, err := api.ListTags(t.Context(), name)
		acctest.Must(t, err)
		prod := ""
		for _, tag := range tags {
			if tag.Tag == "prod" {
				prod = tag.BuildID
			}
		}
		if prod == "" || outputs[env].Value != name+":prod -> "+prod {
			t.Errorf("%s: output %q, :prod on %q (tags %+v)", env, outputs[env].Value, prod, tags)
		}
	}
	if staging.APIURL == production.APIURL || outputs["staging"].Value == outputs["production"].Value {
		t.Errorf("both environments are one: %s and %s", outputs["staging"].Value, outputs["production"].Value)
	}

	if out, err := terraform("plan", "-detailed-exitcode", "-input=false", "-no-color"); err != nil {
		t.Errorf("second plan is not empty (%v):\n%s", err, out)
	}
	mustTerraform("destroy", "-auto-approve", "-input=false", "-no-color")
	destroyed = true
	for env, srv := range map[string]*acctest.Server{"staging": staging, "production": production} {
		if _, err := testAPI(t, srv).GetTemplateByAlias(t.Context(), name); !e2bapi.IsNotFound(err) {
			t.Errorf("%s: template %s after destroy: %v, want not found", env, name, err)
		}
	}
}

// validateExamples runs terraform validate on each directory below examples/ that
// patterns match (such as resources/*), copied with the provider's address as the
// promotion example declares it: every example must stand on its own.
func validateExamples(t *testing.T, patterns ...string) {
	srv := localServer(t)
	root, err := acctest.ModuleRoot()
	acctest.Must(t, err)
	for _, pattern := range patterns {
		dirs, err := filepath.Glob(filepath.Join(root, "examples", pattern))
		acctest.Must(t, err)
		if len(dirs) == 0 {
			t.Fatalf("no examples match examples/%s", pattern)
		}
		for _, dir := range dirs {
			rel, err := filepath.Rel(filepath.Join(root, "examples"), dir)
			acctest.Must(t, err)
			t.Run(rel, func(t *testing.T) {
				work := t.TempDir()
				declared := false
				copyDir(t, dir, work, func(path string, dir bool) error {
					if dir {
						return nil
					}
					b, err := os.ReadFile(path)
					declared = declared || strings.Contains(string(b), "required_providers")
					return err
				})
				if !declared {
					acctest.Must(t, os.WriteFile(filepath.Join(work, "terraform.tf"), []byte(`
terraform {
  required_providers {
    e2b = {
      source = "e2b-terraform/e2b"
    }
  }
}
`), 0o600))
				}
				newCLI(t, srv, work).Must("validate", "-no-color")
			})
		}
	}
}

// TestAccExamples_validate validates the examples of the documentation.
func TestAccExamples_validate(t *testing.T) {
	validateExamples(t, "provider", "resources/*", "data-sources/*", "functions/*")
}

// TestAccExamples_validateEphemeral validates the ephemeral resources' examples, which
// need Terraform 1.10 or OpenTofu 1.11.
func TestAccExamples_validateEphemeral(t *testing.T) {
	validateExamples(t, "ephemeral-resources/*")
}
