package provider

// The schema of e2b_template_build, in groups a reader can take one at a time: what the
// build starts from, its steps, what its sandboxes start with, how it is made, and what
// it results in.

import (
	"context"
	"fmt"
	"regexp"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/boolplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/templatebuild"
)

const templateBuildDescription = "One build of an E2B template: a base (`from_image`, `from_template` or a `dockerfile`) " +
	"and ordered build steps, run by E2B (or the local server) into a snapshot that sandboxes start from.\n\n" +
	"**Planning** hashes every COPY source (see [the hashing guide](../guides/hashing.md)): the hashes are shown in `copy_hashes`, " +
	"and a changed hash, like any changed argument, replaces the build. An unchanged context plans nothing, " +
	"also from a fresh clone with other modification times and umask. Nothing is uploaded during a plan.\n\n" +
	"**Apply** uploads only the COPY archives E2B does not have yet, each checked against its planned hash " +
	"as it is written (one read of the context; an archive E2B has is the one the plan hashed), starts " +
	"the build and follows it to the end, logging every build log line. The build ID is saved in the state before waiting, so a build whose apply timed out is still tracked: " +
	"the apply fails (a CI run does not pass on an unfinished build), the build goes on, and the next " +
	"apply waits for that build instead of building again (see `timeouts`).\n\n" +
	"**Reuse** (`reuse = true`): a build whose `spec_hash` a ready build of the template already carries " +
	"(as its tag `spec-<first 16 hex>`) is not built again: the plan shows that build's ID and says so, and " +
	"apply gives it this resource's tags. A fresh state, another workspace or another checkout of the same " +
	"configuration reuses the build. A build of the same `spec_hash` still running (another apply's) is " +
	"waited for and reused when it ends ready, rather than cancelled by building again; the template's first " +
	"build is the exception, as it runs on the build E2B registered with the template, which gets its spec " +
	"tag only once ready.\n\n" +
	"**Destroy** only forgets the build, reused or not: E2B cannot delete a single build, and it removes no " +
	"tag, as another state may rely on them. Builds go when their template (`e2b_template`) is deleted."

