package builds

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/failure"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/steps"
)

// CheckBuild is nil when buildID names a build of templateID, checked
// before a start's body is read.
func (s *Manager) CheckBuild(templateID, buildID string) error {
	if err := e2b.ValidateBuildID(buildID); err != nil {
		return failure.New(failure.Invalid, "%v", err)
	}
	if _, err := s.catalog.Build(templateID, buildID); err != nil {
		return failure.MissingAs(err, failure.NotFound, "build '%s' of template '%s' not found", buildID, templateID)
	}
	return nil
}

// runningBuild is a build whose Engine.Build call is in flight.
type runningBuild struct {
	templateID string
	cancel     context.CancelCauseFunc
}

// Start starts a registered build of templateID: it checks req, marks
// the build building (cancelling the builds it supersedes) and runs it on
// the engine in the background. An unknown step type fails the build (as
// on E2B), not the request.
func (s *Manager) Start(templateID, buildID string, req e2b.TemplateBuildStartV2) error {
	spec, unknown, err := s.buildSpec(templateID, buildID, &req)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return failure.New(failure.Unavailable, "the server is shutting down")
	}
	b, superseded, err := s.catalog.StartBuild(templateID, buildID, buildRequestRecord(req))
	if err != nil {
		return err
	}
	for _, id := range superseded {
		if rb, ok := s.running[id]; ok {
			rb.cancel(errors.New(store.ReasonSuperseded))
		}
	}
	spec.CPUCount, spec.MemoryMB = b.CPUCount, b.MemoryMB
	ctx, cancel := context.WithCancelCause(s.ctx)
	s.running[buildID] = &runningBuild{templateID: templateID, cancel: cancel}
	tooLong := fmt.Errorf("build status polling timed out. Maximum build time is %s.", s.cfg.MaxBuildTime) //nolint:staticcheck // E2B's reason, word for word
	limited, stopLimit := context.WithTimeoutCause(ctx, s.cfg.MaxBuildTime, tooLong)
	s.tasks.Go(func() {
		defer func() {
			s.mu.Lock()
			delete(s.running, buildID)
			s.mu.Unlock()
			stopLimit()
			cancel(nil)
		}()
		s.runBuild(limited, spec, unknown)
	})
	return nil
}

// buildSpec checks a start request and turns it into what the engine runs:
// the base image or build, the steps with their types normalised and the
// archives of their COPY steps. unknown is the failure of the first step
// of an unknown type, nil when there is none.
func (s *Manager) buildSpec(templateID, buildID string, req *e2b.TemplateBuildStartV2) (spec engine.BuildSpec, unknown *store.BuildReason, err error) {
	switch {
	case req.FromImage != "" && req.FromTemplate != "":
		return spec, nil, failure.New(failure.Invalid, "cannot specify both fromImage and fromTemplate")
	case req.FromImage == "" && req.FromTemplate == "":
		return spec, nil, failure.New(failure.Invalid, "must specify either fromImage or fromTemplate")
	}
	spec = engine.BuildSpec{
		TemplateID: templateID, BuildID: buildID,
		BaseImage: req.FromImage, PullBase: req.FromImage != "", RegistryAuth: req.FromImageRegistry,
		StartCmd: req.StartCmd, ReadyCmd: req.ReadyCmd, Force: req.Force,
		Archives: map[string]string{},
	}
	if req.FromTemplate != "" {
		_, base, err := s.catalog.Resolve(req.FromTemplate)
		if err != nil {
			return spec, nil, failure.New(failure.Invalid, "fromTemplate '%s': %v", req.FromTemplate, err)
		}
		if base.Result == nil {
			return spec, nil, failure.New(failure.Invalid, "fromTemplate '%s': its build %s has no result", req.FromTemplate, base.ID)
		}
		spec.BaseImage, spec.FromBuild = base.Result.Image, (*engine.BuildResult)(base.Result)
	}
	for i := range req.Steps {
		step := &req.Steps[i]
		// The server takes types in any case; the engine gets them normalised.
		typ, known := steps.Normalize(strings.ToUpper(step.Type))
		step.Type = typ
		if !known && unknown == nil {
			unknown = &store.BuildReason{Message: fmt.Sprintf("command type %s is not implemented", step.Type), Step: strconv.Itoa(i + 1)}
		}
		if step.Type != steps.Copy {
			continue
		}
		if step.FilesHash == "" {
			return spec, nil, failure.New(failure.Invalid, "step %d (COPY) has no filesHash", i+1)
		}
		archive, ok, err := s.uploads.ArchivePath(step.FilesHash)
		if err != nil {
			return spec, nil, failure.OwnFailure(err)
		}
		if !ok {
			return spec, nil, failure.New(failure.Invalid, "step %d (COPY): files with hash %s were not uploaded", i+1, step.FilesHash)
		}
		spec.Archives[step.FilesHash] = archive
	}
	spec.Steps = req.Steps
	return spec, unknown, nil
}
