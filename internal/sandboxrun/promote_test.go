//go:build linux

package sandboxrun

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	envd "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
)

func promoteRequest(gate *envd.RunRequest) PromoteRequest {
	return PromoteRequest{Template: "app", TemplateID: testTemplateID, Tag: "prod", BuildID: testBuild, Gate: gate}
}

func TestPromoteWithoutGateMovesTheTag(t *testing.T) {
	f := &fakeAPI{}
	api, opts, _ := setup(t, f)
	res, err := Promote(t.Context(), api, promoteRequest(nil), opts)
	if err != nil {
		t.Fatalf("Promote: %v", err)
	}
	if len(f.created) != 0 || res.Output != nil {
		t.Errorf("%d sandboxes created, output %+v; without a gate none runs", len(f.created), res.Output)
	}
	if len(f.moved) != 1 || f.moved[0].Target != "app:"+testBuild || len(f.moved[0].Tags) != 1 || f.moved[0].Tags[0] != "prod" {
		t.Errorf("moves %+v, want prod onto app:%s", f.moved, testBuild)
	}
}

func TestPromoteRunsTheGateInTheBuildThenMoves(t *testing.T) {
	f := &fakeAPI{}
	api, opts, _ := setup(t, f)
	gate := &envd.RunRequest{Cmd: "/bin/sh", Args: []string{"-c", `test "$STAGE" = gate`}, Env: map[string]string{"STAGE": "gate"}, Timeout: 5 * time.Second}
	res, err := Promote(t.Context(), api, promoteRequest(gate), opts)
	if err != nil {
		t.Fatalf("Promote: %v", err)
	}
	if len(f.created) != 1 || f.created[0].TemplateID != "app:"+testBuild {
		t.Errorf("created %+v, want one sandbox of exactly the build", f.created)
	}
	if res.Output == nil || res.Output.ExitCode != 0 || f.kills() != 1 {
		t.Errorf("gate result %+v, %d kills; want exit 0 and its sandbox killed", res, f.kills())
	}
	if len(f.moved) != 1 {
		t.Errorf("moves %+v, want one after the gate passed", f.moved)
	}
}

func TestPromoteGateFailureLeavesTheTag(t *testing.T) {
	f := &fakeAPI{}
	api, opts, _ := setup(t, f)
	gate := &envd.RunRequest{Cmd: "/bin/sh", Args: []string{"-c", "echo smoke test broke >&2; exit 7"}, Timeout: 5 * time.Second}
	_, err := Promote(t.Context(), api, promoteRequest(gate), opts)
	var runErr *Error
	if !errors.As(err, &runErr) || runErr.Stage != StageGate || runErr.SandboxID != testSandbox {
		t.Fatalf("Promote error %v, want a gate-stage error", err)
	}
	for _, want := range []string{"exited with code 7", "The gate of build " + testBuild + ` failed: the tag "prod" was not moved.`, "stderr:\nsmoke test broke\n"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if len(f.moved) != 0 || f.kills() != 1 {
		t.Errorf("moves %+v, %d kills; want no move and the gate's sandbox killed", f.moved, f.kills())
	}
}

// A gate that outlives its timeout is killed with its sandbox, and nothing moves.
func TestPromoteGateTimeoutLeavesTheTag(t *testing.T) {
	f := &fakeAPI{}
	api, opts, _ := setup(t, f)
	gate := &envd.RunRequest{Cmd: "/bin/sh", Args: []string{"-c", "sleep 30"}, Timeout: time.Second}
	_, err := Promote(t.Context(), api, promoteRequest(gate), opts)
	var runErr *Error
	if !errors.As(err, &runErr) || runErr.Stage != StageRun || !strings.Contains(err.Error(), "did not end within the timeout of 1s") {
		t.Fatalf("Promote error %v, want the gate's timeout", err)
	}
	if len(f.moved) != 0 || f.kills() != 1 {
		t.Errorf("moves %+v, %d kills; want no move and the sandbox killed", f.moved, f.kills())
	}
}

func TestPromoteRefusesABuildThatIsNotReady(t *testing.T) {
	for status, want := range map[string]string{e2b.BuildBuilding: `is "building", not ready`, e2b.BuildError: `is "error", not ready`} {
		f := &fakeAPI{buildStatus: status}
		api, opts, _ := setup(t, f)
		_, err := Promote(t.Context(), api, promoteRequest(&envd.RunRequest{Command: "true"}), opts)
		var runErr *Error
		if !errors.As(err, &runErr) || runErr.Stage != StageBuild || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want a build-stage error containing %q", status, err, want)
		}
		if len(f.created) != 0 || len(f.moved) != 0 {
			t.Errorf("%s: %d sandboxes, moves %+v; want neither gate nor move", status, len(f.created), f.moved)
		}
	}

	f := &fakeAPI{}
	api, opts, _ := setup(t, f)
	req := promoteRequest(nil)
	req.BuildID = "00000000-0000-4000-8000-000000000000"
	_, err := Promote(t.Context(), api, req, opts)
	var runErr *Error
	if !errors.As(err, &runErr) || runErr.Stage != StageBuild || !strings.Contains(err.Error(), "Template app has no build "+req.BuildID) {
		t.Errorf("unknown build: %v, want a build-stage error naming it", err)
	}
}
