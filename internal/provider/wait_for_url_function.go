package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/function"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/readycmd"
)

// NewWaitForURLFunction is provider::e2b::wait_for_url(url, [status_code]).
func NewWaitForURLFunction() function.Function {
	return &readyCmdFunction{
		name: "wait_for_url",
		definition: function.Definition{
			Summary: "Ready command: wait until a URL answers with an HTTP status",
			MarkdownDescription: fmt.Sprintf("Returns a ready command that succeeds once `url` answers with the HTTP status `status_code` "+
				"(default %d, as in the SDK), checked with `curl`. The URL is quoted for the shell where it needs to be.", readycmd.DefaultStatusCode),
			Parameters: []function.Parameter{function.StringParameter{
				Name:                "url",
				MarkdownDescription: "The URL to request, such as `http://localhost:3000/health`.",
			}},
			VariadicParameter: function.Int64Parameter{
				Name:                "status_code",
				MarkdownDescription: fmt.Sprintf("The HTTP status to wait for, from 100 to 599; optional, at most one (default %d).", readycmd.DefaultStatusCode),
				Validators:          []function.Int64ParameterValidator{int64validator.Between(100, 599)},
			},
		},
		command: func(ctx context.Context, args function.ArgumentsData) (string, *function.FuncError) {
			var url string
			var codes []int64
			if err := args.Get(ctx, &url, &codes); err != nil {
				return "", err
			}
			switch len(codes) {
			case 0:
				return readycmd.WaitForURL(url, readycmd.DefaultStatusCode), nil
			case 1:
				return readycmd.WaitForURL(url, codes[0]), nil
			}
			return "", function.NewArgumentFuncError(1, fmt.Sprintf("wait_for_url takes one status code at most, got %d", len(codes)))
		},
	}
}
