package provider

import (
	"context"
	"maps"
	"testing"

	"github.com/google/uuid"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/acctest"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
)

// The identity contract (common_identity.go), checked through the framework's server as
// the CLIs call it: a CLI before 1.12, or one holding a state an earlier release wrote,
// sends no identity, and every operation must still answer one, removals included.

// TestResourceIdentity_namesStateAttributes checks what identityFromState relies on:
// each identity attribute of each resource is a string attribute of its state.
func TestResourceIdentity_namesStateAttributes(t *testing.T) {
	ctx := context.Background()
	for _, newResource := range New("test")().Resources(ctx) {
		r := newResource()
		var meta resource.MetadataResponse
		r.Metadata(ctx, resource.MetadataRequest{ProviderTypeName: "e2b"}, &meta)
		withIdentity, ok := r.(resource.ResourceWithIdentity)
		if !ok {
			continue
		}
		var identity resource.IdentitySchemaResponse
		withIdentity.IdentitySchema(ctx, resource.IdentitySchemaRequest{}, &identity)
		var schema resource.SchemaResponse
		r.Schema(ctx, resource.SchemaRequest{}, &schema)
		for name, a := range identity.IdentitySchema.Attributes {
			state, ok := schema.Schema.Attributes[name]
			if !ok || !state.GetType().Equal(types.StringType) || !a.GetType().Equal(types.StringType) {
				t.Errorf("%s: identity attribute %q is not a string attribute of the state", meta.TypeName, name)
			}
		}
	}
}

// stateType and identityType are the object types of typeName's state and identity.
func (s *servedProvider) stateType(typeName string) tftypes.Type {
	return s.schemas.ResourceSchemas[typeName].ValueType()
}

func (s *servedProvider) identityType(typeName string) tftypes.Type {
	return s.identities.IdentitySchemas[typeName].ValueType()
}

// stringsOf is the string attributes of an object value (other attributes left out), nil
// for a null or missing value.
func stringsOf(t *testing.T, typ tftypes.Type, dv *tfprotov6.DynamicValue) map[string]string {
	t.Helper()
	if dv == nil {
		return nil
	}
	v, err := dv.Unmarshal(typ)
	acctest.Must(t, err)
	if v.IsNull() {
		return nil
	}
	var attrs map[string]tftypes.Value
	acctest.Must(t, v.As(&attrs))
	out := map[string]string{}
	for name, a := range attrs {
		var s string
		if a.Type().Is(tftypes.String) && a.IsKnown() && !a.IsNull() {
			acctest.Must(t, a.As(&s))
			out[name] = s
		}
	}
	return out
}

func stringValues(attrs map[string]string) map[string]tftypes.Value {
	out := map[string]tftypes.Value{}
	for name, v := range attrs {
		out[name] = tftypes.NewValue(tftypes.String, v)
	}
	return out
}

func failOnErrors(t *testing.T, what string, diags []*tfprotov6.Diagnostic) {
	t.Helper()
	for _, d := range diags {
		if d.Severity == tfprotov6.DiagnosticSeverityError {
			t.Errorf("%s: %s: %s", what, d.Summary, d.Detail)
		}
	}
}

// read reads typeName from a state of state's attributes (the rest null) without an
// identity and returns the new state's strings (nil when Read removed it) and the
// identity's.
func (s *servedProvider) read(t *testing.T, ctx context.Context, typeName string, state map[string]string) (map[string]string, map[string]string) {
	t.Helper()
	resp, err := s.ReadResource(ctx, &tfprotov6.ReadResourceRequest{
		TypeName:     typeName,
		CurrentState: dynamicValue(t, s.stateType(typeName), stringValues(state)),
	})
	acctest.Must(t, err)
	failOnErrors(t, "read "+typeName, resp.Diagnostics)
	newState := stringsOf(t, s.stateType(typeName), resp.NewState)
	var identity map[string]string
	if resp.NewIdentity != nil {
		identity = stringsOf(t, s.identityType(typeName), resp.NewIdentity.IdentityData)
	}
	return newState, identity
}

