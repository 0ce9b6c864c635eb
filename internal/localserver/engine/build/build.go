package build

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine/attach"
)

// Step labels of the phases around the numbered steps.
const (
	stepBase     = "base"
	stepFinalize = "finalize"
)

// defaultUser is the user E2B's current build format makes the default
// right after the base layer (design/e2b-api.md, "Server-side execution semantics").
const defaultUser = "user"

// failureLines is how many of a failed command's last output lines the
// error message repeats.
const failureLines = 5

// builder is the state of one running build.
type builder struct {
	eng  Engine
	opts Options
	spec engine.BuildSpec
	// base is the image the build starts from.
	base Image
	// c is the build container, which phases share until a commit grows
	// past restartAfter.
	c  Container
	sh attach.Shell

	// What later steps and sandboxes inherit.
	user    string
	workdir string
	env     map[string]string

	logMu sync.Mutex
}

// Run runs spec on eng phase by phase, committing each as a layer image
// (reusing cached ones, see layers.go), and commits the result as an
// image. No build container outlives it.
func Run(ctx context.Context, eng Engine, opts Options, spec engine.BuildSpec) (*engine.BuildResult, error) {
	if spec.TemplateID == "" || spec.BuildID == "" || spec.BaseImage == "" {
		return nil, errors.New("build: template ID, build ID and base image are required")
	}
	b := &builder{eng: eng, opts: opts, spec: spec}
	res, err := b.run(ctx)
	if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		err = fmt.Errorf("%w (build cancelled: %w)", err, ctx.Err())
	}
	return res, err
}

func (b *builder) run(ctx context.Context) (*engine.BuildResult, error) {
	b.logf(stepBase, e2b.LogInfo, "Building from %s", b.spec.BaseImage)
	// Before any container: an image no envd build can serve fails here,
	// with one error naming it, its architecture and where envd was
	// looked for.
	img, err := b.eng.BaseImage(ctx, b.spec, func(format string, args ...any) { b.logf(stepBase, e2b.LogInfo, format, args...) })
	if err != nil {
		return nil, b.fail(ctx, stepBase, err)
	}
	b.base = img
	defer b.endPhase(ctx)

	// keys[0] is the base phase's (the default user; for fromTemplate the
	// base image itself), keys[i] step i's.
	n := len(b.spec.Steps)
	baseKey := baseKey(b.eng.CacheScope(), img.ID)
	keys := make([]string, n+1)
	keys[0] = baseKey
	if b.spec.FromBuild == nil {
		keys[0] = defaultUserKey(baseKey)
	}
	for i, st := range b.spec.Steps {
		keys[i+1] = stepKey(keys[i], st)
	}
	resume, from, err := b.resumePoint(ctx, keys)
	if err != nil {
		return nil, b.fail(ctx, stepBase, err)
	}

	b.emit(stepBase, e2b.LogInfo, layerLine(resume >= 0, "base", "FROM "+b.spec.BaseImage, baseKey))
	if b.spec.FromBuild == nil {
		if resume < 0 {
			b.emit(stepBase, e2b.LogInfo, layerLine(false, "base", "DEFAULT USER "+defaultUser, keys[0]))
			if err := b.basePhase(ctx, keys[0]); err != nil {
				return nil, b.fail(ctx, stepBase, err)
			}
			from = b.eng.LayerRef(keys[0])
		} else {
			b.emit(stepBase, e2b.LogInfo, layerLine(true, "base", "DEFAULT USER "+defaultUser, keys[0]))
		}
	}
	for i, st := range b.spec.Steps {
		step, line := strconv.Itoa(i+1), fmt.Sprintf("builder %d/%d", i+1, n)
		if i+1 <= resume {
			b.emit(step, e2b.LogInfo, layerLine(true, line, st.Describe(), keys[i+1]))
			continue
		}
		b.emit(step, e2b.LogInfo, layerLine(false, line, st.Describe(), keys[i+1]))
		if err := b.stepPhase(ctx, step, from, keys[i+1], st); err != nil {
			return nil, b.fail(ctx, step, err)
		}
		from = b.eng.LayerRef(keys[i+1])
	}

	ref, err := b.finalize(ctx, from)
	if err != nil {
		return nil, b.fail(ctx, stepFinalize, err)
	}
	b.logf(stepFinalize, e2b.LogInfo, "Build finished: image %s", ref)
	return &engine.BuildResult{
		Image:       ref,
		User:        b.user,
		Workdir:     b.workdir,
		Env:         b.env,
		StartCmd:    b.spec.StartCmd,
		ReadyCmd:    b.spec.ReadyCmd,
		EnvdVersion: envd.Version,
	}, nil
}