// buildBaseAttributes are what the build starts from and where COPY takes its files: the template, an image (with its registry), a template or a Dockerfile (with its build arguments), and the context.
func buildBaseAttributes() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"template_id": schema.StringAttribute{
			MarkdownDescription: "ID of the template to build (`e2b_template.<name>.id`).",
			Required:            true,
			Validators:          []validator.String{stringCheck{"must be a template ID", e2b.ValidateTemplateID}},
			PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
		},
		"from_image": schema.StringAttribute{
			MarkdownDescription: "Base Docker image, such as `ubuntu:22.04`. Exactly one of `from_image`, " +
				"`from_template` and `dockerfile` is required.",
			Optional:      true,
			Validators:    []validator.String{stringvalidator.LengthAtLeast(1)},
			PlanModifiers: []planmodifier.String{replaceUnlessImported{}},
		},
		"from_image_registry": schema.SingleNestedAttribute{
			MarkdownDescription: "Credentials for a private `from_image` registry. `type` selects which other " +
				"attributes apply: `registry` (`username`, `password`), `aws` (`aws_access_key_id`, " +
				"`aws_secret_access_key`, `aws_region`) or `gcp` (`service_account_json`). The plain secret " +
				"attributes are sensitive but kept in the state like every other argument; with Terraform or " +
				"OpenTofu 1.11 or later use their write-only twins (`password_wo`, `aws_secret_access_key_wo`, " +
				"`service_account_json_wo`), which are sent to E2B and never stored. A write-only secret is not " +
				"compared between plans: change its `*_wo_version` to make a new build with a new secret.",
			Optional:      true,
			Attributes:    registryAttributes(),
			PlanModifiers: []planmodifier.Object{replaceUnlessImported{}},
		},
		"from_template": schema.StringAttribute{
			MarkdownDescription: "Base E2B template, by name (`name`, `name:tag`) or ID; the build starts from its snapshot.",
			Optional:            true,
			Validators:          []validator.String{templateRunRefValidator()},
			PlanModifiers:       []planmodifier.String{replaceUnlessImported{}},
		},
		"dockerfile": schema.StringAttribute{
			MarkdownDescription: "A Dockerfile, as the path of a file or as its content. It is converted into " +
				"a base image, build steps and start/ready commands the way the E2B SDK does: one `FROM` only; " +
				"`RUN`, `COPY`/`ADD`, `ENV`/`ARG`, `WORKDIR`, `USER` become steps, `CMD`/`ENTRYPOINT` the start " +
				"command. Multi-stage builds and instructions without an E2B equivalent are refused with their " +
				"line number, and so is `RUN --mount=type=secret` (E2B builds have no build secrets). `steps` run " +
				"after the Dockerfile's own steps, as its default user `user` in `/home/user` unless they say " +
				"otherwise. Only the content counts: a Dockerfile moved " +
				"elsewhere (another checkout path) with the same content does not make a new build, and the " +
				"state keeps the path it was built from.",
			Optional:   true,
			Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
		},
		"build_args": schema.MapAttribute{
			MarkdownDescription: "Values of the `dockerfile`'s `ARG`s, over their defaults, as `docker build --build-arg` " +
				"sets them (an `ARG` before `FROM` also names the base image). An `ARG` becomes an environment " +
				"variable of later steps and of sandboxes, as in the E2B SDK. A name no `ARG` declares is an " +
				"error, where Docker only warns: the build would not be the one asked for.",
			ElementType:   types.StringType,
			Optional:      true,
			Validators:    []validator.Map{mapvalidator.AlsoRequires(path.MatchRoot("dockerfile"))},
			PlanModifiers: []planmodifier.Map{replaceUnlessImported{}},
		},
		"context": schema.StringAttribute{
			MarkdownDescription: "Directory COPY sources are taken from. Defaults to the directory of " +
				"`dockerfile` when it is a path, else Terraform's working directory (the root module). " +
				"A `.dockerignore` file in it excludes files with Docker's rules. Relative paths are taken " +
				"from Terraform's working directory; `path.module` makes them work from any module. Only the " +
				"files count (`copy_hashes`): the same files at another path (another checkout, an `abspath` " +
				"of it) do not make a new build, and the state keeps the path the build was made from.",
			Optional:   true,
			Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
		},
	}
}

// buildSandboxAttributes are what sandboxes of the build start with: the start and ready commands, vCPUs and memory.
func buildSandboxAttributes() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"start_cmd": schema.StringAttribute{
			MarkdownDescription: "Command started at the end of the build and kept running in every sandbox.",
			Optional:            true,
			PlanModifiers:       []planmodifier.String{replaceUnlessImported{}},
		},
		"ready_cmd": schema.StringAttribute{
			MarkdownDescription: "Command repeated until it exits 0 before the snapshot is taken (defaults on E2B's side to `sleep 20` with a start command).",
			Optional:            true,
			PlanModifiers:       []planmodifier.String{replaceUnlessImported{}},
		},
		"cpu_count": schema.Int64Attribute{
			MarkdownDescription: "vCPUs of sandboxes from this build: 1 or an even number up to 32 (and your team's limit). E2B's default is 2.",
			Optional:            true,
			Validators:          []validator.Int64{cpuCountValidator()},
			PlanModifiers:       []planmodifier.Int64{replaceUnlessImported{}},
		},
		"memory_mb": schema.Int64Attribute{
			MarkdownDescription: "Memory of sandboxes from this build in MiB: an even number of at least 128 (and within your team's limit). E2B's default is 1024.",
			Optional:            true,
			Validators:          []validator.Int64{memoryMBValidator()},
			PlanModifiers:       []planmodifier.Int64{replaceUnlessImported{}},
		},
	}
}

