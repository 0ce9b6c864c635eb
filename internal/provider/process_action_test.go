package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/acctest"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	envd "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/sandboxrun"
)

// The e2b_process action over tfprotov6, as Terraform 1.14 calls it: no CLI that runs
// actions can be built here (TestAccProcessAction_trigger runs one when it is on PATH).

// TestProcessAction_schema checks the action's schema as Terraform reads it: the data
// source's arguments but sandbox_id, template required, none write-only, no results.
func TestProcessAction_schema(t *testing.T) {
	ctx := context.Background()
	server, err := providerserver.NewProtocol6WithError(New("test")())()
	acctest.Must(t, err)
	schemas, err := server.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{})
	acctest.Must(t, err)
	action, ok := schemas.ActionSchemas["e2b_process"]
	if !ok {
		t.Fatal("no action e2b_process")
	}
	attrs := map[string]*tfprotov6.SchemaAttribute{}
	for _, a := range action.Schema.Block.Attributes {
		attrs[a.Name] = a
	}
	arguments := 0
	for _, d := range schemas.DataSourceSchemas["e2b_process"].Block.Attributes {
		a, inAction := attrs[d.Name]
		switch {
		case d.Computed:
			if inAction {
				t.Errorf("%s is a result or sandbox_id, yet an argument of the action", d.Name)
			}
			continue
		case !inAction:
			t.Errorf("argument %s of the data source is not the action's", d.Name)
		case a.Computed || a.Required != (d.Name == "template"):
			t.Errorf("%s: computed %v, required %v; want an argument, required for template alone", d.Name, a.Computed, a.Required)
		case a.WriteOnly:
			// terraform-plugin-framework 1.19 refuses every value of a write-only action
			// attribute (fwserver's ValidateActionConfig allows write-only values nowhere).
			t.Errorf("%s is write-only: no value of it would be accepted", d.Name)
		}
		arguments++
	}
	if len(attrs) != arguments {
		t.Errorf("the action has %d attributes, want the data source's %d arguments", len(attrs), arguments)
	}
}

// invoked is what an invocation sent: its progress messages and its final diagnostics.
type invoked struct {
	progress []string
	errors   []string
	warnings []string
}

// invoke invokes the e2b_process action with config, passing each progress message to
// seen as it arrives.
func (s *servedProvider) invoke(t *testing.T, ctx context.Context, config map[string]tftypes.Value, seen func(string)) invoked {
	t.Helper()
	actions, ok := s.ProviderServer.(tfprotov6.ActionServer)
	if !ok {
		t.Fatalf("the provider server %T serves no actions", s.ProviderServer)
	}
	cfg := dynamicValue(t, s.schemas.ActionSchemas["e2b_process"].Schema.ValueType(), config)
	valid, err := actions.ValidateActionConfig(ctx, &tfprotov6.ValidateActionConfigRequest{ActionType: "e2b_process", Config: cfg})
	acctest.Must(t, err)
	var out invoked
	for _, d := range valid.Diagnostics {
		out.errors = append(out.errors, d.Summary+": "+d.Detail)
	}
	if len(out.errors) > 0 {
		return out
	}
	stream, err := actions.InvokeAction(ctx, &tfprotov6.InvokeActionRequest{ActionType: "e2b_process", Config: cfg})
	acctest.Must(t, err)
	for ev := range stream.Events {
		switch e := ev.Type.(type) {
		case tfprotov6.ProgressInvokeActionEventType:
			out.progress = append(out.progress, e.Message)
			if seen != nil {
				seen(e.Message)
			}
		case tfprotov6.CompletedInvokeActionEventType:
			for _, d := range e.Diagnostics {
				if d.Severity == tfprotov6.DiagnosticSeverityError {
					out.errors = append(out.errors, d.Summary+": "+d.Detail)
				} else {
					out.warnings = append(out.warnings, d.Summary+": "+d.Detail)
				}
			}
		}
	}
	return out
}

// actionTemplate registers a template and builds it from the Debian test image, outside
// Terraform, and returns it as `name:<build ID>`.
func actionTemplate(t *testing.T, srv *acctest.Server) string {
	t.Helper()
	name := uniqueName("acc-action")
	reg, err := testAPI(t, srv).CreateTemplateBuild(t.Context(), e2b.TemplateBuildRequestV3{Name: name})
	acctest.Must(t, err)
	buildID, failed := outsideOf(t, srv).build(&reg.TemplateID, srv.DebianImage, "true")
	if failed {
		t.Fatal("the template's build failed")
	}
	return name + ":" + buildID
}

// TestAccProcessAction_progress invokes the action with a command that waits, after its
// first line, for a file that the test creates in its sandbox only once that line arrived
// as progress: the command ends only if progress streams while it runs. The value of env
// is masked, the lines past max_output_bytes are counted at the end, and the sandbox is
// killed.
func TestAccProcessAction_progress(t *testing.T) {
	srv := localServer(t)
	template := actionTemplate(t, srv)
	s := configuredServer(t, t.Context(), srv)
	str := func(v string) tftypes.Value { return tftypes.NewValue(tftypes.String, v) }
	released := false
	got := s.invoke(t, t.Context(), map[string]tftypes.Value{
		"template": str(template),
		"command": str(`echo "first $TOKEN"; while [ ! -e /tmp/go ]; do sleep 0.1; done; ` +
			`echo warm >&2; i=0; while [ $i -lt 20 ]; do echo line$i; i=$((i+1)); done`),
		"env":              tftypes.NewValue(tftypes.Map{ElementType: tftypes.String}, map[string]tftypes.Value{"TOKEN": str("s3cret-value")}),
		"timeout":          str("5m"),
		"max_output_bytes": tftypes.NewValue(tftypes.Number, 40),
	}, func(message string) {
		if message == "stdout: first ***" && !released {
			released = true
			release(t, srv)
		}
	})
	if len(got.errors) > 0 || !released {
		t.Fatalf("invocation failed: %q (progress %q)", got.errors, got.progress)
	}
	// 40 bytes of stdout: "first s3cret-value\n" (19, masked after counting) and 3 lines of 6.
	want := []string{"stdout: first ***", "stderr: warm", "stdout: line0", "stdout: line1", "stdout: line2",
		"stdout: 17 more lines not shown: the progress shows 40 bytes of each stream (max_output_bytes)"}
	all := strings.Join(got.progress, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("progress lacks %q:\n%s", w, all)
		}
	}
	if strings.Contains(all, "s3cret") || !strings.Contains(got.progress[len(got.progress)-1], "exited with code 0 in sandbox") {
		t.Errorf("progress shows the secret or ends without the exit code:\n%s", all)
	}
	ids, err := runningSandboxes(t.Context(), srv)
	acctest.Must(t, err)
	if len(ids) != 0 {
		t.Errorf("sandboxes %q still run after the invocation", ids)
	}
}

