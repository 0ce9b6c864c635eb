package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/acctest"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
)

func TestMain(m *testing.M) {
	code := m.Run()
	acctest.StopShared()
	os.Exit(code)
}

// localServer prepares an acceptance test against the shared local server,
// skipping it (with the reason) where Docker or TF_ACC are missing.
func localServer(t *testing.T) *acctest.Server {
	t.Helper()
	accPreCheck(t)
	return acctest.Shared(t)
}

// apiClient is a client of the local server for checks and for changes
// made "outside Terraform".
func testAPI(t *testing.T, s *acctest.Server) *e2bapi.Client {
	t.Helper()
	c, err := e2bapi.New(e2bapi.Config{BaseURL: s.APIURL, APIKey: s.APIKey, MaxRetries: 2})
	acctest.Must(t, err)
	return c
}

// uniqueName is a template name no other test run uses.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
}

// stateAttr reads an attribute of a resource from the state.
func stateAttr(s *terraform.State, resource, attr string) (string, error) {
	rs, ok := s.RootModule().Resources[resource]
	if !ok {
		return "", fmt.Errorf("%s not in the state", resource)
	}
	v, ok := rs.Primary.Attributes[attr]
	if !ok {
		return "", fmt.Errorf("%s has no attribute %s", resource, attr)
	}
	return v, nil
}