// buildControlAttributes decide how the build is made and told apart: its tags, the layer cache, reuse, the hash mode and triggers.
func buildControlAttributes() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"tags": schema.SetAttribute{
			MarkdownDescription: "Tags given to the build; once it is ready, `name:tag` starts sandboxes from it. Without tags the build gets `default`. " +
				"The first build of a template carries `default` too: it runs on the build E2B registered with the template. " +
				"E2B cancels a build when another build of its template sharing a tag starts, so builds of one template " +
				"in one apply that share a tag (`default` included) start one after the other; all of them complete.",
			ElementType:   types.StringType,
			Optional:      true,
			Validators:    []validator.Set{setvalidator.ValueStringsAre(tagValidator())},
			PlanModifiers: []planmodifier.Set{replaceUnlessImported{}},
		},
		"force": schema.BoolAttribute{
			MarkdownDescription: "Rebuild every layer instead of reusing E2B's layer cache. Defaults to `false`.",
			Optional:            true,
			Computed:            true,
			Default:             booldefault.StaticBool(false),
			PlanModifiers:       []planmodifier.Bool{boolplanmodifier.RequiresReplace()},
		},
		"reuse": schema.BoolAttribute{
			MarkdownDescription: "Reuse a ready build of the template with the same `spec_hash` instead of building, " +
				"and tag this build `spec-<first 16 hex of spec_hash>` so that others can reuse it. The plan looks the " +
				"build up when `template_id` is known (the only API call of a plan) and shows its `build_id`. " +
				"`force` builds anyway (a forced build is meant to run), still with the tag. Changing `reuse` " +
				"changes nothing but that tag: turning it on tags the existing build. Defaults to `false`.",
			Optional: true,
			Computed: true,
			Default:  booldefault.StaticBool(false),
		},
		"files_hash": schema.StringAttribute{
			MarkdownDescription: "How COPY sources are hashed: `portable` (default: the same on every machine and " +
				"filesystem) or `e2b-sdk` (what the E2B SDKs compute, so uploads are shared with SDK users of " +
				"your team; depends on directory sizes, so not portable across filesystems).",
			Optional:      true,
			Computed:      true,
			Default:       stringdefault.StaticString(templatebuild.HashPortable),
			Validators:    []validator.String{stringvalidator.OneOf(templatebuild.HashPortable, templatebuild.HashSDK)},
			PlanModifiers: []planmodifier.String{replaceUnlessImported{}},
		},
		"triggers": schema.MapAttribute{
			MarkdownDescription: "Arbitrary values; changing any of them makes a new build (for example a date, to pick up a moving base image tag).",
			ElementType:         types.StringType,
			Optional:            true,
			PlanModifiers:       []planmodifier.Map{replaceUnlessImported{}},
		},
	}
}

// buildResultAttributes are what the plan and E2B tell of the build, all computed: its IDs, the hashes of what it is made of, its status.
func buildResultAttributes() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"id": schema.StringAttribute{
			MarkdownDescription: "The build ID (same as `build_id`).",
			Computed:            true,
			PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
		},
		"build_id": schema.StringAttribute{
			MarkdownDescription: "Build ID (a UUID). Sandboxes can start from exactly this build with `name:<build_id>`.",
			Computed:            true,
			PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
		},
		"copy_hashes": schema.ListAttribute{
			MarkdownDescription: "Files hash of every COPY step, in build order (including the COPY instructions of a `dockerfile`). Unknown when the context is not known at plan time.",
			ElementType:         types.StringType,
			Computed:            true,
		},
		"dockerfile_hash": schema.StringAttribute{
			MarkdownDescription: "SHA-256 of the Dockerfile's content (hex); null without `dockerfile`. A changed " +
				"content replaces the build, a moved file does not.",
			Computed: true,
		},
		"spec_hash": schema.StringAttribute{
			MarkdownDescription: "SHA-256 (hex) of everything that defines the build: its base, every step with the " +
				"files hash of each COPY, the start and ready commands, `cpu_count`, `memory_mb` and `triggers`; " +
				"not the tags, `force`, credentials or where the files are. Known at plan time whenever `copy_hashes` " +
				"is, and the same on every machine and checkout path (see [the hashing guide](../guides/hashing.md)).",
			Computed: true,
		},
		"status": schema.StringAttribute{
			MarkdownDescription: "Build status: `ready`, or `building` when the apply stopped waiting before the end.",
			Computed:            true,
			PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
		},
	}
}

