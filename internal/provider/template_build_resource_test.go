package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/config"
	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/acctest"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/buildcontext"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/steps"
)

// copyContext writes the build context of the COPY tests: files for each kind of COPY
// source (a file, a directory, a glob), an ignored file and a Dockerfile with the same
// COPY steps. It returns the directory and the files.
func copyContext(t *testing.T, debianImage string) (string, map[string]string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "context")
	files := map[string]string{
		"top.txt":          "top file\n",
		"app/a.txt":        "hello\n",
		"app/sub/b.txt":    "world\n",
		"logs/one.log":     "one\n",
		"logs/two.log":     "two\n",
		"logs/skip.txt":    "not a log\n",
		"ignored.txt":      "ignored\n",
		".dockerignore":    "ignored.txt\nDockerfile\n",
		"Dockerfile":       "FROM " + debianImage + "\nCOPY top.txt /opt/top.txt\nCOPY app /opt/app\nRUN echo v2 > /opt/version\n",
		"app/sub/keep.txt": "",
	}
	acctest.WriteFiles(t, dir, files)
	return dir, files
}

// copyBuild is a template and a build from the base image with COPY (file, directory,
// glob), WORKDIR and RUN steps.
func copyBuild(srv *acctest.Server, name, ctxDir string) string {
	return templateBuild(srv, name, "v1", srv.DebianImage, fmt.Sprintf(`  context = %q
  steps = [
    { copy = { src = "top.txt", dest = "/opt/top.txt" } },
    { copy = { src = "app", dest = "/opt/app" } },
    { copy = { src = "logs/*.log", dest = "/opt/logs/" } },
    { workdir = "/opt" },
    { run = { command = "cat /opt/top.txt /opt/app/a.txt > /opt/run.txt && echo v1 > /opt/version", user = "root" } },
  ]`, ctxDir))
}

// buildInputs are the arguments of e2b_template_build that an import
// cannot know: E2B does not return a build's steps.
var buildInputs = []string{"from_image", "context", "steps", "copy_hashes", "dockerfile", "dockerfile_hash", "spec_hash", "timeouts", "files_hash", "force"}

// buildImportID is the import ID (template_id/build_id) of a build in the state.
func buildImportID(resource string) tfresource.ImportStateIdFunc {
	return func(s *terraform.State) (string, error) {
		rs, ok := s.RootModule().Resources[resource]
		if !ok {
			return "", fmt.Errorf("%s not in the state", resource)
		}
		return rs.Primary.Attributes["template_id"] + "/" + rs.Primary.Attributes["build_id"], nil
	}
}

// uploads are the archives the server counted.
func uploads(ctx context.Context, srv *acctest.Server) (int64, error) {
	st, err := srv.Stats(ctx)
	if err != nil {
		return 0, err
	}
	return st.Uploads, nil
}

// TestAccTemplateBuild_copy builds with every kind of COPY source and RUN, reads the
// result back through e2b_process, and imports the build.
func TestAccTemplateBuild_copy(t *testing.T) {
	srv := localServer(t)
	ctxDir, _ := copyContext(t, srv.DebianImage)
	config := copyBuild(srv, uniqueName("acc-copy"), ctxDir) + `
data "e2b_process" "v1" {
  template = "${e2b_template.t.name}:${e2b_template_build.v1.build_id}"
  command  = "cat /opt/run.txt /opt/app/sub/b.txt; ls /opt/logs"
}
`
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{
			{
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("e2b_template_build.v1", tfjsonpath.New("status"), knownvalue.StringExact("ready")),
					statecheck.ExpectKnownValue("e2b_template_build.v1", tfjsonpath.New("copy_hashes"), knownvalue.ListSizeExact(3)),
					statecheck.ExpectKnownValue("data.e2b_process.v1", tfjsonpath.New("exit_code"), knownvalue.Int64Exact(0)),
					statecheck.ExpectKnownValue("data.e2b_process.v1", tfjsonpath.New("stdout"),
						knownvalue.StringExact("top file\nhello\nworld\none.log\ntwo.log\n")),
					serverCheck(func(ctx context.Context) error {
						if n, err := uploads(ctx, srv); err != nil || n < 3 {
							return fmt.Errorf("the server counted %d uploads (%v) after the build, want at least 3", n, err)
						}
						return nil
					}),
				},
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
			{
				ResourceName:            "e2b_template_build.v1",
				ImportState:             true,
				ImportStateIdFunc:       buildImportID("e2b_template_build.v1"),
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: buildInputs,
			},
			{
				// E2B does not return a build's inputs, so the import block's plan
				// replaces the build it imports.
				ResourceName:       "e2b_template_build.v1",
				ImportState:        true,
				ImportStateKind:    tfresource.ImportBlockWithID,
				ImportStateIdFunc:  buildImportID("e2b_template_build.v1"),
				ExpectNonEmptyPlan: true,
				ImportPlanChecks: tfresource.ImportPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("e2b_template_build.v1", plancheck.ResourceActionReplace),
				}},
			},
		},
	})
}

// TestAccTemplateBuild_sdkFilesHash builds COPY . in the e2b-sdk hash mode from a
// context whose root has names sorting before "." (the SDK hashes the context itself
// first): the planned hash is the SDK-compatible one, the archive (checked against it at
// apply) holds the files, and a changed file replaces the build.
func TestAccTemplateBuild_sdkFilesHash(t *testing.T) {
	srv := localServer(t)
	ctxDir := filepath.Join(t.TempDir(), "context")
	acctest.WriteFiles(t, ctxDir, map[string]string{"-a.txt": "early\n", "#d/x.txt": "hash\n", "sub/b.txt": "world\n"})
	sdkHash := func() string {
		sum, err := buildcontext.StreamSDKHash(t.Context(), ctxDir, ".", "/opt/ctx", buildcontext.ListOptions{}, buildcontext.HashOptions{})
		acctest.Must(t, err)
		return sum.Hash
	}
	portable, err := buildcontext.StreamPortableHash(t.Context(), ctxDir, ".", "/opt/ctx", buildcontext.ListOptions{}, buildcontext.HashOptions{})
	acctest.Must(t, err)
	config := templateBuild(srv, uniqueName("acc-sdkhash"), "v1", srv.DebianImage, fmt.Sprintf(`  context    = %q
  files_hash = "e2b-sdk"
  steps = [
    { copy = { src = ".", dest = "/opt/ctx" } },
  ]`, ctxDir)) + `
data "e2b_process" "v1" {
  template = "${e2b_template.t.name}:${e2b_template_build.v1.build_id}"
  command  = "cat /opt/ctx/-a.txt '/opt/ctx/#d/x.txt' /opt/ctx/sub/b.txt"
}
`
	before := sdkHash()
	if before == portable.Hash {
		t.Fatalf("the SDK-compatible hash %s is the portable one", before)
	}
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{
			{
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("e2b_template_build.v1", tfjsonpath.New("status"), knownvalue.StringExact("ready")),
					statecheck.ExpectKnownValue("e2b_template_build.v1", tfjsonpath.New("copy_hashes"),
						knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact(before)})),
					statecheck.ExpectKnownValue("data.e2b_process.v1", tfjsonpath.New("stdout"), knownvalue.StringExact("early\nhash\nworld\n")),
				},
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
			{
				PreConfig: func() {
					acctest.Must(t, os.WriteFile(filepath.Join(ctxDir, "-a.txt"), []byte("later\n"), 0o644))
				},
				Config: config,
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("e2b_template_build.v1", plancheck.ResourceActionReplace),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("e2b_template_build.v1", tfjsonpath.New("copy_hashes"), knownvalue.ListExact([]knownvalue.Check{
						knownvalue.StringFunc(func(got string) error {
							if want := sdkHash(); got != want || got == before {
								return fmt.Errorf("copy hash %s, want the SDK-compatible hash of the changed tree %s (before %s)", got, want, before)
							}
							return nil
						}),
					})),
					statecheck.ExpectKnownValue("data.e2b_process.v1", tfjsonpath.New("stdout"), knownvalue.StringExact("later\nhash\nworld\n")),
				},
			},
		},
	})
}