// TestAccTemplateBuildLifecycle is the main acceptance test. To keep the
// number of builds at two it walks one configuration through many steps:
// a build from the base image with COPY (file, directory, glob) and RUN,
// read back through e2b_process; empty plans after no change, after editing
// an ignored file and from a copy of the context with other mtimes and
// umask; a Dockerfile build whose COPY archives are all present already
// (nothing uploaded); an alias created, moved (a sandbox then runs the new
// build), moved outside Terraform (drift) and restored; imports of every
// resource; and an edited context file planning a replacement.
func TestAccTemplateBuildLifecycle(t *testing.T) {
	srv := localServer(t)
	api := testAPI(t, srv)
	name := uniqueName("acc-life")
	ctxDir := filepath.Join(t.TempDir(), "context")
	files := map[string]string{
		"top.txt":          "top file\n",
		"app/a.txt":        "hello\n",
		"app/sub/b.txt":    "world\n",
		"logs/one.log":     "one\n",
		"logs/two.log":     "two\n",
		"logs/skip.txt":    "not a log\n",
		"ignored.txt":      "ignored\n",
		".dockerignore":    "ignored.txt\nDockerfile\n",
		"Dockerfile":       "FROM " + srv.DebianImage + "\nCOPY top.txt /opt/top.txt\nCOPY app /opt/app\nRUN echo v2 > /opt/version\n",
		"app/sub/keep.txt": "",
	}
	acctest.WriteFiles(t, ctxDir, files)

	base := srv.ProviderConfig() + fmt.Sprintf(`
resource "e2b_template" "t" {
  name = %q
}

resource "e2b_template_build" "v1" {
  template_id = e2b_template.t.id
  from_image  = %q
  context     = %q
  steps = [
    { copy = { src = "top.txt", dest = "/opt/top.txt" } },
    { copy = { src = "app", dest = "/opt/app" } },
    { copy = { src = "logs/*.log", dest = "/opt/logs/" } },
    { workdir = "/opt" },
    { run = { command = "cat /opt/top.txt /opt/app/a.txt > /opt/run.txt && echo v1 > /opt/version", user = "root" } },
  ]
}
`, name, srv.DebianImage, ctxDir)
	readV1 := `
data "e2b_process" "v1" {
  template = "${e2b_template.t.name}:${e2b_template_build.v1.build_id}"
  command  = "cat /opt/run.txt /opt/app/sub/b.txt; ls /opt/logs"
}
`
	v2 := fmt.Sprintf(`
resource "e2b_template_build" "v2" {
  template_id = e2b_template.t.id
  dockerfile  = %q
  tags        = ["candidate"]
}
`, filepath.Join(ctxDir, "Dockerfile"))
	alias := func(build string) string {
		return fmt.Sprintf(`
resource "e2b_alias" "prod" {
  template = e2b_template.t.name
  tag      = "prod"
  build_id = e2b_template_build.%s.build_id
}

data "e2b_process" "prod" {
  template = "${e2b_template.t.name}:${e2b_alias.prod.tag}"
  command  = "cat /opt/version"
  # Read again whenever the tag moves.
  env = { BUILD = e2b_alias.prod.build_id }
}
`, build)
	}

	var uploadsAfterV1 int64
	var v1Build string
	emptyPlan := tfresource.ConfigPlanChecks{PostApplyPreRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}}

	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: protoV6Factories(New("test")()),
		Steps: []tfresource.TestStep{
			{
				Config: base + readV1,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("e2b_template_build.v1", tfjsonpath.New("status"), knownvalue.StringExact("ready")),
					statecheck.ExpectKnownValue("e2b_template_build.v1", tfjsonpath.New("copy_hashes"), knownvalue.ListSizeExact(3)),
					statecheck.ExpectKnownValue("e2b_template.t", tfjsonpath.New("id"), knownvalue.StringRegexp(regexp.MustCompile(`^[a-z0-9]{20}$`))),
					statecheck.ExpectKnownValue("data.e2b_process.v1", tfjsonpath.New("exit_code"), knownvalue.Int64Exact(0)),
					statecheck.ExpectKnownValue("data.e2b_process.v1", tfjsonpath.New("stdout"),
						knownvalue.StringExact("top file\nhello\nworld\none.log\ntwo.log\n")),
				},
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
				Check: func(s *terraform.State) error {
					st, err := srv.Stats(context.Background())
					if err != nil {
						return err
					}
					if st.Uploads < 3 {
						return fmt.Errorf("the server counted %d uploads after the first build, want at least 3", st.Uploads)
					}
					uploadsAfterV1 = st.Uploads
					v1Build, err = stateAttr(s, "e2b_template_build.v1", "build_id")
					return err
				},
			},
			{
				// An ignored file changes nothing.
				PreConfig: func() {
					acctest.Must(t, os.WriteFile(filepath.Join(ctxDir, "ignored.txt"), []byte("changed\n"), 0o644))
				},
				Config:           base,
				PlanOnly:         true,
				ConfigPlanChecks: emptyPlan,
			},
			{
				// The same tree written again with other mtimes and umask
				// (0600 files, 0700 directories) plans nothing.
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
				Config:           base,
				PlanOnly:         true,
				ConfigPlanChecks: emptyPlan,
			},
			{
				// A Dockerfile build with the same COPY steps: every archive
				// is on the server already, so nothing is uploaded.
				Config: base + v2 + alias("v1"),
				Check: tfresource.ComposeAggregateTestCheckFunc(
					tfresource.TestCheckResourceAttr("e2b_template_build.v2", "status", "ready"),
					tfresource.TestCheckResourceAttr("data.e2b_process.prod", "stdout", "v1\n"),
					tfresource.TestCheckResourceAttrPair("e2b_alias.prod", "build_id", "e2b_template_build.v1", "build_id"),
					func(*terraform.State) error {
						st, err := srv.Stats(context.Background())
						if err != nil {
							return err
						}
						if st.Uploads != uploadsAfterV1 {
							return fmt.Errorf("the server counted %d uploads, %d before the second build: it uploaded again", st.Uploads, uploadsAfterV1)
						}
						return nil
					},
					// The first build ran on the build the template registered
					// when it was created: two builds, none left waiting.
					func(s *terraform.State) error {
						id, err := stateAttr(s, "e2b_template.t", "id")
						if err != nil {
							return err
						}
						tpl, err := api.GetTemplate(context.Background(), id)
						if err != nil {
							return err
						}
						if len(tpl.Builds) != 2 {
							return fmt.Errorf("template has %d builds, want 2: %+v", len(tpl.Builds), tpl.Builds)
						}
						for _, b := range tpl.Builds {
							if b.Status != e2bapi.BuildReady {
								return fmt.Errorf("build %s is %s, want every build ready", b.BuildID, b.Status)
							}
						}
						return nil
					},
					// The tags of a build point at it.
					func(s *terraform.State) error {
						v2Build, err := stateAttr(s, "e2b_template_build.v2", "build_id")
						if err != nil {
							return err
						}
						tags, err := api.ListTags(context.Background(), name)
						if err != nil {
							return err
						}
						for _, tag := range tags {
							if tag.Tag == "candidate" && tag.BuildID == v2Build {
								return nil
							}
						}
						return fmt.Errorf("tag candidate does not point at build %s: %+v", v2Build, tags)
					},
				),
			},
			{
				// Moving the tag: sandboxes from name:prod run the new build.
				Config: base + v2 + alias("v2"),
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("e2b_alias.prod", plancheck.ResourceActionUpdate),
				}},
				Check: tfresource.ComposeAggregateTestCheckFunc(
					tfresource.TestCheckResourceAttrPair("e2b_alias.prod", "build_id", "e2b_template_build.v2", "build_id"),
					tfresource.TestCheckResourceAttr("data.e2b_process.prod", "stdout", "v2\n"),
				),
			},
			{
				// Drift: the tag moved back outside Terraform.
				PreConfig: func() {
					_, err := api.AssignTags(context.Background(), name+":"+v1Build, []string{"prod"})
					acctest.Must(t, err)
				},
				Config:             base + v2 + alias("v2"),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("e2b_alias.prod", plancheck.ResourceActionUpdate),
				}},
			},
			{
				// Apply restores it.
				Config: base + v2 + alias("v2"),
				Check: tfresource.ComposeAggregateTestCheckFunc(
					tfresource.TestCheckResourceAttrPair("e2b_alias.prod", "build_id", "e2b_template_build.v2", "build_id"),
					tfresource.TestCheckResourceAttr("data.e2b_process.prod", "stdout", "v2\n"),
				),
			},
			{
				ResourceName:      "e2b_template.t",
				ImportState:       true,
				ImportStateVerify: true,
			},
			{
				ResourceName:      "e2b_template.t",
				ImportState:       true,
				ImportStateId:     name,
				ImportStateVerify: true,
			},
			{
				ResourceName:            "e2b_template_build.v1",
				ImportState:             true,
				ImportStateIdFunc:       buildImportID("e2b_template_build.v1"),
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: buildInputs,
			},
			{
				ResourceName:      "e2b_alias.prod",
				ImportState:       true,
				ImportStateId:     name + ":prod",
				ImportStateVerify: true,
			},
			{
				// An edited context file replaces the builds that copy it.
				PreConfig: func() {
					acctest.Must(t, os.WriteFile(filepath.Join(ctxDir, "app", "a.txt"), []byte("edited\n"), 0o644))
				},
				Config:             base + v2 + alias("v2"),
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

// buildInputs are the arguments of e2b_template_build that an import
// cannot know: E2B does not return a build's steps.
var buildInputs = []string{"from_image", "context", "steps", "copy_hashes", "dockerfile", "timeouts", "files_hash", "force"}

func buildImportID(resource string) tfresource.ImportStateIdFunc {
	return func(s *terraform.State) (string, error) {
		tid, err := stateAttr(s, resource, "template_id")
		if err != nil {
			return "", err
		}
		bid, err := stateAttr(s, resource, "build_id")
		return tid + "/" + bid, err
	}
}

// TestAccTemplateBuildFailingRun checks that a failing RUN step fails the
// apply with the step, the reason and the step's log lines, and that an
// alias refuses a build that is not ready.
func TestAccTemplateBuildFailingRun(t *testing.T) {
	srv := localServer(t)
	name := uniqueName("acc-fail")
	config := srv.ProviderConfig() + fmt.Sprintf(`
resource "e2b_template" "t" {
  name = %q
}

resource "e2b_template_build" "b" {
  template_id = e2b_template.t.id
  from_image  = %q
  steps = [
    { run = { command = "echo first-step-ran" } },
    { run = { command = "echo about-to-fail; echo to-stderr >&2; exit 7" } },
  ]
}
`, name, srv.BaseImage)
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: protoV6Factories(New("test")()),
		Steps: []tfresource.TestStep{{
			Config:      config,
			ExpectError: regexp.MustCompile(`(?s)Build failed.*step 2 \(RUN echo about-to-fail.*Last \d+ log lines.*about-to-fail`),
		}},
	})
}

