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
// from OpenTofu, which reports no list resources. Each page must describe every
// argument of its list resource and show its example as examples/ has it.
func TestListResourceDocs(t *testing.T) {
	root, err := acctest.ModuleRoot()
	acctest.Must(t, err)
	ctx := context.Background()
	for _, newList := range (&e2bProvider{}).ListResources(ctx) {
		r := newList()
		var meta resource.MetadataResponse
		r.Metadata(ctx, resource.MetadataRequest{ProviderTypeName: "e2b"}, &meta)
		var schema list.ListResourceSchemaResponse
		r.ListResourceConfigSchema(ctx, list.ListResourceSchemaRequest{}, &schema)
		t.Run(meta.TypeName, func(t *testing.T) {
			short := strings.TrimPrefix(meta.TypeName, "e2b_")
			page, err := os.ReadFile(filepath.Join(root, "templates", "list-resources", short+".md"))
			acctest.Must(t, err)
			example, err := os.ReadFile(filepath.Join(root, "examples", "list-resources", meta.TypeName, "list-resource.tfquery.hcl"))
			acctest.Must(t, err)
			if !strings.Contains(string(page), "```terraform\n"+string(example)+"```") {
				t.Errorf("the page of %s does not show examples/list-resources/%s/list-resource.tfquery.hcl as it is", meta.TypeName, meta.TypeName)
			}
			for name, attr := range schema.Schema.Attributes {
				if !strings.Contains(string(page), "- `"+name+"` ") || !strings.Contains(string(page), attr.GetMarkdownDescription()) {
					t.Errorf("the page of %s does not describe %s as its schema does: %s", meta.TypeName, name, attr.GetMarkdownDescription())
				}
			}
		})
	}
}

// TestActionDocs checks the hand-written pages of the actions (templates/actions), which
// tfplugindocs copies for the same reason: OpenTofu, whose schema it reads, has no
// actions. Each page must describe every argument of its action and show its example.
func TestActionDocs(t *testing.T) {
	root, err := acctest.ModuleRoot()
	acctest.Must(t, err)
	ctx := context.Background()
	for _, newAction := range (&e2bProvider{}).Actions(ctx) {
		a := newAction()
		var meta action.MetadataResponse
		a.Metadata(ctx, action.MetadataRequest{ProviderTypeName: "e2b"}, &meta)
		var schema action.SchemaResponse
		a.Schema(ctx, action.SchemaRequest{}, &schema)
		t.Run(meta.TypeName, func(t *testing.T) {
			short := strings.TrimPrefix(meta.TypeName, "e2b_")
			page, err := os.ReadFile(filepath.Join(root, "templates", "actions", short+".md"))
			acctest.Must(t, err)
			example, err := os.ReadFile(filepath.Join(root, "examples", "actions", meta.TypeName, "action.tf"))
			acctest.Must(t, err)
			if !strings.Contains(string(page), "```terraform\n"+string(example)+"```") {
				t.Errorf("the page of %s does not show examples/actions/%s/action.tf as it is", meta.TypeName, meta.TypeName)
			}
			if !strings.Contains(string(page), schema.Schema.MarkdownDescription) {
				t.Errorf("the page of %s does not give its description: %s", meta.TypeName, schema.Schema.MarkdownDescription)
			}
			for name, attr := range schema.Schema.Attributes {
				if !strings.Contains(string(page), "- `"+name+"` ") || !strings.Contains(string(page), attr.GetMarkdownDescription()) {
					t.Errorf("the page of %s does not describe %s as its schema does: %s", meta.TypeName, name, attr.GetMarkdownDescription())
				}
			}
		})
	}
}
