package templatebuild

import "fmt"

// Stage is the part of a run an *Error happened in.
type Stage string

// The stages of a run.
const (
	StageTemplate Stage = "template" // reading the template
	StageReuse    Stage = "reuse"    // finding or checking the build to reuse
	StageUpload   Stage = "upload"   // uploading the build context
	StageStart    Stage = "start"    // registering and starting the build
	StageFollow   Stage = "follow"   // following the build (it may go on)
	StageTags     Stage = "tags"     // giving the ready build its tags
)

// Error is a run that failed in one stage for a reason other than the build's own
// failure (a *FailedError) or the timeout (a *TimeoutError).
type Error struct {
	Stage Stage
	Err   error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// wrapStage is err as an *Error of stage, nil for nil.
func wrapStage(stage Stage, err error) error {
	if err == nil {
		return nil
	}
	return &Error{stage, err}
}

// TimeoutError is a wait that ended at Options.Timeout while the build runs on.
type TimeoutError struct {
	TemplateID, BuildID string
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("build %s of template %s did not finish within the timeout; it goes on", e.BuildID, e.TemplateID)
}