// TestAccTemplatePublic changes public in place and imports nothing new:
// it needs no build.
func TestAccTemplatePublic(t *testing.T) {
	srv := localServer(t)
	name := uniqueName("acc-pub")
	tpl := func(public bool) string {
		return srv.ProviderConfig() + fmt.Sprintf(`
resource "e2b_template" "t" {
  name   = %q
  public = %t
}
`, name, public)
	}
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: protoV6Factories(New("test")()),
		Steps: []tfresource.TestStep{
			{
				Config: tpl(false),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("e2b_template.t", tfjsonpath.New("public"), knownvalue.Bool(false)),
					statecheck.ExpectKnownValue("e2b_template.t", tfjsonpath.New("names"), knownvalue.ListExact([]knownvalue.Check{
						knownvalue.StringRegexp(regexp.MustCompile(`^(.+/)?` + regexp.QuoteMeta(name) + `$`)),
					})),
				},
			},
			{
				Config: tpl(true),
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("e2b_template.t", plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("e2b_template.t", tfjsonpath.New("public"), knownvalue.Bool(true)),
				},
			},
			{
				// A second template cannot take the name.
				Config: tpl(true) + fmt.Sprintf(`
resource "e2b_template" "again" {
  name = %q
}
`, name),
				ExpectError: regexp.MustCompile(`(?s)Template name already in use`),
			},
		},
	})
}

