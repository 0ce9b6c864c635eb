package templatebuild

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/buildcontext"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/dockerfile"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/steps"
)

// How COPY sources are hashed (Spec.HashMode).
const (
	// HashPortable is the files hash v1: the same on every machine and filesystem.
	HashPortable = "portable"
	// HashSDK is what the E2B SDKs compute, so uploads are shared with SDK users.
	HashSDK = "e2b-sdk"
)

// Spec is a build as configured: a base, a Dockerfile and/or steps, and where COPY takes
// its files from. Every value is known.
type Spec struct {
	TemplateID        string
	FromImage         string
	FromTemplate      string
	FromImageRegistry *e2b.FromImageRegistry
	// Dockerfile is the path of a Dockerfile or its content. Its base, steps and commands
	// come first, Steps after them; StartCmd and ReadyCmd, when set, win over its CMD.
	Dockerfile string
	// BuildArgs set the Dockerfile's ARGs (docker build --build-arg).
	BuildArgs map[string]string
	// Context is the directory COPY sources are taken from; empty means the Dockerfile's
	// directory when Dockerfile is a path, else the working directory.
	Context  string
	Steps    []Step
	StartCmd string
	ReadyCmd string
	Force    bool
	// HashMode is HashPortable (also when empty) or HashSDK.
	HashMode string
	// CPUCount and MemoryMB are the build's resources; nil takes the server's default.
	CPUCount *int32
	MemoryMB *int32
	// Tags are the tags the build gets.
	Tags []string
	// Triggers are opaque values that only tell builds apart: they count in the spec hash.
	Triggers map[string]string
	// Reuse tags the build with its spec tag (SpecTag) and lets Run take a ready build
	// that carries it instead of building.
	Reuse bool
}

// Step is one configured build step. Its Force (the SDK's skipCache) runs it and every
// later step without the layer cache.
type Step struct {
	steps.Step
	// ResolveSymlinks (COPY only) copies what symlinks inside the context point to.
	ResolveSymlinks bool
	// ForceUpload (COPY only) uploads the archive even when the server has it, and
	// runs the step without the layer cache.
	ForceUpload bool
}

// Build is a Spec resolved for running: the start request with the files hash of every
// COPY step, and what each archive is checked against.
type Build struct {
	TemplateID string
	CPUCount   *int32
	MemoryMB   *int32
	// Tags are the tags the build gets: with Reuse, the spec tag too, and the default
	// tag when no other is configured (as a build without tags gets it).
	Tags  []string
	Start e2b.TemplateBuildStartV2
	// SpecHash is the spec hash v1 of what defines the build (design/hashing.md "Spec hash").
	SpecHash string
	Reuse    bool
	triggers map[string]string
	// ContextDir is the absolute context directory.
	ContextDir string
	// Copies are the COPY steps, in build order.
	Copies []Copy
	// Warnings are Dockerfile instructions that were ignored, each naming its line.
	Warnings []string
	// DockerfileHash is the SHA-256 of the Dockerfile's content (hex); empty without a
	// Dockerfile. With the files hashes it is what the build is made of, wherever the
	// files are.
	DockerfileHash string
}

// Copy is the archive of one COPY step.
type Copy struct {
	// Step is the step's index in Build.Start.Steps.
	Step      int
	Src, Dest string
	// Hash is the files hash the archive is stored under, and which it is checked against
	// as it is spooled.
	Hash         string
	contextDir   string
	resolveLinks bool
	forceUpload  bool
	// sdkCache is set in the e2b-sdk hash mode, to the stat cache (nil without one) the
	// hash was cached in: the archive finds its hash there (buildcontext.ArchiveCheck).
	sdkCache *buildcontext.StatCache
	sdk      bool
	// dockerfileLine is the Dockerfile line of the COPY or ADD (0 for a step of steps).
	dockerfileLine int
}

// listOptions are the step's options of the listing.
func (c *Copy) listOptions() buildcontext.ListOptions {
	return buildcontext.ListOptions{ResolveLinks: c.resolveLinks}
}

