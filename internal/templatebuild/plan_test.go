package templatebuild

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/acctest"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/steps"
)

// TestPlanDockerfile plans a Dockerfile build: the context is the Dockerfile's directory,
// its COPY is hashed (differently in the two modes) and its hash set on the step.
func TestPlanDockerfile(t *testing.T) {
	dir := t.TempDir()
	acctest.WriteFiles(t, dir, map[string]string{
		"Dockerfile": "FROM busybox\nCOPY --chown=app a.txt /opt/a.txt\nENV A=1\nCMD [\"sleep\", \"1\"]\n",
		"a.txt":      "a",
	})
	spec := Spec{Dockerfile: filepath.Join(dir, "Dockerfile"), Force: true}
	b, err := Plan(t.Context(), spec, &recorder{})
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	if b.ContextDir != dir {
		t.Errorf("context %q, want the Dockerfile's directory %q", b.ContextDir, dir)
	}
	if b.Start.FromImage != "busybox" || b.Start.StartCmd != "sleep 1" || !b.Start.Force {
		t.Errorf("start request %+v", b.Start)
	}
	if len(b.Copies) != 1 || b.Copies[0].Src != "a.txt" || b.Copies[0].Dest != "/opt/a.txt" {
		t.Fatalf("copies %+v", b.Copies)
	}
	got := b.Start.Steps[b.Copies[0].Step]
	if got.Type != steps.Copy || got.CopyArgs().User != "app" {
		t.Errorf("COPY step %+v, want user app", got)
	}
	if len(b.Hashes()) != 1 || b.Copies[0].sdk || got.FilesHash != b.Hashes()[0] {
		t.Fatalf("hashes %v, step %+v", b.Hashes(), got)
	}
	spec.HashMode = HashSDK
	sdk, err := Plan(t.Context(), spec, &recorder{})
	if err != nil || sdk.Hashes()[0] == b.Hashes()[0] || !sdk.Copies[0].sdk {
		t.Errorf("SDK hash %v should differ from the portable %v and be checked as one (%+v, %v)", sdk.Hashes(), b.Hashes(), sdk.Copies, err)
	}
}

// TestPlanSteps plans configured steps after a Dockerfile's and in a context of their own.
func TestPlanSteps(t *testing.T) {
	dir := t.TempDir()
	acctest.WriteFiles(t, dir, map[string]string{"a.txt": "a", "d/b.txt": "b"})
	b, err := Plan(t.Context(), Spec{FromImage: "busybox", Context: dir, Steps: []Step{
		{Step: steps.NewCopy(steps.CopyArgs{Src: "a.txt", Dest: "/a.txt"})},
		{Step: steps.NewRun(steps.RunArgs{Command: "true"})},
		{Step: steps.NewCopy(steps.CopyArgs{Src: "d", Dest: "/d", Mode: "0755"}), ResolveSymlinks: true},
	}}, &recorder{})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Copies) != 2 || b.Copies[1].Step != 2 || b.Copies[1].Name() != "COPY d /d (step 3)" || !b.Copies[1].resolveLinks {
		t.Errorf("copies %+v", b.Copies)
	}
}

// TestPlanned resolves the build an apply runs from the plan's hashes: the same request
// and spec hash as Plan's, and an error when the steps no longer match them.
func TestPlanned(t *testing.T) {
	dir := t.TempDir()
	acctest.WriteFiles(t, dir, map[string]string{"a.txt": "a", "d/b.txt": "b"})
	spec := Spec{FromImage: "busybox", Context: dir, Reuse: true, Steps: []Step{
		{Step: steps.NewCopy(steps.CopyArgs{Src: "a.txt", Dest: "/a.txt"})},
		{Step: steps.NewCopy(steps.CopyArgs{Src: "d", Dest: "/d"})},
	}}
	planned, err := Plan(t.Context(), spec, &recorder{})
	acctest.Must(t, err)
	b, err := Planned(t.Context(), spec, planned.Hashes(), &recorder{})
	acctest.Must(t, err)
	if b.SpecHash != planned.SpecHash || !slices.Equal(b.Tags, planned.Tags) || !reflect.DeepEqual(b.Start, planned.Start) ||
		!reflect.DeepEqual(b.Copies, planned.Copies) {
		t.Errorf("Planned = %+v, want Plan's %+v", b, planned)
	}
	// Another hash makes another spec hash: the one the plan showed is what is built.
	other, err := Planned(t.Context(), spec, []string{planned.Hashes()[0], "0000"}, &recorder{})
	if err != nil || other.SpecHash == planned.SpecHash || other.Start.Steps[1].FilesHash != "0000" {
		t.Errorf("Planned with another hash = %+v, %v", other, err)
	}
	_, err = Planned(t.Context(), spec, planned.Hashes()[:1], &recorder{})
	var pe *PlanError
	if !errors.As(err, &pe) || pe.Issues[0].Summary != "Build changed since plan" {
		t.Errorf("Planned with one hash for two COPY steps = %v", err)
	}
}