// TestAccTemplateBuild_unchangedContext plans nothing after an ignored file changed, nor
// from the same tree written again with other modification times and umask.
func TestAccTemplateBuild_unchangedContext(t *testing.T) {
	srv := localServer(t)
	ctxDir, files := copyContext(t, srv.DebianImage)
	config := copyBuild(srv, uniqueName("acc-same"), ctxDir)
	emptyPlan := tfresource.ConfigPlanChecks{PostApplyPreRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}}
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{
			{
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("e2b_template_build.v1", tfjsonpath.New("status"), knownvalue.StringExact("ready")),
				},
			},
			{
				PreConfig: func() {
					acctest.Must(t, os.WriteFile(filepath.Join(ctxDir, "ignored.txt"), []byte("changed\n"), 0o644))
				},
				Config:           config,
				PlanOnly:         true,
				ConfigPlanChecks: emptyPlan,
			},
			{
				// 0600 files, 0700 directories, three days old.
				PreConfig: func() {
					acctest.Must(t, os.RemoveAll(ctxDir))
					for rel, content := range files {
						p := filepath.Join(ctxDir, filepath.FromSlash(rel))
						acctest.Must(t, os.MkdirAll(filepath.Dir(p), 0o700))
						acctest.Must(t, os.WriteFile(p, []byte(content), 0o600))
						old := time.Now().Add(-72 * time.Hour)
						acctest.Must(t, os.Chtimes(p, old, old))
					}
				},
				Config:           config,
				PlanOnly:         true,
				ConfigPlanChecks: emptyPlan,
			},
		},
	})
}

// TestAccTemplateBuild_dockerfile builds a Dockerfile with the COPY steps of an earlier
// build: every archive is on the server already, so nothing is uploaded. The first build
// ran on the build the template registered: two builds, none left waiting. An edited
// context file then replaces both builds.
func TestAccTemplateBuild_dockerfile(t *testing.T) {
	srv := localServer(t)
	api := testAPI(t, srv)
	ctxDir, _ := copyContext(t, srv.DebianImage)
	name := uniqueName("acc-dockerfile")
	base := copyBuild(srv, name, ctxDir)
	v2 := base + fmt.Sprintf(`
resource "e2b_template_build" "v2" {
  template_id = e2b_template.t.id
  dockerfile  = %q
  tags        = ["candidate"]
}
`, filepath.Join(ctxDir, "Dockerfile"))
	var uploadsAfterV1 int64
	var templateID, v2Build string
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{
			{
				Config: base,
				ConfigStateChecks: []statecheck.StateCheck{
					serverCheck(func(ctx context.Context) (err error) {
						uploadsAfterV1, err = uploads(ctx, srv)
						return err
					}),
				},
			},
			{
				Config: v2,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("e2b_template_build.v2", tfjsonpath.New("status"), knownvalue.StringExact("ready")),
					statecheck.ExpectKnownValue("e2b_template.t", tfjsonpath.New("id"), capture(&templateID)),
					statecheck.ExpectKnownValue("e2b_template_build.v2", tfjsonpath.New("build_id"), capture(&v2Build)),
					serverCheck(func(ctx context.Context) error {
						if n, err := uploads(ctx, srv); err != nil || n != uploadsAfterV1 {
							return fmt.Errorf("the server counted %d uploads (%v), %d before the second build: it uploaded again", n, err, uploadsAfterV1)
						}
						tpl, err := api.GetTemplate(ctx, templateID)
						if err != nil {
							return err
						}
						if len(tpl.Builds) != 2 {
							return fmt.Errorf("template has %d builds, want 2: %+v", len(tpl.Builds), tpl.Builds)
						}
						for _, b := range tpl.Builds {
							if b.Status != e2b.BuildReady {
								return fmt.Errorf("build %s is %s, want every build ready", b.BuildID, b.Status)
							}
						}
						tags, err := api.ListTags(ctx, name)
						if err != nil {
							return err
						}
						for _, tag := range tags {
							if tag.Tag == "candidate" && tag.BuildID == v2Build {
								return nil
							}
						}
						return fmt.Errorf("tag candidate does not point at build %s: %+v", v2Build, tags)
					}),
				},
			},
			{
				PreConfig: func() {
					acctest.Must(t, os.WriteFile(filepath.Join(ctxDir, "app", "a.txt"), []byte("edited\n"), 0o644))
				},
				Config:             v2,
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PostApplyPreRefresh: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("e2b_template_build.v1", plancheck.ResourceActionReplace),
					plancheck.ExpectResourceAction("e2b_template_build.v2", plancheck.ResourceActionReplace),
				}},
			},
		},
	})
}

// TestAccTemplateBuild_layerCache applies a build whose last step then changes: the
// new build starts from the cached layer of the first step, whose random stamp it keeps;
// with force it runs every step again.
func TestAccTemplateBuild_layerCache(t *testing.T) {
	srv := localServer(t)
	name := uniqueName("acc-cache")
	config := func(version string, force bool) string {
		return templateBuild(srv, name, "b", srv.DebianImage, fmt.Sprintf(`  force = %t
  steps = [
    { run = { command = "cat /proc/sys/kernel/random/uuid > /stamp", user = "root" } },
    { run = { command = "echo %s > /version", user = "root" } },
  ]`, force, version)) + `
data "e2b_process" "b" {
  template = "${e2b_template.t.name}:${e2b_template_build.b.build_id}"
  command  = "cat /stamp /version"
}
`
	}
	var first string
	output := func(check func(stamp, version string) error) knownvalue.Check {
		return stringValue{"stamp and version", func(s string) error {
			stamp, version, _ := strings.Cut(strings.TrimSpace(s), "\n")
			return check(stamp, version)
		}}
	}
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{
			{
				Config: config("v1", false),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.e2b_process.b", tfjsonpath.New("stdout"), output(func(stamp, _ string) error {
						first = stamp
						return nil
					})),
				},
			},
			{
				Config: config("v2", false),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.e2b_process.b", tfjsonpath.New("stdout"), output(func(stamp, version string) error {
						if stamp != first || version != "v2" {
							return fmt.Errorf("stamp %q and version %q, want the cached stamp %q and v2", stamp, version, first)
						}
						return nil
					})),
				},
			},
			{
				Config: config("v2", true),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.e2b_process.b", tfjsonpath.New("stdout"), output(func(stamp, version string) error {
						if stamp == first || version != "v2" {
							return fmt.Errorf("stamp %q and version %q after a forced build, want a new stamp and v2", stamp, version)
						}
						return nil
					})),
				},
			},
		},
	})
}

// TestAccTemplateBuild_failingRun checks that a failing RUN step fails the apply with the
// step, the reason and the step's log lines.
func TestAccTemplateBuild_failingRun(t *testing.T) {
	srv := localServer(t)
	config := templateBuild(srv, uniqueName("acc-fail"), "b", srv.BaseImage, `  steps = [
    { run = { command = "echo first-step-ran" } },
    { run = { command = "echo about-to-fail; echo to-stderr >&2; exit 7" } },
  ]`)
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{{
			Config:      config,
			ExpectError: regexp.MustCompile(`(?s)Build failed.*step 2 \(RUN echo about-to-fail.*Last \d+ log lines.*about-to-fail`),
		}},
	})
}