// spoolArchive writes the step's archive to a temporary file (see
// buildcontext.SpoolArchive) from the apply's walk of the context, checking the files
// against the hash planned.
func (c *Copy) spoolArchive(ctx context.Context) (string, int64, error) {
	planned := buildcontext.ArchiveCheck{PortableHash: c.Hash}
	if c.sdk {
		planned = buildcontext.ArchiveCheck{SDKHash: c.Hash, Cache: c.sdkCache}
	}
	return buildcontext.SpoolArchive("", c.Src, func(w io.Writer) error {
		return buildcontext.WriteStepArchive(ctx, w, c.contextDir, c.Src, c.Dest, c.listOptions(), planned)
	})
}

// Name says which step it is in messages, such as "COPY app /app (step 2)".
func (c Copy) Name() string { return fmt.Sprintf("COPY %s %s (step %d)", c.Src, c.Dest, c.Step+1) }

// Hashes are the files hashes of the COPY steps, in build order.
func (b *Build) Hashes() []string {
	out := make([]string, len(b.Copies))
	for i, c := range b.Copies {
		out[i] = c.Hash
	}
	return out
}

// Issue is an error found while planning, about one argument of the build.
type Issue struct {
	// Field is the argument at fault: "dockerfile" or "context"; empty for the build as
	// a whole.
	Field   string
	Summary string
	Detail  string
}

// PlanError lists what is wrong with a Spec.
type PlanError struct{ Issues []Issue }

func (e *PlanError) Error() string {
	msgs := make([]string, len(e.Issues))
	for i, is := range e.Issues {
		msgs[i] = is.Summary + ": " + is.Detail
	}
	return strings.Join(msgs, "; ")
}

// Plan resolves spec: it reads and converts the Dockerfile and hashes every COPY source,
// a walk of its context. It uploads nothing and calls no API, so a plan can run it; an
// apply takes the hashes the plan found instead (Planned). Problems are a *PlanError.
func Plan(ctx context.Context, spec Spec, log e2bapi.Logger) (*Build, error) {
	b, err := resolve(spec)
	if err != nil {
		return nil, err
	}
	if err := b.hash(ctx, spec.HashMode, log); err != nil {
		return nil, err
	}
	b.finish()
	return b, nil
}

// Planned resolves spec as Plan does, with the files hashes a plan found for its COPY
// steps (Build.Hashes, in build order) instead of walking their contexts: the walk of an
// apply is the one that spools an archive for the upload (Runner.Run), which checks the
// files against the planned hash and fails with a *PlanError "Build context changed
// since plan" naming the files modified last. A Dockerfile with other COPY steps than
// planned is a *PlanError too.
func Planned(ctx context.Context, spec Spec, hashes []string, log e2bapi.Logger) (*Build, error) {
	b, err := resolve(spec)
	if err != nil {
		return nil, err
	}
	if len(hashes) != len(b.Copies) {
		return nil, &PlanError{[]Issue{{Field: "dockerfile", Summary: "Build changed since plan",
			Detail: fmt.Sprintf("The plan hashed %d COPY steps, the build now has %d: the Dockerfile changed after the plan. "+
				"Run terraform plan again.", len(hashes), len(b.Copies))}}}
	}
	var cache *buildcontext.StatCache
	if spec.HashMode == HashSDK {
		cache = openStatCache(ctx, log)
	}
	for i := range b.Copies {
		c := &b.Copies[i]
		c.contextDir, c.Hash = b.ContextDir, hashes[i]
		c.sdk, c.sdkCache = spec.HashMode == HashSDK, cache
		b.Start.Steps[c.Step].FilesHash = c.Hash
	}
	b.finish()
	return b, nil
}

