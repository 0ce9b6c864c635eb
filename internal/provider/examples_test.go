package provider

// The examples under examples/, applied as users apply them.

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

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

// TestAccExamplePromotion_stagingThenProduction runs examples/promotion as its CI flow
// does, with the CLI and the provider binary through dev_overrides: staging builds the
// app and tags it once the smoke test passed; production takes that very build by its
// spec hash (reuse: the same build_id, no second build) and tags it prod. Then a broken
// app fails staging's smoke test and the staging tag stays on the build that passed.
// Destroying production, then staging, removes the template.
func TestAccExamplePromotion_stagingThenProduction(t *testing.T) {
	srv := localServer(t)
	api := testAPI(t, srv)
	root, err := acctest.ModuleRoot()
	acctest.Must(t, err)
	example := filepath.Join(t.TempDir(), "promotion")
	copyDir(t, filepath.Join(root, "examples", "promotion"), example, nil)
	name := uniqueName("acc-promo")
	env := []string{"E2B_API_URL=" + srv.APIURL, "E2B_SANDBOX_URL=" + srv.SandboxURL, "E2B_API_KEY=" + srv.APIKey}
	roots := map[string]*cli{}
	for _, env_ := range []string{"staging", "production"} {
		dir := filepath.Join(example, env_)
		acctest.Must(t, os.WriteFile(filepath.Join(dir, "test.auto.tfvars"), fmt.Appendf(nil, "template = %q\nbase_image = %q\n", name, srv.DebianImage), 0o600))
		roots[env_] = newCLI(t, srv, dir)
		roots[env_].Env = env
	}
	staging, production := roots["staging"], roots["production"]
	destroyed := false
	t.Cleanup(func() {
		if destroyed {
			return
		}
		for _, tf := range []*cli{production, staging} {
			if out, err := tf.Run("destroy", "-auto-approve", "-input=false", "-no-color"); err != nil {
				t.Errorf("terraform destroy in %s: %v\n%s", tf.Dir, err, out)
			}
		}
	})
	tagOf := func(tag string) string {
		tags, err := api.ListTags(t.Context(), name)
		acctest.Must(t, err)
		for _, tt := range tags {
			if tt.Tag == tag {
				return tt.BuildID
			}
		}
		return ""
	}

	staging.Must("get", "-no-color") // the local release module; the provider comes from dev_overrides
	staging.Must("apply", "-auto-approve", "-input=false", "-no-color")
	tested := strings.TrimSpace(staging.Must("output", "-raw", "build_id"))
	if tagOf("staging") != tested {
		t.Fatalf("staging tag on %q, want the tested build %s", tagOf("staging"), tested)
	}

	builds := func() int {
		tpl, err := api.GetTemplateByAlias(t.Context(), name)
		acctest.Must(t, err)
		full, err := api.GetTemplate(t.Context(), tpl.TemplateID)
		acctest.Must(t, err)
		return len(full.Builds)
	}
	stagingBuilds := builds()

	production.Must("get", "-no-color")
	plan := production.Must("plan", "-input=false", "-no-color")
	if !strings.Contains(plan, tested) {
		t.Errorf("production's plan does not show staging's build %s:\n%s", tested, plan)
	}
	production.Must("apply", "-auto-approve", "-input=false", "-no-color")
	if got := strings.TrimSpace(production.Must("output", "-raw", "build_id")); got != tested || tagOf("prod") != tested {
		t.Errorf("production took build %s (prod tag on %s), want staging's %s", got, tagOf("prod"), tested)
	}
	if a, b := strings.TrimSpace(staging.Must("output", "-raw", "spec_hash")), strings.TrimSpace(production.Must("output", "-raw", "spec_hash")); a != b {
		t.Errorf("spec_hash staging %s, production %s", a, b)
	}
	if n := builds(); n != stagingBuilds {
		t.Errorf("the template has %d builds after production's apply, %d before: production must not build", n, stagingBuilds)
	}
	for _, tf := range []*cli{staging, production} {
		if out, err := tf.Run("plan", "-detailed-exitcode", "-input=false", "-no-color"); err != nil {
			t.Errorf("second plan in %s is not empty (%v):\n%s", tf.Dir, err, out)
		}
	}

	// A broken app: staging's smoke test fails the apply, the tag stays.
	acctest.Must(t, os.WriteFile(filepath.Join(example, "app", "version.txt"), nil, 0o644))
	out, err := staging.Run("apply", "-auto-approve", "-input=false", "-no-color")
	if err == nil || !regexp.MustCompile(`(?s)Gate failed.*smoke test failed: /app/version.txt is empty`).MatchString(out) {
		t.Errorf("staging apply of a broken app: %v\n%s", err, out)
	}
	if tagOf("staging") != tested || tagOf("prod") != tested {
		t.Errorf("after a failed smoke test: staging on %s, prod on %s; want both still on %s", tagOf("staging"), tagOf("prod"), tested)
	}

	production.Must("destroy", "-auto-approve", "-input=false", "-no-color")
	staging.Must("destroy", "-auto-approve", "-input=false", "-no-color")
	destroyed = true
	if _, err := api.GetTemplateByAlias(t.Context(), name); !e2bapi.IsNotFound(err) {
		t.Errorf("template %s after destroy: %v, want not found", name, err)
	}
}

// validateExamples runs terraform validate on each directory below examples/ that
// patterns match (such as resources/*), documentation snippets included, copied as
// exampleCopy copies it: every example must stand on its own.
func validateExamples(t *testing.T, skip []string, patterns ...string) {
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
			if slices.Contains(skip, rel) {
				continue
			}
			t.Run(rel, func(t *testing.T) {
				work := exampleCopy(t, dir, true)
				newCLI(t, srv, work).Must("validate", "-no-color")
			})
		}
	}
}

// ephemeralExamples use ephemeral values: ephemeral resources, and the ephemeral variable
// that feeds a write-only argument. They need Terraform 1.10 or OpenTofu 1.11.
var ephemeralExamples = []string{"resources/e2b_template_build"}

// TestAccExamples_validate validates the examples of the documentation.
func TestAccExamples_validate(t *testing.T) {
	validateExamples(t, ephemeralExamples, "provider", "resources/*", "data-sources/*", "functions/*")
}

// TestAccExamples_validateEphemeral validates the examples that use ephemeral values.
func TestAccExamples_validateEphemeral(t *testing.T) {
	validateExamples(t, nil, append([]string{"ephemeral-resources/*"}, ephemeralExamples...)...)
}

// TestAccExamples_validateActions validates the examples of actions, when a Terraform
// 1.14+ is on PATH (neither the pinned Terraform nor OpenTofu has actions).
func TestAccExamples_validateActions(t *testing.T) {
	t.Setenv("TF_ACC_TERRAFORM_PATH", terraform114(t, "an action block"))
	validateExamples(t, nil, "actions/*")
}
