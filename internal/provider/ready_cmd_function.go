package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/function"
)

// readyCmdFunction is a provider function returning the ready command of one
// of the E2B SDK's helpers (internal/readycmd); each has a file of its own
// with its definition and how its arguments become the command.
type readyCmdFunction struct {
	name       string
	definition function.Definition
	command    func(ctx context.Context, args function.ArgumentsData) (string, *function.FuncError)
}

var _ function.Function = (*readyCmdFunction)(nil)

// readyCmdSDKNote ends each function's description.
const readyCmdSDKNote = " The command is exactly the one the E2B SDK's helper of the same name returns, so a template " +
	"defined here and one defined with the SDK build alike. Use it as `ready_cmd` of `e2b_template_build`: the build " +
	"runs it until it exits 0."

func (f *readyCmdFunction) Metadata(_ context.Context, _ function.MetadataRequest, resp *function.MetadataResponse) {
	resp.Name = f.name
}

func (f *readyCmdFunction) Definition(_ context.Context, _ function.DefinitionRequest, resp *function.DefinitionResponse) {
	resp.Definition = f.definition
	resp.Definition.Return = function.StringReturn{}
	resp.Definition.MarkdownDescription += readyCmdSDKNote
}

func (f *readyCmdFunction) Run(ctx context.Context, req function.RunRequest, resp *function.RunResponse) {
	cmd, err := f.command(ctx, req.Arguments)
	if err != nil {
		resp.Error = err
		return
	}
	resp.Error = resp.Result.Set(ctx, cmd)
}

// oneArgReadyCmd is a ready-command function of the one parameter def has,
// which cmd turns into the command.
func oneArgReadyCmd[T any](name string, def function.Definition, cmd func(T) string) function.Function {
	return &readyCmdFunction{name: name, definition: def, command: func(ctx context.Context, args function.ArgumentsData) (string, *function.FuncError) {
		var v T
		if err := args.Get(ctx, &v); err != nil {
			return "", err
		}
		return cmd(v), nil
	}}
}