// TestAccTemplateBuildTimeout checks that a build whose apply stops waiting
// (create timeout) stays in the state as "building"; an alias refuses it
// as not ready before moving anything; the next apply waits for it and
// finds it ready; a build from_template on top of it then runs.
func TestAccTemplateBuildTimeout(t *testing.T) {
	srv := localServer(t)
	name := uniqueName("acc-slow")
	build := srv.ProviderConfig() + fmt.Sprintf(`
resource "e2b_template" "t" {
  name = %q
}

resource "e2b_template_build" "b" {
  template_id = e2b_template.t.id
  from_image  = %q
  steps       = [{ run = { command = "sleep 30" } }]
  timeouts    = { create = "2s" }
}
`, name, srv.BaseImage)
	alias := `
resource "e2b_alias" "a" {
  template = e2b_template.t.name
  tag      = "slow"
  build_id = e2b_template_build.b.build_id
}
`
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: protoV6Factories(New("test")()),
		Steps: []tfresource.TestStep{
			{
				Config:      build + alias,
				ExpectError: regexp.MustCompile(`(?s)Build not ready.*"building"`),
			},
			{
				Config:           build,
				ConfigPlanChecks: tfresource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction("e2b_template_build.b", plancheck.ResourceActionUpdate)}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("e2b_template_build.b", tfjsonpath.New("status"), knownvalue.StringExact("ready")),
				},
			},
			{
				// A build on top of that one (from_template with a pinned build).
				Config: build + alias + `
resource "e2b_template_build" "child" {
  template_id   = e2b_template.t.id
  from_template = "${e2b_template.t.name}:${e2b_template_build.b.build_id}"
  steps         = [{ workdir = "/child" }]
}
`,
				Check: tfresource.ComposeAggregateTestCheckFunc(
					tfresource.TestCheckResourceAttrPair("e2b_alias.a", "build_id", "e2b_template_build.b", "build_id"),
					tfresource.TestCheckResourceAttr("e2b_template_build.child", "status", "ready"),
				),
			},
		},
	})
}