// buildTimeoutsAttribute bounds the waits of create and update.
func buildTimeoutsAttribute(ctx context.Context) schema.Attribute {
	return timeouts.Attributes(ctx, timeouts.Opts{Create: true, Update: true,
		CreateDescription: "How long to wait for the build, from `1s` to `168h` (default `60m`). When it elapses the build goes on " +
			"on the server and the apply fails, so that a CI run does not pass on an unfinished build. Run apply again " +
			"to wait for it: Terraform replaces the tainted resource, and the new one adopts the build still running " +
			"(same template and `spec_hash`) instead of building again.",
		UpdateDescription: "How long to wait for a build that an earlier apply left running, from `1s` to `168h` (default `60m`). " +
			"When it elapses the apply fails and the state keeps the build with status `building`: the next apply waits again.",
	})
}

var modePattern = regexp.MustCompile(`^0?[0-7]{3}$`)

// stepsAttribute is the schema of steps: one nested object per step model.
func stepsAttribute() schema.ListNestedAttribute {
	return schema.ListNestedAttribute{
		MarkdownDescription: "Build steps, run in order (after a `dockerfile`'s own). Each step sets exactly one of " +
			"`run`, `copy`, `env`, `workdir` and `user`, and may set `skip_cache`.",
		Optional: true,
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"run": schema.SingleNestedAttribute{
				MarkdownDescription: "Run a shell command (`bash -l -c`); a non-zero exit fails the build. " +
					"Exactly one of `command` and `commands` is required.",
				Optional: true,
				Attributes: map[string]schema.Attribute{
					"command": schema.StringAttribute{
						MarkdownDescription: "The command.",
						Optional:            true,
					},
					"commands": schema.ListAttribute{
						MarkdownDescription: "Commands joined with ` && ` into one step, as the SDK's `runCmd([...])`: the first to fail stops the step.",
						ElementType:         types.StringType,
						Optional:            true,
						Validators:          []validator.List{listvalidator.SizeAtLeast(1), listvalidator.ValueStringsAre(stringvalidator.LengthAtLeast(1))},
					},
					"user": schema.StringAttribute{MarkdownDescription: "User to run it as, for this step only.", Optional: true},
				},
			},
			"copy": schema.SingleNestedAttribute{
				MarkdownDescription: "Copy files from `context` into the template, with Docker's COPY semantics.",
				Optional:            true,
				Attributes: map[string]schema.Attribute{
					"src": schema.StringAttribute{
						MarkdownDescription: "Source relative to `context`: a file, a directory or a glob (`*`, `?`, `[...]`, `**`). It must stay inside the context.",
						Required:            true,
						Validators:          []validator.String{stringCheck{"must be a relative path inside the context", templatebuild.CheckCopySource}},
					},
					"dest": schema.StringAttribute{MarkdownDescription: "Destination; a trailing `/` copies into that directory.", Required: true},
					"user": schema.StringAttribute{MarkdownDescription: "Owner (`user` or `user:group`) of the copied files; defaults to the current user.", Optional: true},
					"mode": schema.StringAttribute{
						MarkdownDescription: "Octal permissions applied to the copied files, such as `0755`.",
						Optional:            true,
						Validators:          []validator.String{stringvalidator.RegexMatches(modePattern, "must be octal permissions such as 0755")},
					},
					"resolve_symlinks": schema.BoolAttribute{
						MarkdownDescription: "Copy what symlinks inside the context point to instead of the links. Defaults to `false`.",
						Optional:            true,
					},
					"force_upload": schema.BoolAttribute{
						MarkdownDescription: "Upload the files even when E2B already has an archive with their files hash, and " +
							"run this step without the layer cache (the SDK's `forceUpload`; E2B then rebuilds every later " +
							"step too, as after any uncached one). Defaults to `false`.",
						Optional: true,
					},
				},
			},
			"env": schema.MapAttribute{
				MarkdownDescription: "Environment variables for later steps and for sandboxes (`$VAR` is expanded).",
				ElementType:         types.StringType,
				Optional:            true,
			},
			"workdir": schema.StringAttribute{MarkdownDescription: "Working directory for later steps and sandboxes; created when missing.", Optional: true},
			"user":    schema.StringAttribute{MarkdownDescription: "User for later steps and sandboxes; created when missing.", Optional: true},
			"skip_cache": schema.BoolAttribute{
				MarkdownDescription: "Run this step and every later one without E2B's layer cache (the SDK's " +
					"`skipCache()`), such as to fetch the newest packages again. Defaults to `false`.",
				Optional: true,
			},
		}},
		Validators:    []validator.List{listvalidator.SizeAtLeast(1), oneStepKind{}},
		PlanModifiers: []planmodifier.List{replaceUnlessImported{}},
	}
}