// resumePoint finds the last phase whose layer is cached and not forced
// (a forced step forces every later one, a forced build all; the base of
// fromTemplate is always there) and loads its state. It returns the
// phase's index into keys (-1: none) and the image to go on from.
func (b *builder) resumePoint(ctx context.Context, keys []string) (int, string, error) {
	last := len(keys) - 1
	if b.spec.Force {
		last = 0
		if b.spec.FromBuild == nil {
			last = -1
		}
	}
	for i, st := range b.spec.Steps {
		if st.Force {
			last = min(last, i)
			break
		}
	}
	for i := last; i >= 0; i-- {
		if i == 0 && b.spec.FromBuild != nil {
			from := b.spec.FromBuild
			b.user, b.workdir, b.env = from.User, from.Workdir, copyEnv(from.Env)
			return 0, b.spec.BaseImage, nil
		}
		st, ok, err := b.cachedLayer(ctx, keys[i])
		if err != nil {
			return 0, "", err
		}
		if !ok {
			continue
		}
		b.user, b.workdir, b.env = st.User, st.Workdir, copyEnv(st.Env)
		b.sh = attach.Shell{Path: st.Shell, Login: st.Login}
		for _, k := range keys[:i+1] {
			b.eng.TouchLayer(ctx, k)
		}
		return i, b.eng.LayerRef(keys[i]), nil
	}
	return -1, b.spec.BaseImage, nil
}

// layerLine is E2B's log line of a phase: "[prefix] text [key]", with
// "CACHED " in front when its layer is reused.
func layerLine(cached bool, prefix, text, key string) string {
	line := fmt.Sprintf("[%s] %s [%s]", prefix, text, key)
	if cached {
		line = "CACHED " + line
	}
	return line
}

// basePhase prepares the base image of a fromImage build: root account
// files where the image has none, the shell, and the implicit `USER user
// true` of the current build format (design/e2b-api.md, "Server-side execution
// semantics").
func (b *builder) basePhase(ctx context.Context, key string) error {
	if err := b.ensureContainer(ctx, b.spec.BaseImage, b.ensureAccountFiles); err != nil {
		return err
	}
	if !b.sh.Login {
		b.logf(stepBase, e2b.LogInfo, "The image has no /bin/bash: commands run with %s -c", b.sh.Path)
	}
	b.user, b.env, b.workdir = "root", copyEnv(b.base.Env), b.base.Workdir
	if err := b.setUser(ctx, stepBase, defaultUser, true); err != nil {
		return err
	}
	return b.commitLayer(ctx, key)
}

// stepPhase runs one step, in the container of the phase before or one
// from the image from, and commits the result as the layer of key.
func (b *builder) stepPhase(ctx context.Context, step, from, key string, st e2b.TemplateStep) error {
	if err := b.ensureContainer(ctx, from, nil); err != nil {
		return err
	}
	if err := b.step(ctx, step, st); err != nil {
		return err
	}
	return b.commitLayer(ctx, key)
}

// ensureContainer starts a build container from the image from unless the
// phase before left one, and learns the shell when the chain has none yet.
func (b *builder) ensureContainer(ctx context.Context, from string, prepare func(context.Context, Container) error) error {
	if b.c != nil {
		return nil
	}
	c, err := b.eng.Start(ctx, b.spec, from, prepare)
	if err != nil {
		return err
	}
	b.c = c
	if b.sh.Path == "" {
		if b.sh, err = c.Shell(ctx); err != nil {
			b.endPhase(ctx)
			return err
		}
	}
	return nil
}

// endPhase removes the build container.
func (b *builder) endPhase(ctx context.Context) {
	if b.c != nil {
		b.c.Remove(ctx)
		b.c = nil
	}
}

// fail logs err against step and wraps it as the step's error. A build
// container stopped for its disk limit fails its step with that reason,
// not with the broken connection it left; one whose writes failed at its
// hard limit, with that reason before the command's own error.
func (b *builder) fail(ctx context.Context, step string, err error) error {
	if b.c != nil {
		switch o := b.c.Overrun(ctx); {
		case o != nil && o.Hard:
			err = fmt.Errorf("%w: %w", o, err)
		case o != nil:
			err = o
		}
	}
	b.logf(step, e2b.LogError, "%v", err)
	return &engine.StepError{Step: step, Err: err}
}

func (b *builder) logf(step, level, format string, args ...any) {
	b.emit(step, level, fmt.Sprintf(format, args...))
}

// emit hands one line to the build log. The start command's output comes
// from another goroutine, so calls are serialised.
func (b *builder) emit(step, level, msg string) {
	if b.spec.Log == nil {
		return
	}
	b.logMu.Lock()
	defer b.logMu.Unlock()
	b.spec.Log(e2b.BuildLogEntry{Timestamp: time.Now().UTC(), Message: msg, Level: level, Step: step})
}

// ensureAccountFiles gives images without /etc/passwd (minimal busybox
// root file systems) the root account envd needs to resolve users, before
// envd starts.
func (b *builder) ensureAccountFiles(ctx context.Context, c Container) error {
	files := map[string]string{ //nolint:gosec // the passwd line of root with no password ("x"), not a credential
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n",
		"etc/group":  "root:x:0:\n",
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range []string{"etc/passwd", "etc/group"} {
		if ok, err := c.Exists(ctx, "/"+name); err == nil && ok {
			continue
		}
		b.logf(stepBase, e2b.LogInfo, "The image has no /%s: adding one with root", name)
		content := files[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg, ModTime: time.Now()}); err != nil {
			return err
		}
		if _, err := tw.Write([]byte(content)); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if buf.Len() <= 1024 { // only the end-of-archive blocks: nothing to add
		return nil
	}
	if err := c.CopyTo(ctx, "/", &buf); err != nil {
		return fmt.Errorf("adding account files: %w", err)
	}
	return nil
}

func copyEnv(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	maps.Copy(out, m)
	return out
}