// importByID imports typeName by id, as `terraform import` does, and returns the
// identity of the imported object.
func (s *servedProvider) importByID(t *testing.T, ctx context.Context, typeName, id string) map[string]string {
	t.Helper()
	resp, err := s.ImportResourceState(ctx, &tfprotov6.ImportResourceStateRequest{TypeName: typeName, ID: id})
	acctest.Must(t, err)
	failOnErrors(t, "import "+typeName, resp.Diagnostics)
	if len(resp.ImportedResources) != 1 || resp.ImportedResources[0].Identity == nil {
		t.Fatalf("import %s %s: %d objects, want one with an identity", typeName, id, len(resp.ImportedResources))
	}
	identity := stringsOf(t, s.identityType(typeName), resp.ImportedResources[0].Identity.IdentityData)
	return identity
}

// apply plans and applies config over prior (nil: a create) without identities and
// returns the new state's strings and the identity's.
func (s *servedProvider) apply(t *testing.T, ctx context.Context, typeName string, prior, config map[string]tftypes.Value) (map[string]string, map[string]string) {
	t.Helper()
	typ := s.stateType(typeName)
	priorValue := dynamicValue(t, typ, prior)
	if prior == nil {
		dv, err := tfprotov6.NewDynamicValue(typ, tftypes.NewValue(typ, nil))
		acctest.Must(t, err)
		priorValue = &dv
	}
	proposed := maps.Clone(prior)
	if proposed == nil {
		proposed = map[string]tftypes.Value{}
	}
	maps.Copy(proposed, config)
	configValue := dynamicValue(t, typ, config)
	plan, err := s.PlanResourceChange(ctx, &tfprotov6.PlanResourceChangeRequest{
		TypeName: typeName, PriorState: priorValue, ProposedNewState: dynamicValue(t, typ, proposed), Config: configValue,
	})
	acctest.Must(t, err)
	failOnErrors(t, "plan "+typeName, plan.Diagnostics)
	resp, err := s.ApplyResourceChange(ctx, &tfprotov6.ApplyResourceChangeRequest{
		TypeName: typeName, PriorState: priorValue, PlannedState: plan.PlannedState, Config: configValue, PlannedPrivate: plan.PlannedPrivate,
	})
	acctest.Must(t, err)
	failOnErrors(t, "apply "+typeName, resp.Diagnostics)
	newState := stringsOf(t, typ, resp.NewState)
	var identity map[string]string
	if resp.NewIdentity != nil {
		identity = stringsOf(t, s.identityType(typeName), resp.NewIdentity.IdentityData)
	}
	return newState, identity
}

func expectIdentity(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if !maps.Equal(got, want) {
		t.Errorf("%s: identity %v, want %v", what, got, want)
	}
}