// TestAccTemplateBuild_timeout checks that a build whose apply stops waiting (create
// timeout) fails the apply and goes on; the next apply, with a longer timeout, replaces
// the tainted resource with one that adopts that build (no second build of the template)
// and finds it ready; an alias and a build from_template on top of it then run.
func TestAccTemplateBuild_timeout(t *testing.T) {
	srv := localServer(t)
	api := testAPI(t, srv)
	name := uniqueName("acc-slow")
	build := func(timeout string) string {
		return templateBuild(srv, name, "b", srv.BaseImage, fmt.Sprintf(`  steps    = [{ run = { command = "sleep 12 # %s" } }]
  timeouts = { create = %q }`, name, timeout))
	}
	alias := `
resource "e2b_alias" "a" {
  template = e2b_template.t.name
  tag      = "slow"
  build_id = e2b_template_build.b.build_id
}
`
	var templateID string
	warnings := &planWarnings{}
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: warnings.factories(),
		Steps: []tfresource.TestStep{
			{
				Config:      build("2s") + alias,
				ExpectError: regexp.MustCompile(`(?s)Build still running.*goes\s+on\s+on\s+the\s+server.*terraform\s+apply\s+again`),
			},
			{
				PreConfig: warnings.reset,
				Config:    build("5m"),
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					// Tainted by the failed create.
					plancheck.ExpectResourceAction("e2b_template_build.b", plancheck.ResourceActionDestroyBeforeCreate),
					warnings.only("e2b_template_build", "Adopting a build left running"),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("e2b_template_build.b", tfjsonpath.New("status"), knownvalue.StringExact("ready")),
					statecheck.ExpectKnownValue("e2b_template.t", tfjsonpath.New("id"), capture(&templateID)),
					// The build the first apply started, adopted: not built again.
					serverCheck(func(ctx context.Context) error { return buildCount(api, templateID, 1)(ctx) }),
				},
			},
			{
				// A build on top of that one (from_template with a pinned build).
				Config: build("5m") + alias + `
resource "e2b_template_build" "child" {
  template_id   = e2b_template.t.id
  from_template = "${e2b_template.t.name}:${e2b_template_build.b.build_id}"
  steps         = [{ workdir = "/child" }]
}
`,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.CompareValuePairs("e2b_alias.a", tfjsonpath.New("build_id"), "e2b_template_build.b", tfjsonpath.New("build_id"), compare.ValuesSame()),
					statecheck.ExpectKnownValue("e2b_template_build.child", tfjsonpath.New("status"), knownvalue.StringExact("ready")),
				},
			},
		},
	})
}

func TestAccTemplateBuild_planErrors(t *testing.T) {
	ctxDir := t.TempDir()
	acctest.WriteFiles(t, ctxDir, map[string]string{"a.txt": "a"})
	dockerDir := t.TempDir()
	acctest.WriteFiles(t, dockerDir, map[string]string{"Dockerfile": "FROM a AS one\nRUN true\nFROM b\n"})

	build := func(body string) string {
		return fmt.Sprintf(`
resource "e2b_template_build" "b" {
  template_id = %q
%s
}
`, someTemplateID, body)
	}
	planErrors(t, map[string]struct{ config, err string }{
		"escaping COPY source": {build(fmt.Sprintf(`
  from_image = "busybox"
  context    = %q
  steps = [{ copy = { src = "../etc/passwd", dest = "/x" } }]
`, ctxDir)), `(?s)COPY source "../etc/passwd".*escapes the context\s+directory\s+` + regexp.QuoteMeta(ctxDir)},
		"absolute COPY source": {build(fmt.Sprintf(`
  from_image = "busybox"
  context    = %q
  steps = [{ copy = { src = "/etc/passwd", dest = "/x" } }]
`, ctxDir)), `(?s)COPY source "/etc/passwd".*absolute`},
		"missing context": {build(`
  from_image = "busybox"
  context    = "/nonexistent/e2b-context"
  steps = [{ copy = { src = "a.txt", dest = "/x" } }]
`), `(?s)Missing build context.*/nonexistent/e2b-context`},
		"COPY source matching nothing": {build(fmt.Sprintf(`
  from_image = "busybox"
  context    = %q
  steps = [{ copy = { src = "nothing-*.txt", dest = "/x" } }]
`, ctxDir)), `(?s)step 1.*nothing-\*\.txt`},
		"dockerfile COPY of a missing source": {build(fmt.Sprintf(`
  dockerfile = "FROM busybox\nRUN true\nCOPY missing.txt /x\n"
  context    = %q
`, ctxDir)), `(?s)Invalid dockerfile.*Dockerfile line 3: COPY missing\.txt /x`},
		"both from_image and from_template": {build(`
  from_image    = "busybox"
  from_template = "base"
`), `(?s)Invalid Attribute Combination.*from_image.*from_template`},
		"no base": {build(`
  steps = [{ run = { command = "true" } }]
`), `(?s)Missing Attribute Configuration.*from_image,from_template,dockerfile`},
		"step with two kinds": {build(`
  from_image = "busybox"
  steps = [{ run = { command = "true" }, workdir = "/x" }]
`), `(?s)Invalid steps\[0\].*steps\[0\] is step 1, which sets run and workdir; it must\s+set\s+exactly\s+one\s+of\s+run,\s+copy,\s+env,\s+workdir\s+and\s+user`},
		"empty step": {build(`
  from_image = "busybox"
  steps = [{}]
`), `(?s)Invalid steps\[0\].*steps\[0\] is step 1, which sets none; it must set exactly\s+one\s+of\s+run,\s+copy,\s+env,\s+workdir\s+and\s+user`},
		"odd cpu_count": {build(`
  from_image = "busybox"
  cpu_count  = 3
`), `(?s)cpu_count is 3; it must be 1 or an even number up to 32`},
		"small memory": {build(`
  from_image = "busybox"
  memory_mb  = 1
`), `(?s)Error: Invalid memory_mb.*memory_mb is 1; it must be an even number of at least 128\.`},
		"bad mode": {build(fmt.Sprintf(`
  from_image = "busybox"
  context    = %q
  steps = [{ copy = { src = "a.txt", dest = "/x", mode = "rwx" } }]
`, ctxDir)), `(?s)must be octal permissions`},
		"bad tag": {build(`
  from_image = "busybox"
  tags       = ["release candidate"]
`), `(?s)Error: Invalid tags\n.*tags holds "release candidate"; it must be a tag`},
		"multi-stage dockerfile": {build(fmt.Sprintf(`
  dockerfile = %q
`, filepath.Join(dockerDir, "Dockerfile"))), `(?s)Invalid dockerfile.*line 3`},
		"secret mount in the dockerfile": {build(`
  dockerfile = "FROM busybox\nRUN true\nRUN --mount=type=secret,id=token cat /run/secrets/token\n"
`), `(?s)Invalid dockerfile.*Dockerfile line 3: RUN --mount=type=secret is not supported`},
		"build arg no ARG declares": {build(`
  dockerfile = "FROM busybox\nARG VERSION=1\n"
  build_args = { VERSION = "2", RELEASE = "3" }
`), `(?s)Unknown build argument.*build_args.*no ARG of the Dockerfile declares RELEASE`},
		"build_args without dockerfile": {build(`
  from_image = "busybox"
  build_args = { A = "1" }
`), `(?s)"dockerfile" must be specified when "build_args"`},
		"run with command and commands": {build(`
  from_image = "busybox"
  steps = [{ run = { command = "true", commands = ["true"] } }]
`), `(?s)Invalid steps\[0\]\.run.*which\s+sets\s+both\s+command\s+and\s+commands;\s+it\s+must\s+set\s+exactly\s+one\s+of\s+command\s+and\s+commands`},
		"run without a command": {build(`
  from_image = "busybox"
  steps = [{ run = { user = "root" } }]
`), `(?s)Invalid steps\[0\]\.run.*which\s+sets\s+neither\s+of\s+command\s+and\s+commands`},
		"bad template_id": {`
resource "e2b_template_build" "b" {
  template_id = "Not-An-ID"
  from_image  = "busybox"
}
`, `(?s)template_id`},
	})
}