// resolve is the build spec makes before its COPY sources are hashed: its steps, the
// Dockerfile's among them, and the context checked.
func resolve(spec Spec) (*Build, error) {
	b := &Build{
		TemplateID: spec.TemplateID, CPUCount: spec.CPUCount, MemoryMB: spec.MemoryMB, Tags: spec.Tags,
		Reuse: spec.Reuse, triggers: spec.Triggers,
		Start: e2b.TemplateBuildStartV2{
			FromImage: spec.FromImage, FromTemplate: spec.FromTemplate, FromImageRegistry: spec.FromImageRegistry,
			Force: spec.Force, StartCmd: spec.StartCmd, ReadyCmd: spec.ReadyCmd, Steps: []steps.Step{},
		},
	}
	contextDir := "."
	if spec.Dockerfile != "" {
		content, dir, err := readDockerfile(spec.Dockerfile)
		if err == nil {
			sum := sha256.Sum256([]byte(content))
			b.DockerfileHash = hex.EncodeToString(sum[:])
			var t *dockerfile.Template
			if t, err = dockerfile.Convert(content, spec.BuildArgs); err == nil {
				if dir != "" {
					contextDir = dir
				}
				b.useDockerfile(t)
			}
		}
		var unused *dockerfile.UnusedBuildArgsError
		switch {
		case errors.As(err, &unused):
			return nil, &PlanError{[]Issue{{Field: "build_args", Summary: "Unknown build argument", Detail: err.Error()}}}
		case err != nil:
			return nil, &PlanError{[]Issue{{Field: "dockerfile", Summary: "Invalid dockerfile", Detail: err.Error()}}}
		}
	}
	// As the SDK's skipCache: a forced step forces every later one. A forced upload
	// forces its own step.
	skipCache := false
	for _, s := range spec.Steps {
		skipCache = skipCache || s.Force
		s.Force = skipCache || s.ForceUpload
		b.Start.Steps = append(b.Start.Steps, s.Step)
		if s.Type == steps.Copy {
			a := s.CopyArgs()
			b.Copies = append(b.Copies, Copy{Step: len(b.Start.Steps) - 1, Src: a.Src, Dest: a.Dest,
				resolveLinks: s.ResolveSymlinks, forceUpload: s.ForceUpload})
		}
	}
	if spec.Context != "" {
		contextDir = spec.Context
	}
	abs, err := filepath.Abs(contextDir)
	if err != nil {
		return nil, &PlanError{[]Issue{{Field: "context", Summary: "Invalid context", Detail: err.Error()}}}
	}
	b.ContextDir = abs
	// A source outside the context, named, before the context is read.
	for _, c := range b.Copies {
		if _, err := buildcontext.CleanSource(abs, c.Src); err != nil && c.dockerfileLine > 0 {
			return nil, &PlanError{[]Issue{{Field: "dockerfile", Summary: "Invalid dockerfile",
				Detail: fmt.Sprintf("Dockerfile line %d: %v", c.dockerfileLine, err)}}}
		} else if err != nil {
			return nil, &PlanError{[]Issue{{Field: "context", Summary: "COPY source outside the context", Detail: err.Error()}}}
		}
	}
	if len(b.Copies) > 0 {
		if st, err := os.Stat(abs); err != nil {
			return nil, &PlanError{[]Issue{{Field: "context", Summary: "Missing build context",
				Detail: fmt.Sprintf("The build context directory %s does not exist or cannot be read: %v", abs, err)}}}
		} else if !st.IsDir() {
			return nil, &PlanError{[]Issue{{Field: "context", Summary: "Invalid build context", Detail: fmt.Sprintf("%s is not a directory.", abs)}}}
		}
	}
	return b, nil
}

// finish sets what the files hashes decide: the spec hash, and with reuse the spec tag.
func (b *Build) finish() {
	b.SpecHash = specHash(b.specFields())
	if b.Reuse {
		if len(b.Tags) == 0 {
			b.Tags = []string{e2b.DefaultTag}
		}
		b.Tags = append(slices.Clone(b.Tags), SpecTag(b.SpecHash))
	}
}

// useDockerfile takes the base, the steps and the commands of a converted Dockerfile;
// start and ready commands already set win.
func (b *Build) useDockerfile(t *dockerfile.Template) {
	b.Warnings = t.Warnings
	b.Start.FromImage = t.FromImage
	if b.Start.StartCmd == "" {
		b.Start.StartCmd = t.StartCmd
	}
	if b.Start.ReadyCmd == "" {
		b.Start.ReadyCmd = t.ReadyCmd
	}
	for i, s := range t.Steps {
		b.Start.Steps = append(b.Start.Steps, s)
		if s.Type == steps.Copy {
			a := s.CopyArgs()
			b.Copies = append(b.Copies, Copy{Step: len(b.Start.Steps) - 1, Src: a.Src, Dest: a.Dest, dockerfileLine: t.Lines[i]})
		}
	}
}

