package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/actionvalidator"
	"github.com/hashicorp/terraform-plugin-framework/action"
	aschema "github.com/hashicorp/terraform-plugin-framework/action/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	envd "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
)

var (
	_ action.ActionWithConfigure        = (*processAction)(nil)
	_ action.ActionWithConfigValidators = (*processAction)(nil)
)

// NewProcessAction is the e2b_process action (Terraform 1.14 and later): the command of
// the e2b_process data source, run once per invocation in a new sandbox, its output
// shown as progress while it runs.
func NewProcessAction() action.Action { return &processAction{} }

type processAction struct {
	data *ProviderData
}

func (a *processAction) Metadata(_ context.Context, req action.MetadataRequest, resp *action.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_process"
}

func (a *processAction) Schema(_ context.Context, _ action.SchemaRequest, resp *action.SchemaResponse) {
	resp.Schema = aschema.Schema{
		MarkdownDescription: "Runs one command in a new sandbox of `template` each time the action is invoked " +
			"(Terraform 1.14 and later: an `action_trigger` of a resource's lifecycle, or " +
			"`terraform apply -invoke=action.e2b_process.<name>`), and kills the sandbox when it ends, also on " +
			"error and cancellation. Each line of stdout and stderr is shown as progress while the command runs, " +
			"up to `max_output_bytes` of each. A non-zero exit code fails the invocation with the code and the " +
			"end of stderr unless `allow_non_zero_exit` is set. The progress shows the command's output, never its " +
			"arguments, with the values of `env` (of 4 bytes or more) masked: pass secrets in `env`.",
		Attributes: processActionAttributes(),
	}
}

func (a *processAction) ConfigValidators(context.Context) []action.ConfigValidator {
	// The action has no sandbox_id: of processExclusive's pairs only the command's applies.
	return []action.ConfigValidator{actionvalidator.ExactlyOneOf(path.MatchRoot("command"), path.MatchRoot("cmd"))}
}

func (a *processAction) Configure(_ context.Context, req action.ConfigureRequest, resp *action.ConfigureResponse) {
	a.data, resp.Diagnostics = providerDataFrom(req.ProviderData)
}

func (a *processAction) Invoke(ctx context.Context, req action.InvokeRequest, resp *action.InvokeResponse) {
	var m processArgumentsModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	run, diags := m.request(ctx)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	progress := newProcessProgress(run.Run.MaxOutputBytes, run.Run.Env, func(message string) {
		resp.SendProgress(action.InvokeProgressEvent{Message: message})
	})
	res, diags := runSandboxCommand(ctx, a.data, run, progress.line)
	progress.end()
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.SendProgress(action.InvokeProgressEvent{Message: fmt.Sprintf("exited with code %d in sandbox %s (killed since)", res.Output.ExitCode, res.SandboxID)})
	m.checkExit(&resp.Diagnostics, run, res)
}

// processActionAttributes are processAttributes as the action's attributes: the
// arguments that are no result.
func processActionAttributes() map[string]aschema.Attribute {
	out := map[string]aschema.Attribute{}
	for _, a := range processAttributes() {
		if !a.argument || a.result {
			continue
		}
		description := a.description
		if a.actionDescription != "" {
			description = a.actionDescription
		}
		optional := !a.actionRequired
		switch a.kind {
		case stringAttribute:
			out[a.name] = aschema.StringAttribute{MarkdownDescription: description, Optional: optional, Required: a.actionRequired, Validators: a.strings}
		case int64Attribute:
			out[a.name] = aschema.Int64Attribute{MarkdownDescription: description, Optional: optional, Required: a.actionRequired, Validators: a.int64s}
		case boolAttribute:
			out[a.name] = aschema.BoolAttribute{MarkdownDescription: description, Optional: optional, Required: a.actionRequired}
		case stringListAttribute:
			out[a.name] = aschema.ListAttribute{MarkdownDescription: description, Optional: optional, Required: a.actionRequired, ElementType: types.StringType}
		case stringMapAttribute:
			out[a.name] = aschema.MapAttribute{MarkdownDescription: description, Optional: optional, Required: a.actionRequired, ElementType: types.StringType}
		}
	}
	return out
}

// processProgress sends a run's output lines as progress messages, up to a cap of bytes
// per stream, and says at the end what the cap left out. The values of env are masked:
// env is where secrets go, and a command that echoes one must not put it in CI logs.
type processProgress struct {
	limit   int64
	mask    *strings.Replacer
	send    func(message string)
	sent    map[envd.Stream]int64
	skipped map[envd.Stream]int
}

// minMaskedBytes: shorter env values (a "1", a "true") are too common in output to mask.
const minMaskedBytes = 4

func newProcessProgress(limit int64, env map[string]string, send func(message string)) *processProgress {
	var pairs []string
	for _, v := range env {
		if len(v) >= minMaskedBytes {
			pairs = append(pairs, v, "***")
		}
	}
	return &processProgress{limit: limit, mask: strings.NewReplacer(pairs...), send: send,
		sent: map[envd.Stream]int64{}, skipped: map[envd.Stream]int{}}
}

// line is a sandboxrun.Options.OnLine.
func (p *processProgress) line(stream envd.Stream, line string) {
	n := int64(len(line)) + 1
	if p.sent[stream]+n > p.limit {
		p.skipped[stream]++
		p.sent[stream] = p.limit // what follows a line past the cap is not shown either
		return
	}
	p.sent[stream] += n
	p.send(stream.String() + ": " + p.mask.Replace(validUTF8([]byte(line))))
}

// end says how many lines of each stream the cap left out.
func (p *processProgress) end() {
	for _, s := range []envd.Stream{envd.Stdout, envd.Stderr} {
		if p.skipped[s] > 0 {
			p.send(fmt.Sprintf("%s: %d more lines not shown: the progress shows %d bytes of each stream (max_output_bytes)", s, p.skipped[s], p.limit))
		}
	}
}
