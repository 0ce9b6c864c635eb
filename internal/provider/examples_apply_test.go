package provider

// Every example under examples/ applied as a user applies it: with the CLI and
// the provider binary through dev_overrides, against the shared local server,
// its base image set to the Debian test image; then what it promises is
// checked, a second plan must have nothing to do, and it is destroyed.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/acctest"
)

// outputs are an applied example's outputs, as `terraform output -json` prints them.
type outputs map[string]struct {
	Value json.RawMessage `json:"value"`
}

// str is the output name's value as a string; "" when it is not one.
func (o outputs) str(name string) string {
	var s string
	_ = json.Unmarshal(o[name].Value, &s)
	return s
}

// exampleCheck checks what an applied example promises, given its outputs and
// the fixture builds it may depend on.
type exampleCheck func(t *testing.T, out outputs, fx fixture)

// fixture is what the data-source and ephemeral examples look up: another team's
// templates, "base" and "secrets", each with a ready build under the tag prod.
type fixture struct {
	baseBuild string
}

// The examples a user applies, by directory below examples/, with what each promises.
// Files other than these directories' main files (import blocks, the private-registry
// builds that need credentials) are documentation snippets that TestAccExamples_validate
// checks.
var appliedExamples = map[string]exampleCheck{
	"provider": nil,
	// The README's configuration: the gate's smoke test fetched the page from the
	// server the Dockerfile's CMD starts, and prod is on the build.
	"minimal": nil,
	"quickstart": func(t *testing.T, out outputs, _ fixture) {
		if !strings.Contains(out.str("hello"), "Hello from an E2B template built by Terraform (sandbox, user user)") {
			t.Errorf("hello = %q", out.str("hello"))
		}
	},
	"resources/e2b_template": func(t *testing.T, out outputs, _ fixture) {
		if !regexp.MustCompile(`^[a-z0-9]{20}$`).MatchString(out.str("template_id")) {
			t.Errorf("template_id = %q", out.str("template_id"))
		}
	},
	"resources/e2b_template_build": func(t *testing.T, out outputs, _ fixture) {
		var ids map[string]string
		acctest.Must(t, json.Unmarshal(out["build_ids"].Value, &ids))
		if ids["steps"] == "" || ids["dockerfile"] == "" || ids["steps"] == ids["dockerfile"] {
			t.Errorf("build_ids = %v, want two builds", ids)
		}
	},
	// The gate's smoke test passed: the tags are on the candidate (checked through
	// the state by the second, empty plan and here through the server).
	"resources/e2b_alias": nil,
	"data-sources/e2b_alias": func(t *testing.T, out outputs, fx fixture) {
		if out.str("base_build_id") != fx.baseBuild {
			t.Errorf("base_build_id = %q, want base:prod's %s", out.str("base_build_id"), fx.baseBuild)
		}
	},
	"data-sources/e2b_template": func(t *testing.T, out outputs, fx fixture) {
		var base struct {
			BuildID     string `json:"build_id"`
			BuildStatus string `json:"build_status"`
		}
		var tags map[string][]string
		acctest.Must(t, json.Unmarshal(out["base_build"].Value, &base))
		acctest.Must(t, json.Unmarshal(out["base_tags"].Value, &tags))
		if base.BuildID != fx.baseBuild || base.BuildStatus != "ready" || !strings.Contains(strings.Join(tags[fx.baseBuild], ","), "prod") {
			t.Errorf("base_build = %+v, base_tags = %v; want %s ready with tag prod", base, tags, fx.baseBuild)
		}
	},
	"data-sources/e2b_templates": func(t *testing.T, out outputs, _ fixture) {
		var apps map[string]struct {
			ID string `json:"id"`
		}
		acctest.Must(t, json.Unmarshal(out["apps"].Value, &apps))
		if apps["app-examples"].ID == "" {
			t.Errorf("apps = %v, want the fixture's app-examples", apps)
		}
		for name := range apps {
			if !strings.HasPrefix(name, "app-") {
				t.Errorf("apps has %q, outside the name prefix app-", name)
			}
		}
	},
	"data-sources/e2b_process": func(t *testing.T, out outputs, _ fixture) {
		if !strings.HasPrefix(out.str("python_version"), "Python 3.") {
			t.Errorf("python_version = %q", out.str("python_version"))
		}
		var checksum struct {
			ExitCode int    `json:"exit_code"`
			Stdout   string `json:"stdout"`
		}
		acctest.Must(t, json.Unmarshal(out["checksum"].Value, &checksum))
		sum := sha256.Sum256([]byte("hello"))
		if want := hex.EncodeToString(sum[:]) + "  -\n"; checksum.ExitCode != 0 || checksum.Stdout != want {
			t.Errorf("checksum = %+v, want exit 0 and %q", checksum, want)
		}
	},
	// A function example applies only when its ready command passed in the build.
	"functions/wait_for_file":    nil,
	"functions/wait_for_timeout": nil,
	"functions/wait_for_port":    nil,
	"functions/wait_for_process": nil,
	"functions/wait_for_url": func(t *testing.T, out outputs, _ fixture) {
		if want := `curl -s -o /dev/null -w "%{http_code}" http://localhost:3000/ping | grep -q "204"`; out.str("ready_on_204") != want {
			t.Errorf("ready_on_204 = %q, want %q", out.str("ready_on_204"), want)
		}
	},
}