// readDockerfile returns the Dockerfile's content and, when the value is a path to a
// file, its directory.
func readDockerfile(v string) (content, dir string, err error) {
	if !strings.ContainsAny(v, "\n") {
		if st, statErr := os.Stat(v); statErr == nil && st.Mode().IsRegular() {
			b, err := os.ReadFile(v)
			if err != nil {
				return "", "", err
			}
			return string(b), filepath.Dir(v), nil
		}
		if !strings.HasPrefix(strings.ToUpper(strings.TrimSpace(v)), "FROM") {
			return "", "", fmt.Errorf("dockerfile %q is neither a readable file nor Dockerfile content (which starts with FROM)", v)
		}
	}
	return v, "", nil
}

// openStatCache opens the stat cache at its default path; nil when there is none.
func openStatCache(ctx context.Context, log e2bapi.Logger) *buildcontext.StatCache {
	p, err := buildcontext.DefaultStatCachePath()
	if err != nil {
		log.Debug(ctx, "no stat cache", map[string]any{"error": err.Error()})
		return nil
	}
	return buildcontext.OpenStatCache(p)
}

// hash hashes every COPY source and sets the files hash of its step.
func (b *Build) hash(ctx context.Context, mode string, log e2bapi.Logger) error {
	cache := openStatCache(ctx, log)
	var issues []Issue
	for i := range b.Copies {
		c := &b.Copies[i]
		started := time.Now()
		entries, err := c.hash(ctx, b.ContextDir, mode, cache)
		switch {
		case err != nil && c.dockerfileLine > 0:
			// As the conversion's errors (dockerfile.LineError).
			issues = append(issues, Issue{Field: "dockerfile", Summary: "Invalid dockerfile",
				Detail: fmt.Sprintf("Dockerfile line %d: COPY %s %s (context %s): %v", c.dockerfileLine, c.Src, c.Dest, b.ContextDir, err)})
			continue
		case err != nil:
			issues = append(issues, Issue{Summary: fmt.Sprintf("Build context of step %d", c.Step+1),
				Detail: fmt.Sprintf("COPY %s %s (step %d, context %s): %v", c.Src, c.Dest, c.Step+1, b.ContextDir, err)})
			continue
		}
		b.Start.Steps[c.Step].FilesHash = c.Hash
		log.Debug(ctx, "hashed COPY source", map[string]any{
			"step": c.Step + 1, "src": c.Src, "entries": entries, "files_hash": c.Hash,
			"duration_ms": time.Since(started).Milliseconds(),
		})
	}
	if cache != nil {
		if err := cache.Save(); err != nil {
			log.Warn(ctx, "could not save the stat cache", map[string]any{"path": cache.Path(), "error": err.Error()})
		}
	}
	if len(issues) > 0 {
		return &PlanError{issues}
	}
	return nil
}

// hash sets the step's files hash in mode, refusing what the server would refuse in the
// archive by name, and returns how many entries it covers. Both modes stream: the archive
// walks the context again (spoolArchive).
func (c *Copy) hash(ctx context.Context, contextDir, mode string, cache *buildcontext.StatCache) (int, error) {
	c.contextDir = contextDir
	streamHash := buildcontext.StreamPortableHash
	if mode == HashSDK {
		streamHash = buildcontext.StreamSDKHash
		c.sdk, c.sdkCache = true, cache
	}
	sum, err := streamHash(ctx, contextDir, c.Src, c.Dest, c.listOptions(), buildcontext.HashOptions{Cache: cache})
	c.Hash = sum.Hash
	return sum.Entries, err
}

// changedIssue is the issue of a step whose files changed after the plan.
func changedIssue(c Copy, err error) Issue {
	detail := fmt.Sprintf("The files of %s changed after the plan: %v. Run terraform plan again.", c.Name(), err)
	if ce := (*buildcontext.ChangedError)(nil); errors.As(err, &ce) {
		newest := "(no files)"
		if len(ce.Newest) > 0 {
			newest = strings.Join(ce.Newest, ", ")
		}
		detail = fmt.Sprintf("The files of %s changed after the plan: files hash %s at plan, %s now. "+
			"Most recently modified: %s. Run terraform plan again.", c.Name(), ce.Planned, ce.Found, newest)
	}
	return Issue{Summary: "Build context changed since plan", Detail: detail}
}

// CheckCopySource rejects empty and absolute COPY sources, as a configuration
// can be checked before planning; Plan checks that a source stays inside the
// context, whose directory it then knows and names (buildcontext.CleanSource).
func CheckCopySource(src string) error { return buildcontext.CheckRelative(src) }