// TestAccTemplateBuild_planHashes plans builds without a server: the hashes are
// known at plan for a known context and unknown for one that is not known
// yet, and nothing fails.
func TestAccTemplateBuild_planHashes(t *testing.T) {
	accPreCheck(t)
	ctxDir := t.TempDir()
	acctest.WriteFiles(t, ctxDir, map[string]string{"a.txt": "a", "d/b.txt": "b"})
	steps := `
  steps = [
    { copy = { src = "a.txt", dest = "/a.txt" } },
    { run = { command = "true" } },
    { copy = { src = "d", dest = "/d" } },
  ]
`
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{
			{
				Config: planProvider + fmt.Sprintf(`
resource "e2b_template_build" "b" {
  template_id = %q
  from_image  = "busybox"
  context     = %q
%s
}
`, someTemplateID, ctxDir, steps),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PostApplyPreRefresh: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("e2b_template_build.b", plancheck.ResourceActionCreate),
					plancheck.ExpectKnownValue("e2b_template_build.b", tfjsonpath.New("copy_hashes"), knownvalue.ListExact([]knownvalue.Check{
						knownvalue.StringRegexp(regexp.MustCompile(`^[0-9a-f]{64}$`)),
						knownvalue.StringRegexp(regexp.MustCompile(`^[0-9a-f]{64}$`)),
					})),
					plancheck.ExpectKnownValue("e2b_template_build.b", tfjsonpath.New("spec_hash"), knownvalue.StringRegexp(regexp.MustCompile(`^[0-9a-f]{64}$`))),
				}},
			},
			{
				Config: planProvider + fmt.Sprintf(`
resource "terraform_data" "later" {
  input = %q
}

resource "e2b_template_build" "b" {
  template_id = %q
  from_image  = "busybox"
  context     = terraform_data.later.output
%s
}
`, ctxDir, someTemplateID, steps),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PostApplyPreRefresh: []plancheck.PlanCheck{
					plancheck.ExpectUnknownValue("e2b_template_build.b", tfjsonpath.New("copy_hashes")),
					plancheck.ExpectUnknownValue("e2b_template_build.b", tfjsonpath.New("spec_hash")),
				}},
			},
			{
				// With reuse the plan looks for a build to reuse; an API that does not
				// answer leaves the build ID unknown, and the plan goes on.
				Config: planProvider + fmt.Sprintf(`
resource "e2b_template_build" "b" {
  template_id = %q
  from_image  = "busybox"
  context     = %q
  reuse       = true
%s
}
`, someTemplateID, ctxDir, steps),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PostApplyPreRefresh: []plancheck.PlanCheck{
					plancheck.ExpectUnknownValue("e2b_template_build.b", tfjsonpath.New("build_id")),
					plancheck.ExpectKnownValue("e2b_template_build.b", tfjsonpath.New("spec_hash"), knownvalue.StringRegexp(regexp.MustCompile(`^[0-9a-f]{64}$`))),
				}},
			},
		},
	})
}

// TestBuildSpec converts a configured Dockerfile and steps into the build templatebuild
// plans: the Dockerfile's context and commands, each step kind in the wire layout.
func TestBuildSpec(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	acctest.WriteFiles(t, dir, map[string]string{
		"Dockerfile": "FROM busybox\nCOPY --chown=app a.txt /opt/a.txt\nENV A=1\nCMD [\"sleep\", \"1\"]\n",
		"a.txt":      "a",
	})
	stepType := stepObjectType(t)
	stepsValue, d := types.ListValueFrom(ctx, stepType, []stepModel{
		{Run: &runStepModel{Command: types.StringValue("make"), Commands: types.ListNull(types.StringType), User: types.StringValue("root")}, Env: types.MapNull(types.StringType)},
		{Copy: &copyStepModel{Src: types.StringValue("a.txt"), Dest: types.StringValue("/a"), User: types.StringNull(),
			Mode: types.StringValue("755"), ResolveSymlinks: types.BoolValue(true), ForceUpload: types.BoolValue(true)}, Env: types.MapNull(types.StringType)},
		{Env: types.MapValueMust(types.StringType, map[string]attr.Value{"B": types.StringValue("2"), "A": types.StringValue("1")})},
		{Run: &runStepModel{Commands: types.ListValueMust(types.StringType, []attr.Value{types.StringValue("cd /x"), types.StringValue("make")})},
			Env: types.MapNull(types.StringType), SkipCache: types.BoolValue(true)},
	})
	if d.HasError() {
		t.Fatal(d)
	}
	m := templateBuildModel{
		TemplateID: types.StringValue(someTemplateID),
		Dockerfile: types.StringValue(filepath.Join(dir, "Dockerfile")),
		BuildArgs:  types.MapNull(types.StringType),
		Steps:      stepsValue,
		Force:      types.BoolValue(true),
		Tags:       types.SetNull(types.StringType),
		CPUCount:   types.Int64Value(2),
		Triggers:   types.MapValueMust(types.StringType, map[string]attr.Value{"date": types.StringValue("2026-12-01")}),
		Reuse:      types.BoolValue(true),
	}
	spec, known, diags := buildSpec(ctx, &m)
	if diags.HasError() || !known {
		t.Fatalf("buildSpec: known=%v %v", known, diags)
	}
	want := []steps.Step{
		{Type: steps.Run, Args: []string{"make", "root"}},
		{Type: steps.Copy, Args: []string{"a.txt", "/a", "", "0755"}},
		{Type: steps.Env, Args: []string{"A", "1", "B", "2"}},
		{Type: steps.Run, Args: []string{"cd /x && make"}, Force: true},
	}
	if len(spec.Steps) != len(want) {
		t.Fatalf("%d steps, want %d", len(spec.Steps), len(want))
	}
	for i, s := range spec.Steps {
		if !slices.Equal(s.Args, want[i].Args) || s.Type != want[i].Type || s.Force != want[i].Force ||
			s.ResolveSymlinks != (i == 1) || s.ForceUpload != (i == 1) {
			t.Errorf("step %d = %+v, want %+v", i+1, s, want[i])
		}
	}
	if spec.Dockerfile != filepath.Join(dir, "Dockerfile") || !spec.Force || *spec.CPUCount != 2 || spec.MemoryMB != nil ||
		!spec.Reuse || spec.Triggers["date"] != "2026-12-01" {
		t.Errorf("spec %+v", spec)
	}
	var planDiags diag.Diagnostics
	b := planBuild(ctx, &m, &planDiags)
	if planDiags.HasError() || b == nil || b.ContextDir != dir || len(b.Copies) != 2 || b.Start.StartCmd != "sleep 1" {
		t.Fatalf("planBuild: %+v %v", b, planDiags)
	}
}

// stepObjectType is the element type of steps, from the schema.
func stepObjectType(t *testing.T) types.ObjectType {
	t.Helper()
	r := NewTemplateBuildResource()
	var resp = schemaOf(t, r)
	list, ok := resp.Attributes["steps"].GetType().(types.ListType)
	if !ok {
		t.Fatalf("steps is a %T", resp.Attributes["steps"].GetType())
	}
	obj, ok := list.ElemType.(types.ObjectType)
	if !ok {
		t.Fatalf("steps holds %T", list.ElemType)
	}
	return obj
}

func schemaOf(t *testing.T, r resource.Resource) schema.Schema {
	t.Helper()
	var resp resource.SchemaResponse
	r.Schema(context.Background(), resource.SchemaRequest{}, &resp)
	if resp.Diagnostics.HasError() {
		t.Fatal(resp.Diagnostics)
	}
	if diags := resp.Schema.ValidateImplementation(context.Background()); diags.HasError() {
		t.Fatal(diags)
	}
	return resp.Schema
}