// ephemeralAppliedExamples need ephemeral resources: Terraform 1.10 or OpenTofu 1.11.
var ephemeralAppliedExamples = map[string]exampleCheck{
	"ephemeral-resources/e2b_process": func(t *testing.T, out outputs, fx fixture) {
		if out.str("production_base_build") != fx.baseBuild {
			t.Errorf("production_base_build = %q, want %s, read with the key from the secrets template", out.str("production_base_build"), fx.baseBuild)
		}
	},
}

// docsSnippet reports whether a file of an example directory is shown in the docs
// but not applied: import blocks (of things the example does not create) and the
// builds from private registries (which need credentials and another team's template;
// TestAccExamples_validateEphemeral validates them).
func docsSnippet(name string) bool {
	return strings.HasPrefix(name, "import") || name == "private-registries.tf"
}

// TestAccExamples_apply applies every example that the pinned Terraform supports.
func TestAccExamples_apply(t *testing.T) {
	applyExamples(t, appliedExamples)
}

// TestAccExamples_applyEphemeral applies the examples of ephemeral resources.
func TestAccExamples_applyEphemeral(t *testing.T) {
	applyExamples(t, ephemeralAppliedExamples)
}

func applyExamples(t *testing.T, examples map[string]exampleCheck) {
	srv := localServer(t)
	root, err := acctest.ModuleRoot()
	acctest.Must(t, err)
	// Every example but the promotion, which TestAccExamplePromotion_stagingThenProduction
	// applies as its CI flow does.
	var dirs []string
	for _, top := range []string{"provider", "quickstart", "minimal"} {
		dirs = append(dirs, filepath.Join(root, "examples", top))
	}
	for _, kind := range []string{"resources", "data-sources", "ephemeral-resources", "functions"} {
		found, err := filepath.Glob(filepath.Join(root, "examples", kind, "*"))
		acctest.Must(t, err)
		dirs = append(dirs, found...)
	}
	env := []string{"E2B_API_URL=" + srv.APIURL, "E2B_SANDBOX_URL=" + srv.SandboxURL, "E2B_API_KEY=" + srv.APIKey}
	fx := applyFixture(t, srv, env)
	t.Run("group", func(t *testing.T) {
		for _, dir := range dirs {
			rel, err := filepath.Rel(filepath.Join(root, "examples"), dir)
			acctest.Must(t, err)
			check, ok := examples[filepath.ToSlash(rel)]
			if !ok {
				continue
			}
			t.Run(rel, func(t *testing.T) {
				t.Parallel()
				tf := newCLI(t, srv, exampleCopy(t, dir, false))
				tf.Env = env
				vars := fmt.Sprintf("base_image = %q\n", srv.DebianImage)
				acctest.Must(t, os.WriteFile(filepath.Join(tf.Dir, "test.auto.tfvars"), []byte(vars), 0o600))
				t.Cleanup(func() {
					if out, err := tf.Run("destroy", "-auto-approve", "-input=false", "-no-color"); err != nil {
						t.Errorf("terraform destroy: %v\n%s", err, out)
					}
				})
				tf.Must("apply", "-auto-approve", "-input=false", "-no-color")
				var out outputs
				acctest.Must(t, json.Unmarshal([]byte(tf.Must("output", "-json")), &out))
				if check != nil {
					check(t, out, fx)
				}
				if plan, err := tf.Run("plan", "-detailed-exitcode", "-input=false", "-no-color"); err != nil {
					t.Errorf("a second plan is not empty (%v):\n%s", err, plan)
				}
			})
		}
	})
	for name := range examples {
		if _, err := os.Stat(filepath.Join(root, "examples", name)); err != nil {
			t.Errorf("example %s: %v", name, err)
		}
	}
	for _, dir := range dirs {
		rel, _ := filepath.Rel(filepath.Join(root, "examples"), dir)
		if _, ok := appliedExamples[filepath.ToSlash(rel)]; !ok {
			if _, ok := ephemeralAppliedExamples[filepath.ToSlash(rel)]; !ok {
				t.Errorf("example %s is applied by no test: add it to appliedExamples or ephemeralAppliedExamples", rel)
			}
		}
	}
}

