package provider

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/action"
	"github.com/hashicorp/terraform-plugin-framework/list"
	"github.com/hashicorp/terraform-plugin-framework/resource"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/acctest"
)

// TestListResourceDocs checks the hand-written pages of the list resources
// (templates/list-resources), which tfplugindocs copies: the schema JSON it reads comes
// from OpenTofu, which reports no list resources.
func TestListResourceDocs(t *testing.T) {
	ctx := context.Background()
	for _, newList := range (&e2bProvider{}).ListResources(ctx) {
		r := newList()
		var meta resource.MetadataResponse
		r.Metadata(ctx, resource.MetadataRequest{ProviderTypeName: "e2b"}, &meta)
		var schema list.ListResourceSchemaResponse
		r.ListResourceConfigSchema(ctx, list.ListResourceSchemaRequest{}, &schema)
		descriptions := map[string]string{}
		for name, attr := range schema.Schema.Attributes {
			descriptions[name] = attr.GetMarkdownDescription()
		}
		t.Run(meta.TypeName, func(t *testing.T) {
			checkPage(t, "list-resources", meta.TypeName, "list-resource.tfquery.hcl", "", descriptions)
		})
	}
}

// TestActionDocs checks the hand-written pages of the actions (templates/actions), which
// tfplugindocs copies for the same reason: OpenTofu has no actions.
func TestActionDocs(t *testing.T) {
	ctx := context.Background()
	for _, newAction := range (&e2bProvider{}).Actions(ctx) {
		a := newAction()
		var meta action.MetadataResponse
		a.Metadata(ctx, action.MetadataRequest{ProviderTypeName: "e2b"}, &meta)
		var schema action.SchemaResponse
		a.Schema(ctx, action.SchemaRequest{}, &schema)
		descriptions := map[string]string{}
		for name, attr := range schema.Schema.Attributes {
			descriptions[name] = attr.GetMarkdownDescription()
		}
		t.Run(meta.TypeName, func(t *testing.T) {
			checkPage(t, "actions", meta.TypeName, "action.tf", schema.Schema.MarkdownDescription, descriptions)
		})
	}
}

// checkPage checks templates/<kind>/<short name>.md, the page of typeName: it must give
// description, describe every argument as descriptions has it and show its example,
// examples/<kind>/<typeName>/<example>, as it is.
func checkPage(t *testing.T, kind, typeName, example, description string, descriptions map[string]string) {
	t.Helper()
	root, err := acctest.ModuleRoot()
	acctest.Must(t, err)
	page, err := os.ReadFile(filepath.Join(root, "templates", kind, strings.TrimPrefix(typeName, "e2b_")+".md"))
	acctest.Must(t, err)
	code, err := os.ReadFile(filepath.Join(root, "examples", kind, typeName, example))
	acctest.Must(t, err)
	if !strings.Contains(string(page), "```terraform\n"+string(code)+"```") {
		t.Errorf("the page of %s does not show examples/%s/%s/%s as it is", typeName, kind, typeName, example)
	}
	if !strings.Contains(string(page), description) {
		t.Errorf("the page of %s does not give its description: %s", typeName, description)
	}
	for name, d := range descriptions {
		if !strings.Contains(string(page), "- `"+name+"` ") || !strings.Contains(string(page), d) {
			t.Errorf("the page of %s does not describe %s as its schema does: %s", typeName, name, d)
		}
	}
}