// TestAccTemplateBuild_movedCheckout applies builds whose context and Dockerfile are
// given as abspath, as path.module and from a module, then plans the same config and
// state from another directory (a CI runner's checkout: other umask, other mtimes):
// where the files are must not make new builds, only what they contain.
func TestAccTemplateBuild_movedCheckout(t *testing.T) {
	srv := localServer(t)
	name := uniqueName("acc-moved")
	first := filepath.Join(t.TempDir(), "checkout")
	build := func(label, body string) string {
		return fmt.Sprintf(`
resource "e2b_template" %[1]q {
  name = "%[2]s-%[1]s"
}

resource "e2b_template_build" %[1]q {
  template_id = e2b_template.%[1]s.id
%[3]s
}
`, label, name, body)
	}
	copyApp := fmt.Sprintf(`  from_image  = %q
  steps       = [{ copy = { src = "app", dest = "/opt/app" } }]`, srv.DebianImage)
	acctest.WriteFiles(t, first, map[string]string{
		"main.tf": `terraform {
  required_providers {
    e2b = { source = "e2b-terraform/e2b" }
  }
}
` + srv.ProviderConfig() +
			build("abspath", copyApp+"\n  context = abspath(\"${path.module}/ctx\")") +
			build("module_path", copyApp+"\n  context = \"${path.module}/ctx\"") +
			build("dockerfile", `  dockerfile = abspath("${path.module}/ctx/Dockerfile")`) + `
module "m" {
  source = "./mod"
}
`,
		"mod/main.tf": `terraform {
  required_providers {
    e2b = { source = "e2b-terraform/e2b" }
  }
}
` + build("in_module", copyApp+"\n  context = \"${path.module}/ctx\""),
		"ctx/app/a.txt":     "a\n",
		"ctx/app/sub/b.txt": "b\n",
		"ctx/Dockerfile":    "FROM " + srv.DebianImage + "\nCOPY app /opt/app\n",
		"mod/ctx/app/c.txt": "c\n",
	})
	tf := newCLI(t, srv, first)
	tf.Must("get", "-no-color")
	tf.Must("apply", "-auto-approve", "-input=false", "-no-color")
	t.Cleanup(func() {
		if out, err := tf.Run("destroy", "-auto-approve", "-input=false", "-no-color"); err != nil {
			t.Errorf("terraform destroy: %v\n%s", err, out)
		}
	})

	// The same checkout elsewhere, with the state: 0600 files, 0700 directories, three
	// days old.
	moved := filepath.Join(t.TempDir(), "runner", "checkout")
	old := time.Now().Add(-72 * time.Hour)
	copyDir(t, first, moved, func(p string, dir bool) error {
		mode := os.FileMode(0o600)
		if dir {
			mode = 0o700
		}
		if err := os.Chmod(p, mode); err != nil {
			return err
		}
		return os.Chtimes(p, old, old)
	})
	tf.Dir = moved
	if out, err := tf.Run("plan", "-detailed-exitcode", "-input=false", "-no-color"); err != nil {
		t.Errorf("plan of the moved checkout is not empty (%v):\n%s", err, out)
	}
	// What the files contain still counts.
	acctest.Must(t, os.WriteFile(filepath.Join(moved, "ctx", "Dockerfile"), []byte("FROM "+srv.DebianImage+"\nCOPY app /opt/app\nRUN true\n"), 0o600))
	out, _ := tf.Run("plan", "-input=false", "-no-color")
	if !regexp.MustCompile(`(?s)e2b_template_build.dockerfile must be replaced.*dockerfile_hash.*forces replacement`).MatchString(out) {
		t.Errorf("a changed Dockerfile does not replace its build:\n%s", out)
	}
}

// TestAccTemplateBuild_symlinks copies symlinks whose targets are outside the context (a
// relative link climbing out, an absolute one) as links, as Docker's COPY does: the plan
// passes, the build succeeds and the sandbox holds the links.
func TestAccTemplateBuild_symlinks(t *testing.T) {
	srv := localServer(t)
	ctxDir := filepath.Join(t.TempDir(), "ctx")
	acctest.WriteFiles(t, ctxDir, map[string]string{"app/a.txt": "a\n"})
	acctest.Must(t, os.Symlink("../../outside", filepath.Join(ctxDir, "app", "x")))
	acctest.Must(t, os.Symlink("/dev/zero", filepath.Join(ctxDir, "app", "zero")))
	config := templateBuild(srv, uniqueName("acc-links"), "v1", srv.DebianImage, fmt.Sprintf(`  context = %q
  steps = [{ copy = { src = "app", dest = "/opt/app" } }]`, ctxDir)) + `
data "e2b_process" "links" {
  template = "${e2b_template.t.name}:${e2b_template_build.v1.build_id}"
  command  = "readlink /opt/app/x /opt/app/zero"
}
`
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{{
			Config: config,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("e2b_template_build.v1", tfjsonpath.New("status"), knownvalue.StringExact("ready")),
				statecheck.ExpectKnownValue("data.e2b_process.links", tfjsonpath.New("stdout"), knownvalue.StringExact("../../outside\n/dev/zero\n")),
			},
		}},
	})
}

// faultProxy is a reverse proxy in front of the local server that drops the answer of
// the first dropStarts build starts (the POST reaches the server, the connection closes
// before its 202 comes back) and answers the first failStatus build status GETs with 503.
func faultProxy(t *testing.T, target string, dropStarts, failStatus int) string {
	t.Helper()
	var mu sync.Mutex
	return proxyTo(t, target, func(w http.ResponseWriter, r *http.Request, proxy http.Handler) {
		mu.Lock()
		drop := r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v2/templates/") && dropStarts > 0
		fail := r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/status") && failStatus > 0
		if drop {
			dropStarts--
		}
		if fail {
			failStatus--
		}
		mu.Unlock()
		switch {
		case fail:
			http.Error(w, `{"code":503,"message":"unavailable"}`, http.StatusServiceUnavailable)
		case drop:
			proxy.ServeHTTP(httptest.NewRecorder(), r)
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
			}
		default:
			proxy.ServeHTTP(w, r)
		}
	})
}

// proxyTo is a loopback server in front of the server at target: serve gets every
// request with the reverse proxy that passes it on.
func proxyTo(t *testing.T, target string, serve func(w http.ResponseWriter, r *http.Request, proxy http.Handler)) string {
	t.Helper()
	u, err := url.Parse(target)
	acctest.Must(t, err)
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { serve(w, r, proxy) }))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestAccTemplateBuild_statusUnavailable loses what the client needs to follow a build:
// the status answering 503 until the client gives up, or the start's 202 lost and the
// status unreadable right after. The apply keeps the build as building (a warning, not a
// tainted resource) and the next apply waits for that same build instead of building
// again.
func TestAccTemplateBuild_statusUnavailable(t *testing.T) {
	srv := localServer(t)
	for name, faults := range map[string][2]int{"status 503": {0, 3}, "start answer lost": {1, 3}} {
		t.Run(name, func(t *testing.T) {
			// A step of its own per case: the layer cache would finish a second one at once.
			template := uniqueName("acc-503")
			config := strings.Replace(templateBuild(srv, template, "b", srv.BaseImage, fmt.Sprintf(`  steps = [{ run = { command = "sleep 15 # %s" } }]`, template)),
				fmt.Sprintf("%q", srv.APIURL), fmt.Sprintf("%q", faultProxy(t, srv.APIURL, faults[0], faults[1])), 1)
			var buildID string
			tfresource.Test(t, tfresource.TestCase{
				ProtoV6ProviderFactories: factories(),
				Steps: []tfresource.TestStep{
					{
						Config: config,
						ConfigStateChecks: []statecheck.StateCheck{
							statecheck.ExpectKnownValue("e2b_template_build.b", tfjsonpath.New("status"), knownvalue.StringExact("building")),
							statecheck.ExpectKnownValue("e2b_template_build.b", tfjsonpath.New("build_id"), capture(&buildID)),
						},
						ExpectNonEmptyPlan: true, // the next plan waits for the build
					},
					{
						Config: config,
						ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
							plancheck.ExpectResourceAction("e2b_template_build.b", plancheck.ResourceActionUpdate),
						}},
						ConfigStateChecks: []statecheck.StateCheck{
							statecheck.ExpectKnownValue("e2b_template_build.b", tfjsonpath.New("status"), knownvalue.StringExact("ready")),
							statecheck.ExpectKnownValue("e2b_template_build.b", tfjsonpath.New("build_id"), stringValue{"the first build", func(s string) error {
								if s != buildID {
									return fmt.Errorf("build %s, want the first apply's %s", s, buildID)
								}
								return nil
							}}),
						},
					},
				},
			})
		})
	}
}