// exampleCopy copies an example directory (with its documentation snippets when
// snippets is true) and declares the provider's address when the example does not:
// every example must stand on its own.
func exampleCopy(t *testing.T, dir string, snippets bool) string {
	t.Helper()
	work := t.TempDir()
	declared := false
	copyDir(t, dir, work, func(path string, isDir bool) error {
		if isDir {
			return nil
		}
		if !snippets && docsSnippet(filepath.Base(path)) {
			return os.Remove(path)
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
	return work
}

// applyFixture creates another team's templates that the data-source and ephemeral
// examples read: "base" and "secrets", each with a ready build under prod; the secrets
// template holds the server's API key at /run/secrets/e2b-production-key. It is
// destroyed when the test ends.
func applyFixture(t *testing.T, srv *acctest.Server, env []string) fixture {
	t.Helper()
	dir := t.TempDir()
	acctest.WriteFiles(t, dir, map[string]string{"main.tf": fmt.Sprintf(`
terraform {
  required_providers {
    e2b = {
      source = "e2b-terraform/e2b"
    }
  }
}

resource "e2b_template" "base" {
  name = "base"
}

resource "e2b_template_build" "base" {
  template_id = e2b_template.base.id
  from_image  = %[1]q
  tags        = ["prod"]
}

resource "e2b_template" "secrets" {
  name = "secrets"
}

# What data.e2b_templates' example finds by its name prefix.
resource "e2b_template" "app" {
  name = "app-examples"
}

resource "e2b_template_build" "secrets" {
  template_id = e2b_template.secrets.id
  from_image  = %[1]q
  tags        = ["prod"]
  steps = [
    { run = { command = "mkdir -p /run/secrets && echo %[2]s > /run/secrets/e2b-production-key && chmod 600 /run/secrets/e2b-production-key", user = "root" } },
  ]
}

output "base_build" {
  value = e2b_template_build.base.build_id
}
`, srv.DebianImage, srv.APIKey)})
	tf := newCLI(t, srv, dir)
	tf.Env = env
	t.Cleanup(func() {
		if out, err := tf.Run("destroy", "-auto-approve", "-input=false", "-no-color"); err != nil {
			t.Errorf("fixture destroy: %v\n%s", err, out)
		}
	})
	tf.Must("apply", "-auto-approve", "-input=false", "-no-color")
	return fixture{baseBuild: strings.TrimSpace(tf.Must("output", "-raw", "base_build"))}
}