// release creates /tmp/go in the one sandbox srv runs, which TestAccProcessAction_progress's
// command waits for.
func release(t *testing.T, srv *acctest.Server) {
	t.Helper()
	api := testAPI(t, srv)
	ids, err := runningSandboxes(t.Context(), srv)
	acctest.Must(t, err)
	if len(ids) != 1 {
		t.Fatalf("sandboxes %q run, want the action's alone", ids)
	}
	res, err := sandboxrun.Run(t.Context(), api, sandboxrun.Request{SandboxID: ids[0], Run: envd.RunRequest{Command: "touch /tmp/go"}},
		sandboxrun.Options{Connect: func(sb *e2b.Sandbox) (*envd.Client, error) {
			return envd.New(envd.Config{BaseURL: srv.SandboxURL, SandboxID: sb.SandboxID, AccessToken: sb.EnvdAccessToken})
		}})
	if err != nil || res.Output.ExitCode != 0 {
		t.Fatalf("touch /tmp/go in %s: %v %+v", ids[0], err, res.Output)
	}
}

// TestAccProcessAction_fails invokes the action with a command that exits 3: the
// invocation fails with the exit code and stderr, after its lines came as progress, unless
// allow_non_zero_exit; a command that is both or neither of command and cmd is refused
// before any sandbox starts.
func TestAccProcessAction_fails(t *testing.T) {
	srv := localServer(t)
	template := actionTemplate(t, srv)
	s := configuredServer(t, t.Context(), srv)
	str := func(v string) tftypes.Value { return tftypes.NewValue(tftypes.String, v) }
	failing := map[string]tftypes.Value{"template": str(template), "command": str("echo migrating; echo 'no database' >&2; exit 3")}
	got := s.invoke(t, t.Context(), failing, nil)
	if len(got.errors) != 1 || !strings.Contains(got.errors[0], "Command failed: ") || !strings.Contains(got.errors[0], "exited with code 3") ||
		!strings.Contains(got.errors[0], "stderr:\nno database") {
		t.Errorf("errors %q, want the exit code and stderr", got.errors)
	}
	if all := strings.Join(got.progress, "\n"); !strings.Contains(all, "stdout: migrating") || !strings.Contains(all, "stderr: no database") {
		t.Errorf("progress %q lacks the output", got.progress)
	}
	failing["allow_non_zero_exit"] = tftypes.NewValue(tftypes.Bool, true)
	if got := s.invoke(t, t.Context(), failing, nil); len(got.errors) != 0 {
		t.Errorf("with allow_non_zero_exit: errors %q", got.errors)
	}
	both := map[string]tftypes.Value{"template": str(template), "command": str("true"), "cmd": str("/bin/true")}
	if got := s.invoke(t, t.Context(), both, nil); len(got.errors) != 1 || len(got.progress) != 0 {
		t.Errorf("command and cmd: errors %q, progress %q; want one error and nothing run", got.errors, got.progress)
	}
	ids, err := runningSandboxes(t.Context(), srv)
	acctest.Must(t, err)
	if len(ids) != 0 {
		t.Errorf("sandboxes %q still run after the invocations", ids)
	}
}

// TestAccProcessAction_trigger runs the action from a build's after_create trigger, when a
// Terraform 1.14+ is on PATH: a smoke test that passes lets the apply finish; one that
// exits 3 fails it with the exit code.
func TestAccProcessAction_trigger(t *testing.T) {
	t.Setenv("TF_ACC_TERRAFORM_PATH", terraform114(t, "an action_trigger"))
	srv := localServer(t)
	name := uniqueName("acc-action-trigger")
	config := func(command string) string {
		return srv.ProviderConfig() + fmt.Sprintf(`
resource "e2b_template" "t" {
  name = %q
}

action "e2b_process" "smoke" {
  config {
    template = "${e2b_template.t.name}:${e2b_template_build.b.build_id}"
    command  = %q
  }
}

resource "e2b_template_build" "b" {
  template_id = e2b_template.t.id
  from_image  = %q
  steps       = [{ workdir = "/" }]

  lifecycle {
    action_trigger {
      events  = [after_create, after_update]
      actions = [action.e2b_process.smoke]
    }
  }
}
`, name, command, srv.DebianImage)
	}
	tfresource.Test(t, tfresource.TestCase{
		ProtoV6ProviderFactories: factories(),
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_14_0)},
		Steps: []tfresource.TestStep{
			{Config: config("echo smoke test passed")},
			{Config: config("echo broken >&2; exit 3"), Taint: []string{"e2b_template_build.b"}, ExpectError: regexp.MustCompile(`exited with code 3`)},
		},
	})
}