// TestAccTemplateBuild_timeoutRange refuses build timeouts that are not positive or
// longer than a week, saying the range, at plan: a negative one returned at once.
func TestAccTemplateBuild_timeoutRange(t *testing.T) {
	build := func(timeouts string) string {
		return fmt.Sprintf(`
resource "e2b_template_build" "b" {
  template_id = %q
  from_image  = "busybox"
  timeouts    = %s
}
`, someTemplateID, timeouts)
	}
	planErrors(t, map[string]struct{ config, err string }{
		"negative create": {build(`{ create = "-5s" }`), `(?s)Invalid timeout.*"-5s"\s+is\s+out\s+of\s+range:\s+it\s+must\s+be\s+from\s+1s\s+to\s+168h`},
		"huge update":     {build(`{ update = "100000000h" }`), `(?s)Invalid timeout.*"100000000h"\s+is\s+too\s+long:\s+it\s+must\s+be\s+from\s+1s\s+to\s+168h`},
	})
}

// TestAccTemplateBuild_twoBuildsOfANewTemplate applies two builds without tags of a
// template created in the same apply, in parallel: both carry the default tag, and
// starting one must not cancel the other (superseded by a newer one).
func TestAccTemplateBuild_twoBuildsOfANewTemplate(t *testing.T) {
	srv := localServer(t)
	config := templateBuild(srv, uniqueName("acc-two"), "one", srv.BaseImage, `  steps = [{ run = { command = "sleep 2; echo one" } }]`) + fmt.Sprintf(`
resource "e2b_template_build" "two" {
  template_id = e2b_template.t.id
  from_image  = %q
  steps       = [{ run = { command = "sleep 2; echo two" } }]
}
`, srv.BaseImage)
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{{
			Config: config,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("e2b_template_build.one", tfjsonpath.New("status"), knownvalue.StringExact("ready")),
				statecheck.ExpectKnownValue("e2b_template_build.two", tfjsonpath.New("status"), knownvalue.StringExact("ready")),
				statecheck.CompareValuePairs("e2b_template_build.one", tfjsonpath.New("build_id"), "e2b_template_build.two", tfjsonpath.New("build_id"), compare.ValuesDiffer()),
			},
		}},
	})
}

// startRecorder is a reverse proxy in front of the local server that keeps the body of
// every build start (POST /v2/templates/{id}/builds/{buildID}): what the server was sent.
func startRecorder(t *testing.T, target string) (proxyURL string, starts func() []string) {
	t.Helper()
	var mu sync.Mutex
	var bodies []string
	proxyURL = proxyTo(t, target, func(w http.ResponseWriter, r *http.Request, proxy http.Handler) {
		if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v2/templates/") {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			mu.Lock()
			bodies = append(bodies, string(b))
			mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		proxy.ServeHTTP(w, r)
	})
	return proxyURL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(bodies)
	}
}

// lacks is a state and a plan check that none of the secrets appears anywhere in the
// state or the plan (`terraform show -json`, which shows sensitive values too).
type lacks []string

func (s lacks) CheckState(_ context.Context, req statecheck.CheckStateRequest, resp *statecheck.CheckStateResponse) {
	resp.Error = s.check("state", req.State)
}

func (s lacks) CheckPlan(_ context.Context, req plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	resp.Error = s.check("plan", req.Plan)
}

func (s lacks) check(what string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	for _, secret := range s {
		if strings.Contains(string(b), secret) {
			return fmt.Errorf("the %s contains the secret %q", what, secret)
		}
	}
	return nil
}

// TestAccTemplateBuild_writeOnlySecret sends a write-only registry password with the build
// start and keeps it out of the plan and the state; a new password alone plans nothing, a new
// password_wo_version replaces the build with the new password.
func TestAccTemplateBuild_writeOnlySecret(t *testing.T) {
	srv := localServer(t)
	proxyURL, starts := startRecorder(t, srv.APIURL)
	name := uniqueName("acc-wo-secret")
	// The secret comes from an ephemeral variable, as it would in use: a literal would be
	// in the plan's copy of the configuration.
	build := func(version int) string {
		return strings.Replace(templateBuild(srv, name, "b", srv.BaseImage, fmt.Sprintf(`  from_image_registry = {
    type                = "registry"
    username            = "robot"
    password_wo         = var.registry_password
    password_wo_version = %d
  }`, version)), fmt.Sprintf("%q", srv.APIURL), fmt.Sprintf("%q", proxyURL), 1) + `
variable "registry_password" {
  type      = string
  sensitive = true
  ephemeral = true
}
`
	}
	password := func(secret string) config.Variables {
		return config.Variables{"registry_password": config.StringVariable(secret)}
	}
	first, second := "wo-first-"+uniqueName("secret"), "wo-second-"+uniqueName("secret")
	sentLast := func(secret string) serverCheck {
		return func(context.Context) error {
			bodies := starts()
			if len(bodies) == 0 || !strings.Contains(bodies[len(bodies)-1], `"password":"`+secret+`"`) {
				return fmt.Errorf("the last build start did not carry the password %q: %q", secret, bodies)
			}
			return nil
		}
	}
	tfresource.Test(t, tfresource.TestCase{
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_11_0)},
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{
			{
				Config:           build(1),
				ConfigVariables:  password(first),
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{lacks{first}}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("e2b_template_build.b", tfjsonpath.New("status"), knownvalue.StringExact("ready")),
					statecheck.ExpectKnownValue("e2b_template_build.b", tfjsonpath.New("from_image_registry").AtMapKey("password_wo"), knownvalue.Null()),
					sentLast(first),
					lacks{first},
				},
			},
			{
				// PlanOnly fails on a non-empty plan.
				Config:          build(1),
				ConfigVariables: password(second),
				PlanOnly:        true,
			},
			{
				Config:          build(2),
				ConfigVariables: password(second),
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("e2b_template_build.b", plancheck.ResourceActionReplace),
					lacks{first, second},
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("e2b_template_build.b", tfjsonpath.New("status"), knownvalue.StringExact("ready")),
					sentLast(second),
					lacks{first, second},
				},
			},
		},
	})
}

// TestAccTemplateBuild_writeOnlyOldCLI refuses a write-only secret, naming it and the
// version it needs, on a CLI without write-only arguments (the pinned Terraform 1.8),
// before anything is created.
func TestAccTemplateBuild_writeOnlyOldCLI(t *testing.T) {
	accPreCheck(t)
	tfresource.Test(t, tfresource.TestCase{
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipAbove(tfversion.Version1_10_0)},
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{{
			Config: planProvider + fmt.Sprintf(`
resource "e2b_template_build" "b" {
  template_id = %q
  from_image  = "registry.example/img:1"
  from_image_registry = {
    type                = "registry"
    password_wo         = "secret"
    password_wo_version = 1
  }
}
`, someTemplateID),
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(`(?s)WriteOnly Attribute Not Allowed.*from_image_registry\.password_wo.*Terraform 1\.11`),
		}},
	})
}