// TestPlanForce sets force on the wire as the SDK does: a skipped cache from its step on,
// a forced upload on its own step; Dockerfile steps before them are not forced.
func TestPlanForce(t *testing.T) {
	dir := t.TempDir()
	acctest.WriteFiles(t, dir, map[string]string{"a.txt": "a"})
	run := func(cmd string, skipCache bool) Step {
		s := steps.NewRun(steps.RunArgs{Command: cmd})
		s.Force = skipCache
		return Step{Step: s}
	}
	b, err := Plan(t.Context(), Spec{Dockerfile: "FROM busybox\nRUN one\n", Context: dir, Steps: []Step{
		run("two", false),
		{Step: steps.NewCopy(steps.CopyArgs{Src: "a.txt", Dest: "/a.txt"}), ForceUpload: true},
		run("three", false),
		run("four", true),
		run("five", false),
	}}, &recorder{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range b.Start.Steps {
		got = append(got, fmt.Sprintf("%s %v", s.Describe(), s.Force))
	}
	want := []string{"USER root false", "WORKDIR / false", "RUN one false", "USER user false", "WORKDIR /home/user false",
		"RUN two false", "COPY a.txt /a.txt true", "RUN three false", "RUN four true", "RUN five true"}
	if !slices.Equal(got, want) {
		t.Errorf("steps (description, force)\n%q\nwant\n%q", got, want)
	}
	if len(b.Copies) != 1 || !b.Copies[0].forceUpload || b.Copies[0].Step != 6 {
		t.Errorf("copies %+v, want the forced upload of step 7", b.Copies)
	}
}

// TestPlanBuildArgs sets a Dockerfile's ARGs and refuses one it does not declare on
// build_args.
func TestPlanBuildArgs(t *testing.T) {
	const dockerfile = "ARG BASE=busybox\nFROM ${BASE}\nARG MODE=dev\n"
	b, err := Plan(t.Context(), Spec{Dockerfile: dockerfile, BuildArgs: map[string]string{"BASE": "debian", "MODE": "prod"}}, &recorder{})
	if err != nil {
		t.Fatal(err)
	}
	if env := b.Start.Steps[2]; b.Start.FromImage != "debian" || env.Type != steps.Env || !slices.Equal(env.Args, []string{"MODE", "prod"}) {
		t.Errorf("image %q, steps %+v", b.Start.FromImage, b.Start.Steps)
	}
	_, err = Plan(t.Context(), Spec{Dockerfile: dockerfile, BuildArgs: map[string]string{"MDOE": "prod"}}, &recorder{})
	var pe *PlanError
	if !errors.As(err, &pe) || pe.Issues[0].Field != "build_args" || pe.Issues[0].Detail != "no ARG of the Dockerfile declares MDOE" {
		t.Errorf("error %#v, want one on build_args naming MDOE", err)
	}
}

func TestPlanErrors(t *testing.T) {
	ctxDir := t.TempDir()
	acctest.WriteFiles(t, ctxDir, map[string]string{"a.txt": "a", "file": "f"})
	copyStep := func(src string) []Step {
		return []Step{{Step: steps.NewCopy(steps.CopyArgs{Src: src, Dest: "/x"})}}
	}
	for name, c := range map[string]struct {
		spec          Spec
		field, detail string
	}{
		"multi-stage":       {Spec{Dockerfile: "FROM a AS one\nRUN true\nFROM b\n"}, "dockerfile", "line 3"},
		"not a dockerfile":  {Spec{Dockerfile: "busybox"}, "dockerfile", "neither a readable file"},
		"missing context":   {Spec{FromImage: "a", Context: "/nonexistent/e2b-context", Steps: copyStep("a.txt")}, "context", "/nonexistent/e2b-context does not exist"},
		"context is a file": {Spec{FromImage: "a", Context: filepath.Join(ctxDir, "file"), Steps: copyStep("a.txt")}, "context", "is not a directory"},
		"nothing matches":   {Spec{FromImage: "a", Context: ctxDir, Steps: copyStep("nothing-*.txt")}, "", "COPY nothing-*.txt /x (step 1, context " + ctxDir},
	} {
		_, err := Plan(t.Context(), c.spec, &recorder{})
		var pe *PlanError
		if !errors.As(err, &pe) || pe.Issues[0].Field != c.field || !strings.Contains(pe.Issues[0].Detail, c.detail) {
			t.Errorf("%s: error %#v, want one on %q containing %q", name, err, c.field, c.detail)
		}
	}
	// Without COPY, no context is needed.
	if _, err := Plan(t.Context(), Spec{FromImage: "a", Context: "/nonexistent/e2b-context"}, &recorder{}); err != nil {
		t.Errorf("a build without COPY needs no context: %v", err)
	}
}

func TestReadDockerfile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "Dockerfile")
	acctest.Must(t, os.WriteFile(p, []byte("FROM x\n"), 0o644))
	if content, d, err := readDockerfile(p); err != nil || content != "FROM x\n" || d != dir {
		t.Errorf("path: %q %q %v", content, d, err)
	}
	if content, d, err := readDockerfile("FROM y\nRUN true\n"); err != nil || !strings.HasPrefix(content, "FROM y") || d != "" {
		t.Errorf("content: %q %q %v", content, d, err)
	}
	if _, _, err := readDockerfile(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "neither a readable file") {
		t.Errorf("missing file: %v", err)
	}
}