// registryAttributes are the attributes of from_image_registry: each secret is either a
// plain attribute (kept in the state) or a write-only one with the version that makes a
// change of it plannable.
func registryAttributes() map[string]schema.Attribute {
	attrs := map[string]schema.Attribute{
		"type": schema.StringAttribute{
			MarkdownDescription: "`registry`, `aws` or `gcp`.",
			Required:            true,
			Validators:          []validator.String{stringvalidator.OneOf("registry", "aws", "gcp")},
		},
		"username":          schema.StringAttribute{MarkdownDescription: "Registry user (`registry`).", Optional: true},
		"aws_access_key_id": schema.StringAttribute{MarkdownDescription: "AWS access key ID (`aws`).", Optional: true},
		"aws_region":        schema.StringAttribute{MarkdownDescription: "AWS region (`aws`).", Optional: true},
	}
	for _, secret := range []struct{ name, what string }{
		{"password", "Registry password (`registry`)"},
		{"aws_secret_access_key", "AWS secret access key (`aws`)"},
		{"service_account_json", "GCP service account key as JSON (`gcp`)"},
	} {
		plain, wo, version := secret.name, secret.name+"_wo", secret.name+"_wo_version"
		sibling := func(name string) path.Expression { return path.MatchRelative().AtParent().AtName(name) }
		attrs[plain] = schema.StringAttribute{
			MarkdownDescription: secret.what + ". Kept in the state; prefer `" + wo + "`.",
			Optional:            true,
			Sensitive:           true,
			Validators:          []validator.String{stringvalidator.ConflictsWith(sibling(wo))},
		}
		attrs[wo] = schema.StringAttribute{
			MarkdownDescription: secret.what + ", write-only (Terraform/OpenTofu 1.11+): sent to E2B, never stored. " +
				"Requires `" + version + "`.",
			Optional:   true,
			Sensitive:  true,
			WriteOnly:  true,
			Validators: []validator.String{stringvalidator.AlsoRequires(sibling(version))},
		}
		attrs[version] = schema.Int64Attribute{
			MarkdownDescription: "Version of `" + wo + "`: the secret itself is not stored, so changing this number " +
				"is what makes a new build with a changed secret.",
			Optional:   true,
			Validators: []validator.Int64{int64validator.AlsoRequires(sibling(wo))},
		}
	}
	return attrs
}

// joinAttributes is the schema's attributes, from groups that name each once.
func joinAttributes(groups ...map[string]schema.Attribute) map[string]schema.Attribute {
	all := map[string]schema.Attribute{}
	for _, g := range groups {
		for name, a := range g {
			if _, twice := all[name]; twice {
				panic(fmt.Sprintf("attribute %q is in two groups of the schema", name))
			}
			all[name] = a
		}
	}
	return all
}