// TestResourceIdentity_oldCLI reads every resource on each of its paths (the object as it
// is, and removed: deleted, failed, never started, its template deleted) with no identity
// in the request, imports each by ID, and creates and updates a template without
// identities: each answers the identity of the object, and a read of the removed object
// the identity of the prior state.
func TestResourceIdentity_oldCLI(t *testing.T) {
	srv := outsideServer(t)
	ctx := t.Context()
	out := outsideOf(t, srv)
	s := configuredServer(t, ctx, srv)

	name, goneName := uniqueName("identity"), uniqueName("identity-gone")
	templateID := builtTemplate(t, out.api, name)
	ready, _ := out.build(&templateID, srv.BaseImage, "true", "prod")
	failed, isFailed := out.build(&templateID, srv.BaseImage, "exit 3", "broken")
	if !isFailed {
		t.Fatal("the build with exit 3 did not fail")
	}
	waiting, err := out.api.CreateTemplateBuild(ctx, e2b.TemplateBuildRequestV3{Name: name, Tags: []string{"later"}})
	acctest.Must(t, err)
	gone, err := out.api.CreateTemplateBuild(ctx, e2b.TemplateBuildRequestV3{Name: goneName})
	acctest.Must(t, err)
	goneBuild, _ := out.build(&gone.TemplateID, srv.BaseImage, "true", "prod")
	out.deleteTemplate(&gone.TemplateID)()

	type readCase struct {
		what, typeName string
		state          map[string]string
		removed        bool
		identity       map[string]string
	}
	template := func(id string) map[string]string { return map[string]string{"id": id} }
	build := func(templateID, buildID string) map[string]string {
		return map[string]string{"template_id": templateID, "build_id": buildID}
	}
	alias := func(template, tag string) map[string]string {
		return map[string]string{"template": template, "tag": tag}
	}
	with := func(m map[string]string, kv ...string) map[string]string {
		m = maps.Clone(m)
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	unknown := uuid.NewString()
	cases := []readCase{
		{"template", "e2b_template", with(template(templateID), "name", name), false, template(templateID)},
		{"deleted template", "e2b_template", with(template(gone.TemplateID), "name", goneName), true, template(gone.TemplateID)},
		{"ready build", "e2b_template_build", with(build(templateID, ready), "id", ready, "status", "ready"), false, build(templateID, ready)},
		{"failed build", "e2b_template_build", with(build(templateID, failed), "id", failed, "status", "ready"), true, build(templateID, failed)},
		{"waiting build", "e2b_template_build", with(build(templateID, waiting.BuildID), "id", waiting.BuildID), true, build(templateID, waiting.BuildID)},
		{"build of a deleted template", "e2b_template_build", with(build(gone.TemplateID, goneBuild), "status", "ready"), true, build(gone.TemplateID, goneBuild)},
		{"unknown build", "e2b_template_build", build(templateID, unknown), true, build(templateID, unknown)},
		{"alias", "e2b_alias", with(alias(name, "prod"), "build_id", ready), false, alias(name, "prod")},
		{"deleted tag", "e2b_alias", with(alias(name, "gone"), "build_id", ready), true, alias(name, "gone")},
		{"alias of a deleted template", "e2b_alias", with(alias(goneName, "prod"), "build_id", goneBuild), true, alias(goneName, "prod")},
	}
	for _, c := range cases {
		state, identity := s.read(t, ctx, c.typeName, c.state)
		if (state == nil) != c.removed {
			t.Errorf("read %s: state %v, want removed %v", c.what, state, c.removed)
		}
		expectIdentity(t, "read "+c.what, identity, c.identity)
	}

	// Every resource with an identity, also one added later: a read of its object after
	// the template was deleted removes it and answers the prior state's identity.
	deleted := map[string]string{"id": gone.TemplateID, "template_id": gone.TemplateID, "build_id": goneBuild, "template": goneName, "tag": "prod"}
	for typeName, schema := range s.identities.IdentitySchemas {
		state := map[string]string{}
		for _, a := range schema.IdentityAttributes {
			v, ok := deleted[a.Name]
			if !ok {
				t.Fatalf("%s: give identity attribute %q a value naming a deleted object here", typeName, a.Name)
			}
			state[a.Name] = v
		}
		newState, identity := s.read(t, ctx, typeName, state)
		if newState != nil {
			t.Errorf("read %s of a deleted template: state %v, want it removed", typeName, newState)
		}
		expectIdentity(t, "read "+typeName+" of a deleted template", identity, state)
	}

	expectIdentity(t, "import template by name", s.importByID(t, ctx, "e2b_template", name), template(templateID))
	expectIdentity(t, "import build", s.importByID(t, ctx, "e2b_template_build", templateID+"/"+ready), build(templateID, ready))
	expectIdentity(t, "import alias", s.importByID(t, ctx, "e2b_alias", name+":prod"), alias(name, "prod"))

	created := uniqueName("identity-created")
	config := map[string]tftypes.Value{"name": tftypes.NewValue(tftypes.String, created)}
	state, identity := s.apply(t, ctx, "e2b_template", nil, config)
	if state["id"] == "" {
		t.Fatalf("create template: state %v", state)
	}
	t.Cleanup(func() { _ = out.api.DeleteTemplate(context.Background(), state["id"]) })
	expectIdentity(t, "create template", identity, template(state["id"]))
	prior := stringValues(state)
	prior["public"] = tftypes.NewValue(tftypes.Bool, false)
	config["public"] = tftypes.NewValue(tftypes.Bool, true)
	_, identity = s.apply(t, ctx, "e2b_template", prior, config)
	expectIdentity(t, "update template", identity, template(state["id"]))
}