// TestAddWriteOnlySecrets puts each write-only secret of the configuration in place of its
// plain twin and leaves the plain secrets a configuration without them has.
func TestAddWriteOnlySecrets(t *testing.T) {
	ctx := context.Background()
	sch := schemaOf(t, NewTemplateBuildResource())
	config := func(reg *registryModel) tfsdk.Config {
		plan := tfsdk.Plan{Schema: sch, Raw: tftypes.NewValue(sch.Type().TerraformType(ctx), nil)}
		if d := plan.SetAttribute(ctx, path.Root("from_image_registry"), reg); d.HasError() {
			t.Fatal(d)
		}
		return tfsdk.Config{Schema: sch, Raw: plan.Raw}
	}
	plain := e2b.FromImageRegistry{Type: "registry", Username: "u", Password: "p", AWSSecretAccessKey: "k", ServiceAccountJSON: "j"}
	reg := plain
	if d := addWriteOnlySecrets(ctx, config(&registryModel{
		Type: types.StringValue("registry"), PasswordWO: types.StringValue("p-wo"),
		AWSSecretAccessKeyWO: types.StringValue("k-wo"), ServiceAccountJSONWO: types.StringValue("j-wo"),
	}), &reg); d.HasError() {
		t.Fatal(d)
	}
	if want := (e2b.FromImageRegistry{Type: "registry", Username: "u", Password: "p-wo", AWSSecretAccessKey: "k-wo", ServiceAccountJSON: "j-wo"}); reg != want {
		t.Errorf("registry %+v, want %+v", reg, want)
	}
	reg = plain
	if d := addWriteOnlySecrets(ctx, config(&registryModel{Type: types.StringValue("registry")}), &reg); d.HasError() || reg != plain {
		t.Errorf("without write-only secrets: registry %+v, want %+v unchanged (%v)", reg, plain, d)
	}
	if d := addWriteOnlySecrets(ctx, config(nil), nil); d.HasError() {
		t.Errorf("without a registry: %v", d)
	}
}

// TestAccTemplateBuild_writeOnlyErrors refuses a secret given both ways and a write-only
// secret without its version (or the version alone), naming the attributes.
func TestAccTemplateBuild_writeOnlyErrors(t *testing.T) {
	accPreCheck(t)
	build := func(registry string) string {
		return planProvider + fmt.Sprintf(`
resource "e2b_template_build" "b" {
  template_id = %q
  from_image  = "registry.example/img:1"
  from_image_registry = {
%s
  }
}
`, someTemplateID, registry)
	}
	for name, c := range map[string]struct{ config, err string }{
		"both ways": {build(`    type = "registry"
    password = "a"
    password_wo = "b"
    password_wo_version = 1`), `(?s)password_wo.*cannot be\s+specified\s+when.*password`},
		"no version": {build(`    type = "aws"
    aws_secret_access_key_wo = "b"`), `(?s)aws_secret_access_key_wo_version.*must be\s+specified`},
		"version alone": {build(`    type = "gcp"
    service_account_json_wo_version = 3`), `(?s)service_account_json_wo.*must be\s+specified`},
	} {
		t.Run(name, func(t *testing.T) {
			tfresource.Test(t, tfresource.TestCase{
				TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_11_0)},
				ProtoV6ProviderFactories: factories(),
				Steps:                    []tfresource.TestStep{{Config: c.config, PlanOnly: true, ExpectError: regexp.MustCompile(c.err)}},
			})
		})
	}
}

// TestAccTemplateBuild_buildOptions builds a Dockerfile whose ARGs build_args set (the base
// image among them), with steps after its own: a run of joined commands that skips the
// cache from there on, read back in a sandbox, and the start request checked for the
// steps' force. force_upload then uploads the archive the server has again.
func TestAccTemplateBuild_buildOptions(t *testing.T) {
	srv := localServer(t)
	proxyURL, starts := startRecorder(t, srv.APIURL)
	ctxDir := t.TempDir()
	acctest.WriteFiles(t, ctxDir, map[string]string{"a.txt": "from the context\n"})
	name := uniqueName("acc-options")
	config := func(forceUpload bool) string {
		return strings.Replace(srv.ProviderConfig(), fmt.Sprintf("%q", srv.APIURL), fmt.Sprintf("%q", proxyURL), 1) + fmt.Sprintf(`
resource "e2b_template" "t" {
  name = %q
}

resource "e2b_template_build" "b" {
  template_id = e2b_template.t.id
  dockerfile  = "ARG BASE=busybox\nFROM $${BASE}\nARG GREETING=hello\nRUN echo \"$GREETING\" > /tmp/greeting\n"
  build_args  = { BASE = %q, GREETING = "hi from build_args" }
  context     = %q
  steps = [
    { copy = { src = "a.txt", dest = "/tmp/a.txt", force_upload = %t } },
    { run = { commands = ["cat /tmp/greeting /tmp/a.txt > /tmp/out", "echo joined >> /tmp/out"] }, skip_cache = true },
    { run = { command = "echo last >> /tmp/out" } },
  ]
}

data "e2b_process" "out" {
  template = "${e2b_template.t.name}:${e2b_template_build.b.build_id}"
  command  = "cat /tmp/out; echo \"$GREETING\"; whoami"
}
`, name, srv.DebianImage, ctxDir, forceUpload)
	}
	// lastStart checks the steps of the last build start: type, first argument, force.
	lastStart := func(want ...string) serverCheck {
		return func(context.Context) error {
			bodies := starts()
			if len(bodies) == 0 {
				return errors.New("no build start seen")
			}
			var req e2b.TemplateBuildStartV2
			if err := json.Unmarshal([]byte(bodies[len(bodies)-1]), &req); err != nil {
				return err
			}
			var got []string
			for _, s := range req.Steps {
				got = append(got, fmt.Sprintf("%s %s %v", s.Type, s.Args[0], s.Force))
			}
			if req.FromImage != srv.DebianImage || !slices.Equal(got, want) {
				return fmt.Errorf("start from %q with steps\n%q\nwant from %q with\n%q", req.FromImage, got, srv.DebianImage, want)
			}
			return nil
		}
	}
	dockerfileSteps := []string{"USER root false", "WORKDIR / false", "ENV GREETING false", `RUN echo "$GREETING" > /tmp/greeting false`,
		"USER user false", "WORKDIR /home/user false"}
	ownSteps := func(copyForced bool) []string {
		return append(slices.Clone(dockerfileSteps), fmt.Sprintf("COPY a.txt %v", copyForced),
			"RUN cat /tmp/greeting /tmp/a.txt > /tmp/out && echo joined >> /tmp/out true", "RUN echo last >> /tmp/out true")
	}
	var uploadsAfterFirst int64
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{
			{
				Config: config(false),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.e2b_process.out", tfjsonpath.New("stdout"),
						knownvalue.StringExact("hi from build_args\nfrom the context\njoined\nlast\nhi from build_args\nuser\n")),
					lastStart(ownSteps(false)...),
					serverCheck(func(ctx context.Context) (err error) {
						uploadsAfterFirst, err = uploads(ctx, srv)
						return err
					}),
				},
			},
			{
				Config: config(true),
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("e2b_template_build.b", plancheck.ResourceActionReplace),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					lastStart(ownSteps(true)...),
					serverCheck(func(ctx context.Context) error {
						if n, err := uploads(ctx, srv); err != nil || n != uploadsAfterFirst+1 {
							return fmt.Errorf("the server counted %d uploads (%v), %d before: want the present archive uploaded again", n, err, uploadsAfterFirst)
						}
						return nil
					}),
				},
			},
		},
	})
}

// reuseBuild is srv's provider block and a build with reuse of the template templateID (an
// HCL expression) with tags, copying app from ctxDir.
func reuseBuild(srv *acctest.Server, templateID, ctxDir, tags string) string {
	return srv.ProviderConfig() + fmt.Sprintf(`
resource "e2b_template_build" "b" {
  template_id = %s
  from_image  = %q
  context     = %q
  reuse       = true
  tags        = [%s]
  steps = [
    { copy = { src = "app", dest = "/opt/app" } },
    { run = { command = "cat /opt/app/a.txt" } },
  ]
}
`, templateID, srv.BaseImage, ctxDir, tags)
}

