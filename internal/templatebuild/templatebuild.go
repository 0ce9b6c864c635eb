// Package templatebuild runs one build of a template on E2B (the cloud, self-hosted E2B
// or the local server) once its configuration is resolved and its COPY sources listed and
// hashed: it uploads the archives the server lacks, registers and starts the build,
// follows it to the end and says why it failed. It knows nothing of Terraform; the
// provider turns its results into state and diagnostics.
package templatebuild

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/buildcontext"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
)

const (
	// uploadParallelism bounds the archives spooled and uploaded at once: each holds a
	// temporary file and a connection.
	uploadParallelism = 4
	// FailureLogLines is how many log lines a FailedError shows.
	FailureLogLines = 30
)

// Copy is the archive of one COPY step.
type Copy struct {
	// Name says which step it is in errors, such as "COPY app /app (step 2)".
	Name    string
	Listing *buildcontext.Listing
	// Hash is the files hash the archive is stored under.
	Hash string
}

// UploadMissing asks the server for every archive and uploads those it does not have, a
// few at a time; an archive shared by several steps is asked for once. Each is spooled to
// a temporary file (every file checked against the digest the hash used) and streamed
// from there.
func UploadMissing(ctx context.Context, api *e2bapi.Client, templateID string, copies []Copy, log e2bapi.Logger) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, uploadParallelism)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	seen := map[string]bool{}
	for _, c := range copies {
		if seen[c.Hash] {
			continue
		}
		seen[c.Hash] = true
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := uploadOne(ctx, api, templateID, c, log); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", c.Name, err))
				mu.Unlock()
				cancel()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func uploadOne(ctx context.Context, api *e2bapi.Client, templateID string, c Copy, log e2bapi.Logger) error {
	link, err := api.GetFileUploadLink(ctx, templateID, c.Hash)
	if err != nil {
		return err
	}
	if link.Present {
		log.Info(ctx, "build context already uploaded", map[string]any{"files_hash": c.Hash})
		return nil
	}
	if link.URL == "" {
		return fmt.Errorf("E2B has no archive with files hash %s and gave no upload URL", c.Hash)
	}
	started := time.Now()
	name, size, err := c.Listing.SpoolArchive(ctx, "")
	if err != nil {
		return err
	}
	defer os.Remove(name)
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := api.UploadArchive(ctx, link, f, size); err != nil {
		return err
	}
	log.Info(ctx, "build context uploaded", map[string]any{
		"files_hash": c.Hash, "bytes": size, "duration_ms": time.Since(started).Milliseconds(),
	})
	return nil
}

// Request is a build to start.
type Request struct {
	// CPUCount and MemoryMB are the build's resources; nil takes the server's default.
	CPUCount *int32
	MemoryMB *int32
	// Tags are the tags the build gets.
	Tags  []string
	Start e2bapi.TemplateBuildStartV2
}

// Start starts the build of tpl. When the template has a waiting build (the one E2B
// registers with a template) with the same resources, the build runs on it, so that one
// does not wait forever: it carries the default tag, and onWaiting is true so the caller
// gives it req.Tags once ready (AssignMissingTags). Otherwise a new build is registered
// with req.Tags, plus the default tag when a waiting build is there: E2B then marks the
// waiting one superseded.
func Start(ctx context.Context, api *e2bapi.Client, tpl *e2bapi.TemplateWithBuilds, req Request, log e2bapi.Logger) (buildID string, onWaiting bool, err error) {
	waiting := false
	for _, b := range tpl.Builds {
		if b.Status != e2bapi.BuildWaiting {
			continue
		}
		waiting = true
		if (req.CPUCount != nil && b.CPUCount != *req.CPUCount) || (req.MemoryMB != nil && b.MemoryMB != *req.MemoryMB) {
			continue
		}
		err := api.StartBuild(ctx, tpl.TemplateID, b.BuildID, req.Start)
		if err == nil {
			log.Info(ctx, "build started on the template's waiting build", map[string]any{"build_id": b.BuildID})
			return b.BuildID, true, nil
		}
		// Another apply may have taken it in the meantime.
		if !e2bapi.IsInvalid(err) {
			return "", false, err
		}
		log.Debug(ctx, "waiting build not usable", map[string]any{"build_id": b.BuildID, "error": err.Error()})
	}
	name := TemplateName(tpl)
	tags := req.Tags
	if waiting && len(tags) > 0 && !slices.Contains(tags, e2bapi.DefaultTag) {
		tags = append(slices.Clone(tags), e2bapi.DefaultTag)
	}
	out, err := api.CreateTemplateBuild(ctx, e2bapi.TemplateBuildRequestV3{Name: name, Tags: tags, CPUCount: req.CPUCount, MemoryMB: req.MemoryMB})
	if err != nil {
		return "", false, err
	}
	if out.TemplateID != tpl.TemplateID {
		return "", false, fmt.Errorf("registering a build under the name %q gave template %s, not %s", name, out.TemplateID, tpl.TemplateID)
	}
	if err := api.StartBuild(ctx, tpl.TemplateID, out.BuildID, req.Start); err != nil {
		return "", false, err
	}
	log.Info(ctx, "build started", map[string]any{"build_id": out.BuildID})
	return out.BuildID, false, nil
}

// TemplateName is the name builds of tpl are registered and tagged under.
func TemplateName(tpl *e2bapi.TemplateWithBuilds) string {
	switch {
	case len(tpl.Names) > 0:
		return tpl.Names[0]
	case len(tpl.Aliases) > 0:
		return tpl.Aliases[0]
	}
	return tpl.TemplateID
}

// AssignMissingTags points those of tags that no build of the template holds yet at the
// ready build buildID: a build started on the template's waiting build got only the
// default tag at registration. Tags another build holds were assigned after this build
// was registered and are left alone.
func AssignMissingTags(ctx context.Context, api *e2bapi.Client, templateID, buildID string, tags []string) error {
	if len(tags) == 0 {
		return nil
	}
	held, err := api.ListTags(ctx, templateID)
	if err != nil {
		return err
	}
	var missing []string
	for _, tag := range tags {
		if !slices.ContainsFunc(held, func(h e2bapi.TemplateTag) bool { return h.Tag == tag }) {
			missing = append(missing, tag)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	tpl, err := api.GetTemplate(ctx, templateID)
	if err != nil {
		return err
	}
	_, err = api.AssignTags(ctx, TemplateName(tpl)+":"+buildID, missing)
	return err
}

// FailedError is a build that ended in error.
type FailedError struct {
	TemplateID string
	BuildID    string
	Reason     *e2bapi.BuildStatusReason
	// Steps are the build's steps, to name the one that failed; may be nil.
	Steps []e2bapi.TemplateStep
	// Tail is the last FailureLogLines log lines.
	Tail []e2bapi.BuildLogEntry
}

// Error says where and why the build failed, then its last log lines.
func (e *FailedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Build %s of template %s failed", e.BuildID, e.TemplateID)
	if e.Reason != nil && e.Reason.Step != "" {
		fmt.Fprintf(&b, " at %s", DescribeStep(e.Steps, e.Reason.Step))
	}
	if e.Reason != nil && e.Reason.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Reason.Message)
	}
	b.WriteString(".")
	if len(e.Tail) > 0 {
		fmt.Fprintf(&b, "\n\nLast %d log lines:\n", len(e.Tail))
		for _, l := range e.Tail {
			fmt.Fprintf(&b, "[%s] %s\n", cmp.Or(l.Step, "-"), strings.TrimRight(l.Message, "\n"))
		}
	}
	return b.String()
}

// Follow waits for the build to end and returns its final status, handing each log line
// to onLog with a description of its step (DescribeStep; steps may be nil). A failed
// build is a *FailedError; when ctx ends first, the error is ctx's and the build goes on.
func Follow(ctx context.Context, api *e2bapi.Client, templateID, buildID string, steps []e2bapi.TemplateStep, onLog func(line e2bapi.BuildLogEntry, step string)) (string, error) {
	var tail []e2bapi.BuildLogEntry
	info, err := api.FollowBuild(ctx, templateID, buildID, e2bapi.FollowOptions{
		OnLog: func(e e2bapi.BuildLogEntry) {
			onLog(e, DescribeStep(steps, e.Step))
			tail = append(tail, e)
			if len(tail) > FailureLogLines {
				tail = tail[len(tail)-FailureLogLines:]
			}
		},
	})
	var failed *e2bapi.BuildFailedError
	if errors.As(err, &failed) {
		return e2bapi.BuildError, &FailedError{TemplateID: templateID, BuildID: buildID, Reason: failed.Reason, Steps: steps, Tail: tail}
	}
	if err != nil {
		return "", err
	}
	return info.Status, nil
}

// DescribeStep names a log line's step: "3" is the third build step.
func DescribeStep(steps []e2bapi.TemplateStep, step string) string {
	n, err := strconv.Atoi(step)
	if err != nil || n < 1 || n > len(steps) {
		return step
	}
	s := steps[n-1]
	arg := strings.Join(s.Args, " ")
	if len(arg) > 80 {
		arg = arg[:77] + "..."
	}
	return fmt.Sprintf("step %d (%s %s)", n, s.Type, arg)
}