// builtTemplate registers a template outside Terraform, as another workspace has it, and
// deletes it when the test ends.
func builtTemplate(t *testing.T, api *e2bapi.Client, name string) string {
	t.Helper()
	reg, err := api.CreateTemplateBuild(t.Context(), e2b.TemplateBuildRequestV3{Name: name})
	acctest.Must(t, err)
	t.Cleanup(func() {
		if err := api.DeleteTemplate(context.Background(), reg.TemplateID); err != nil {
			t.Errorf("deleting template %s: %v", reg.TemplateID, err)
		}
	})
	return reg.TemplateID
}

// buildCount checks the number of builds the server has of the template.
func buildCount(api *e2bapi.Client, templateID string, want int) serverCheck {
	return func(ctx context.Context) error {
		tpl, err := api.GetTemplate(ctx, templateID)
		if err != nil {
			return err
		}
		if len(tpl.Builds) != want {
			return fmt.Errorf("template %s has %d builds, want %d: %+v", templateID, len(tpl.Builds), want, tpl.Builds)
		}
		return nil
	}
}

// tagsAt checks that each of tags points at the build *buildID.
func tagsAt(api *e2bapi.Client, templateID string, buildID *string, tags ...func() string) serverCheck {
	return func(ctx context.Context) error {
		held, err := api.ListTags(ctx, templateID)
		if err != nil {
			return err
		}
		for _, tag := range tags {
			if !slices.ContainsFunc(held, func(h e2b.TemplateTag) bool { return h.Tag == tag() && h.BuildID == *buildID }) {
				return fmt.Errorf("tag %s does not point at build %s: %+v", tag(), *buildID, held)
			}
		}
		return nil
	}
}

func equalTo(what string, want *string) knownvalue.Check {
	return stringValue{what, func(s string) error {
		if s != *want {
			return fmt.Errorf("%s, want %s (%s)", s, *want, what)
		}
		return nil
	}}
}

// TestAccTemplateBuild_reuse applies one configuration in two states in turn, as a fresh
// CI state or a second workspace would: the second plans the first's build ID, known,
// and builds nothing, though the first state was destroyed (destroy leaves the build
// and every tag); a changed COPY file changes spec_hash and builds.
func TestAccTemplateBuild_reuse(t *testing.T) {
	srv := localServer(t)
	api := testAPI(t, srv)
	name := uniqueName("acc-reuse")
	templateID := builtTemplate(t, api, name)
	ctxDir := t.TempDir()
	acctest.WriteFiles(t, ctxDir, map[string]string{"app/a.txt": "one\n"})
	// The second state finds the template by name, as another workspace would.
	second := reuseBuild(srv, "data.e2b_template.t.id", ctxDir, `"second"`) + fmt.Sprintf(`
data "e2b_template" "t" {
  template = %q
}
`, name)
	var firstID, firstSpec, secondID string
	specTag := func() string { return "spec-" + firstSpec[:16] }
	tag := func(s string) func() string { return func() string { return s } }
	res := "e2b_template_build.b"
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{{
			Config: reuseBuild(srv, strconv.Quote(templateID), ctxDir, `"first"`),
			ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectUnknownValue(res, tfjsonpath.New("build_id")),
				plancheck.ExpectKnownValue(res, tfjsonpath.New("spec_hash"), capture(&firstSpec)),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(res, tfjsonpath.New("build_id"), capture(&firstID)),
				statecheck.ExpectKnownValue(res, tfjsonpath.New("spec_hash"), equalTo("the planned spec hash", &firstSpec)),
				// The first build runs on the build registered with the template, reuse
				// or not: the template shows no build that never ran.
				buildCount(api, templateID, 1),
				tagsAt(api, templateID, &firstID, tag("first"), specTag),
			},
		}},
	})
	// The first state is gone; its build and tags are not.
	acctest.Must(t, tagsAt(api, templateID, &firstID, tag("first"), specTag)(t.Context()))

	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{
			{
				Config: second,
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionCreate),
					plancheck.ExpectKnownValue(res, tfjsonpath.New("build_id"), equalTo("the first state's build", &firstID)),
					plancheck.ExpectKnownValue(res, tfjsonpath.New("spec_hash"), equalTo("the first state's spec hash", &firstSpec)),
				}, PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("build_id"), equalTo("the first state's build", &firstID)),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("status"), knownvalue.StringExact("ready")),
					buildCount(api, templateID, 1),
					tagsAt(api, templateID, &firstID, tag("first"), tag("second"), specTag),
				},
			},
			{
				PreConfig: func() { acctest.WriteFiles(t, ctxDir, map[string]string{"app/a.txt": "two\n"}) },
				Config:    second,
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionDestroyBeforeCreate),
					plancheck.ExpectUnknownValue(res, tfjsonpath.New("build_id")),
					plancheck.ExpectKnownValue(res, tfjsonpath.New("spec_hash"), stringValue{"another spec hash", func(s string) error {
						if s == firstSpec {
							return fmt.Errorf("spec hash %s unchanged by a changed COPY file", s)
						}
						return nil
					}}),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("build_id"), capture(&secondID)),
					buildCount(api, templateID, 2),
					tagsAt(api, templateID, &secondID, tag("second")),
					// The replaced (reused) build keeps what the first state gave it.
					tagsAt(api, templateID, &firstID, tag("first"), specTag),
				},
			},
		},
	})
	acctest.Must(t, tagsAt(api, templateID, &secondID, tag("second"))(t.Context()))
	acctest.Must(t, buildCount(api, templateID, 2)(t.Context()))
}

// TestAccTemplateBuild_reuseTurnedOn turns reuse on for a build made without it (an update
// in place that gives it its spec tag) and off again (in place); a forced build with reuse
// builds though a ready build has its spec hash, and takes the spec tag.
func TestAccTemplateBuild_reuseTurnedOn(t *testing.T) {
	srv := localServer(t)
	api := testAPI(t, srv)
	body := `  steps = [{ run = { command = "echo reuse turned on" } }]
  tags  = ["v1"]`
	config := templateBuild(srv, uniqueName("acc-reuse-on"), "b", srv.BaseImage, body)
	var templateID, buildID, spec, forcedID string
	specTag := func() string { return "spec-" + spec[:16] }
	res := "e2b_template_build.b"
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		Steps: []tfresource.TestStep{
			{
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("template_id"), capture(&templateID)),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("build_id"), capture(&buildID)),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("spec_hash"), capture(&spec)),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("reuse"), knownvalue.Bool(false)),
				},
			},
			{
				Config: strings.Replace(config, body, body+"\n  reuse = true", 1),
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("build_id"), equalTo("the build made without reuse", &buildID)),
					serverCheck(func(ctx context.Context) error {
						return tagsAt(api, templateID, &buildID, func() string { return "v1" }, specTag)(ctx)
					}),
				},
			},
			{
				Config: strings.Replace(config, body, body+"\n  reuse = false", 1) + fmt.Sprintf(`
resource "e2b_template_build" "forced" {
  template_id = e2b_template.t.id
  from_image  = %q
  steps       = [{ run = { command = "echo reuse turned on" } }]
  tags        = ["v1"]
  reuse       = true
  force       = true
}
`, srv.BaseImage),
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate),
					plancheck.ExpectUnknownValue("e2b_template_build.forced", tfjsonpath.New("build_id")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.CompareValuePairs(res, tfjsonpath.New("spec_hash"), "e2b_template_build.forced", tfjsonpath.New("spec_hash"), compare.ValuesSame()),
					statecheck.CompareValuePairs(res, tfjsonpath.New("build_id"), "e2b_template_build.forced", tfjsonpath.New("build_id"), compare.ValuesDiffer()),
					statecheck.ExpectKnownValue("e2b_template_build.forced", tfjsonpath.New("build_id"), capture(&forcedID)),
					serverCheck(func(ctx context.Context) error { return buildCount(api, templateID, 2)(ctx) }),
					serverCheck(func(ctx context.Context) error { return tagsAt(api, templateID, &forcedID, specTag)(ctx) }),
				},
			},
		},
	})
}
