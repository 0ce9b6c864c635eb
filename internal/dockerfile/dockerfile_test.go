package dockerfile

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/steps"
)

// prologue and epilogue are the steps every conversion starts and ends with
// when the Dockerfile sets no USER or WORKDIR.
var (
	prologue = []steps.Step{{Type: steps.User, Args: []string{"root"}}, {Type: steps.Workdir, Args: []string{"/"}}}
	epilogue = []steps.Step{{Type: steps.User, Args: []string{"user"}}, {Type: steps.Workdir, Args: []string{"/home/user"}}}
)

func withDefaults(middle ...steps.Step) []steps.Step {
	out := append([]steps.Step{}, prologue...)
	out = append(out, middle...)
	return append(out, epilogue...)
}

func run(cmd string) steps.Step { return steps.Step{Type: steps.Run, Args: []string{cmd}} }

func TestConvert(t *testing.T) {
	tests := []struct {
		name       string
		dockerfile string
		want       Template
	}{
		{
			name:       "base image only",
			dockerfile: "FROM ubuntu:22.04\n",
			want:       Template{FromImage: "ubuntu:22.04", Steps: withDefaults()},
		},
		{
			name: "shell form with line continuations and comments",
			dockerfile: "FROM python:3.12 AS app\n" +
				"# install\n" +
				"RUN apt-get update && \\\n" +
				"    # a comment inside the continuation\n" +
				"    apt-get install -y curl\n",
			want: Template{FromImage: "python:3.12", Steps: withDefaults(
				run("apt-get update &&     apt-get install -y curl"),
			)},
		},
		{
			name: "exec form: plain words joined with spaces, others quoted",
			dockerfile: "FROM a\n" +
				`RUN ["pip", "install", "-r", "requirements.txt"]` + "\n" +
				`RUN ["bash", "-c", "echo it's here"]` + "\n",
			want: Template{FromImage: "a", Steps: withDefaults(
				run("pip install -r requirements.txt"),
				run(`bash -c 'echo it'\''s here'`),
			)},
		},
		{
			name:       "escape directive",
			dockerfile: "# escape=`\nFROM a\nRUN echo a `\n  b\n",
			want:       Template{FromImage: "a", Steps: withDefaults(run("echo a   b"))},
		},
		{
			name:       "here-document as the script",
			dockerfile: "FROM a\nRUN <<EOF\nset -e\necho \"$HOME\"\nEOF\n",
			want:       Template{FromImage: "a", Steps: withDefaults(run("set -e\necho \"$HOME\"\n"))},
		},
		{
			name:       "here-document with tab stripping",
			dockerfile: "FROM a\nRUN <<-EOF\n\techo one\n\t\techo two\n\tEOF\n",
			want:       Template{FromImage: "a", Steps: withDefaults(run("echo one\necho two\n"))},
		},
		{
			name:       "here-documents read by a command",
			dockerfile: "FROM a\nRUN cat > /a <<A && cat > /b <<'B'\none\nA\n$two\nB\n",
			want: Template{FromImage: "a", Steps: withDefaults(
				run("cat > /a <<A && cat > /b <<'B'\none\nA\n$two\nB"),
			)},
		},
		{
			name:       "here-document with an interpreter line",
			dockerfile: "FROM a\nRUN <<PY\n#!/usr/bin/env python3\nprint('hi')\nPY\n",
			want: Template{FromImage: "a", Steps: withDefaults(
				run("/usr/bin/env python3 <<'PY'\nprint('hi')\nPY"),
			)},
		},
		{
			name: "COPY and ADD: one step per source, chown and chmod",
			dockerfile: "FROM a\n" +
				"COPY --chown=app:staff --chmod=755 bin/ lib/*.so /opt/app/\n" +
				"COPY --chmod=0600 secret.txt dir/\n" +
				`ADD ["with space.txt", "/dst/"]` + "\n" +
				"COPY --link config.yml /etc/app.yml\n",
			want: Template{FromImage: "a", Steps: withDefaults(
				steps.Step{Type: steps.Copy, Args: []string{"bin/", "/opt/app/", "app:staff", "0755"}},
				steps.Step{Type: steps.Copy, Args: []string{"lib/*.so", "/opt/app/", "app:staff", "0755"}},
				steps.Step{Type: steps.Copy, Args: []string{"secret.txt", "dir/", "", "0600"}},
				steps.Step{Type: steps.Copy, Args: []string{"with space.txt", "/dst/", "", ""}},
				steps.Step{Type: steps.Copy, Args: []string{"config.yml", "/etc/app.yml", "", ""}},
			)},
		},
		{
			name: "ENV and ARG forms",
			dockerfile: "FROM a\n" +
				`ENV A=1 B="two words" C=$HOME/bin:${PATH} D=it\'s` + "\n" +
				"ENV LEGACY value with  spaces\n" +
				"ARG NODEFAULT\n" +
				"ARG WITH=default\n",
			want: Template{FromImage: "a", Steps: withDefaults(
				steps.Step{Type: steps.Env, Args: []string{"A", "1", "B", "two words", "C", "$HOME/bin:${PATH}", "D", "it's"}},
				steps.Step{Type: steps.Env, Args: []string{"LEGACY", "value with  spaces"}},
				steps.Step{Type: steps.Env, Args: []string{"NODEFAULT", ""}},
				steps.Step{Type: steps.Env, Args: []string{"WITH", "default"}},
			)},
		},
		{
			name: "ARG before FROM names the image and keeps its value when declared again",
			dockerfile: "ARG PY=\"3.12\"\nARG UNUSED\n" +
				"FROM python:${PY}-slim\n" +
				"ARG PY\n",
			want: Template{FromImage: "python:3.12-slim", Steps: withDefaults(
				steps.Step{Type: steps.Env, Args: []string{"PY", "3.12"}},
			)},
		},
		{
			name: "USER and WORKDIR replace the defaults",
			dockerfile: "FROM a\nUSER app\nWORKDIR /srv\nRUN make\n" +
				"WORKDIR sub\n",
			want: Template{FromImage: "a", Steps: append(append([]steps.Step{}, prologue...),
				steps.Step{Type: steps.User, Args: []string{"app"}},
				steps.Step{Type: steps.Workdir, Args: []string{"/srv"}},
				run("make"),
				steps.Step{Type: steps.Workdir, Args: []string{"sub"}},
			)},
		},
		{
			name:       "only USER set: WORKDIR still defaults",
			dockerfile: "FROM a\nUSER root\n",
			want: Template{FromImage: "a", Steps: append(append([]steps.Step{}, prologue...),
				steps.Step{Type: steps.User, Args: []string{"root"}},
				steps.Step{Type: steps.Workdir, Args: []string{"/home/user"}},
			)},
		},
		{
			name:       "CMD exec form",
			dockerfile: "FROM a\nCMD [\"python\", \"-m\", \"http.server\", \"8000\"]\n",
			want: Template{FromImage: "a", Steps: withDefaults(),
				StartCmd: "python -m http.server 8000", ReadyCmd: "sleep 20"},
		},
		{
			name:       "CMD shell form",
			dockerfile: "FROM a\nCMD npm start > /tmp/log 2>&1\n",
			want: Template{FromImage: "a", Steps: withDefaults(),
				StartCmd: "npm start > /tmp/log 2>&1", ReadyCmd: "sleep 20"},
		},
		{
			name:       "exec ENTRYPOINT takes CMD as arguments; the last CMD wins",
			dockerfile: "FROM a\nCMD [\"old\"]\nENTRYPOINT [\"/entry.sh\"]\nCMD [\"serve\", \"--port=80\"]\n",
			want: Template{FromImage: "a", Steps: withDefaults(),
				StartCmd: "/entry.sh serve --port=80", ReadyCmd: "sleep 20"},
		},
		{
			name:       "exec ENTRYPOINT with a shell-form CMD",
			dockerfile: "FROM a\nENTRYPOINT [\"tini\", \"--\"]\nCMD run $PORT\n",
			want: Template{FromImage: "a", Steps: withDefaults(),
				StartCmd: "tini -- /bin/sh -c 'run $PORT'", ReadyCmd: "sleep 20"},
		},
		{
			name:       "shell ENTRYPOINT ignores CMD",
			dockerfile: "FROM a\nENTRYPOINT exec server\nCMD [\"ignored\"]\n",
			want: Template{FromImage: "a", Steps: withDefaults(),
				StartCmd: "exec server", ReadyCmd: "sleep 20"},
		},
		{
			name: "ignored instructions, with warnings for what is dropped",
			dockerfile: "FROM --platform=linux/amd64 a\nLABEL org.opencontainers.image.title=x\nMAINTAINER me\n" +
				"EXPOSE 8080\nVOLUME /data\n" +
				"RUN --mount=type=cache,target=/root/.cache pip install x\n" +
				"ADD vendor.tar.gz /opt/\n",
			want: Template{FromImage: "a", Steps: withDefaults(
				run("pip install x"),
				steps.Step{Type: steps.Copy, Args: []string{"vendor.tar.gz", "/opt/", "", ""}},
			), Warnings: []string{
				"line 1: FROM --platform=linux/amd64 ignored; the E2B builder picks the platform",
				"line 2: LABEL is image metadata a template does not keep; ignored",
				"line 3: MAINTAINER is image metadata a template does not keep; ignored",
				"line 6: RUN --mount ignored",
				"line 7: ADD vendor.tar.gz copies the archive as a file; the E2B builder does not unpack archives like Docker does",
			}},
		},
		{
			name:       "lower-case instructions and a byte-order mark",
			dockerfile: "\ufefffrom a\nrun true\n",
			want:       Template{FromImage: "a", Steps: withDefaults(run("true"))},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Convert(tc.dockerfile, nil)
			if err != nil {
				t.Fatalf("Convert: %v", err)
			}
			if len(got.Lines) != len(got.Steps) {
				t.Errorf("%d lines for %d steps", len(got.Lines), len(got.Steps))
			}
			got.Lines = nil // TestConvertLines
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("got\n  %#v\nwant\n  %#v", *got, tc.want)
			}
		})
	}
}

// TestConvertLines checks that every step names the Dockerfile line it came from, and
// the steps the conversion adds none.
func TestConvertLines(t *testing.T) {
	got, err := Convert("FROM a\n# comment\nRUN one && \\\n  two\nCOPY x /x\nENV A=1\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	var lines []int
	for i, s := range got.Steps {
		if s.Type == steps.Copy || s.Type == steps.Run || s.Type == steps.Env {
			lines = append(lines, got.Lines[i])
		} else if got.Lines[i] != 0 && got.Lines[i] != 1 {
			t.Errorf("step %d (%s) has line %d", i, s.Type, got.Lines[i])
		}
	}
	if want := []int{3, 5, 6}; !reflect.DeepEqual(lines, want) {
		t.Errorf("lines of RUN, COPY and ENV = %v, want %v", lines, want)
	}
}

func TestConvertErrors(t *testing.T) {
	tests := []struct {
		name       string
		dockerfile string
		line       int
		text       string
	}{
		{"empty", "", 0, "no instructions"},
		{"comments only", "# nothing\n\n", 2, "no instructions"},
		{"no FROM", "ARG A=1\n", 0, "no FROM"},
		{"instruction before FROM", "# c\nRUN true\nFROM a\n", 2, "RUN before FROM"},
		{"multi-stage", "FROM golang AS build\nRUN go build\n\nFROM debian\n", 4, "build the earlier stages into an image to start from"},
		{"unknown instruction", "FROM a\nRUN true\nFETCH x\n", 3, "unknown instruction: FETCH"},
		{"HEALTHCHECK", "FROM a\nHEALTHCHECK CMD curl -f localhost\n", 2, "HEALTHCHECK is not supported in an E2B template: say when a sandbox is ready with the build's ready command instead (ready_cmd"},
		{"ONBUILD", "FROM a\nONBUILD RUN true\n", 2, "ONBUILD is not supported in an E2B template: a template is no base for later Dockerfiles"},
		{"SHELL", "FROM a\nSHELL [\"/bin/zsh\", \"-c\"]\n", 2, "SHELL is not supported in an E2B template: RUN commands run with bash -c"},
		{"STOPSIGNAL", "FROM a\nSTOPSIGNAL SIGINT\n", 2, "STOPSIGNAL is not supported in an E2B template: E2B stops a sandbox as a whole"},
		{"COPY --from", "FROM a\nCOPY --from=build /out /out\n", 2, "--from=build: a template has one stage and cannot copy from another image or stage; put the files in the build context"},
		{"COPY --parents", "FROM a\nCOPY --parents a/b /c\n", 2, "--parents is not supported: copy each directory with a COPY of its own"},
		{"COPY --exclude", "FROM a\nCOPY --exclude=*.md . /c\n", 2, "--exclude"},
		{"COPY unknown flag", "FROM a\nCOPY --bogus=1 a /b\n", 2, "bogus"},
		{"COPY symbolic chmod", "FROM a\nCOPY --chmod=u+x a /b\n", 2, "--chmod=u+x"},
		{"COPY chmod out of range", "FROM a\nCOPY --chmod=17777 a /b\n", 2, "--chmod=17777"},
		{"COPY without destination", "FROM a\nCOPY a\n", 2, "COPY requires at least two arguments"},
		{"COPY here-document", "FROM a\nCOPY <<EOF /x\nhi\nEOF\n", 2, "here-document"},
		{"ADD from a URL", "FROM a\n\nADD https://example.com/x.tgz /x\n", 3, "URLs"},
		{"ADD from git", "FROM a\nADD git@github.com:a/b.git /b\n", 2, "git"},
		{"ADD --checksum", "FROM a\nADD --checksum=sha256:00 a /b\n", 2, "--checksum"},
		{"FROM scratch", "FROM scratch\n", 1, "scratch"},
		{"FROM from an empty ARG", "ARG IMAGE\nFROM ${IMAGE}\n", 2, "names no image"},
		{"ENV without value", "FROM a\nENV\n", 2, "ENV requires at least one argument"},
		{"ENV with a bad substitution", "FROM a\nENV A=${B\n", 2, "ENV A"},
		{"empty CMD", "FROM a\nCMD []\n", 2, "empty start command"},
		{"RUN --mount=type=secret", "FROM a\nRUN true\nRUN --mount=type=secret,id=npm cat /run/secrets/npm\n", 3, "--mount=type=secret is not supported"},
		{"RUN --mount=type=ssh", "FROM a\nRUN --mount=type=cache,target=/c --mount=type=ssh git clone x\n", 2, "--mount=type=ssh is not supported"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Convert(tc.dockerfile, nil)
			if err == nil {
				t.Fatalf("no error; got %+v", got)
			}
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("error %v (%T) is not a *LineError", err, err)
			}
			if le.Line != tc.line {
				t.Errorf("line %d, want %d (%v)", le.Line, tc.line, err)
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Errorf("error %q does not contain %q", err, tc.text)
			}
			if tc.line > 0 && !strings.HasPrefix(err.Error(), "Dockerfile line ") {
				t.Errorf("error %q does not start with the line", err)
			}
		})
	}
}

func FuzzConvert(f *testing.F) {
	for _, seed := range []string{
		"FROM a\nRUN true\n",
		"ARG V=1\nFROM b:${V}\nCOPY --chown=u --chmod=644 x y /z/\nCMD [\"a\"]\n",
		"FROM a\nRUN <<EOF\n#!/bin/sh\necho\nEOF\n",
		"# escape=`\nFROM a\nENV A=\"b c\" D `\n e\n",
		"FROM a\nENTRYPOINT [\"x\"]\nCMD y\nUSER u\nWORKDIR w\n",
		"FROM a\nONBUILD RUN x\n# check=skip=all\nLABEL a=b\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, dockerfile string) {
		got, err := Convert(dockerfile, nil)
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("error %v (%T) is not a *LineError", err, err)
			}
			return
		}
		if got.FromImage == "" {
			t.Fatal("converted without a base image")
		}
		if len(got.Steps) < 4 {
			t.Fatalf("fewer steps than the fixed prologue and epilogue: %+v", got.Steps)
		}
		if (got.StartCmd == "") != (got.ReadyCmd == "") {
			t.Fatalf("start %q without ready %q or the reverse", got.StartCmd, got.ReadyCmd)
		}
		for _, s := range got.Steps {
			switch s.Type {
			case steps.Run, steps.Workdir, steps.User:
				if len(s.Args) != 1 {
					t.Fatalf("%s step with %d args", s.Type, len(s.Args))
				}
			case steps.Copy:
				if len(s.Args) != 4 {
					t.Fatalf("COPY step with %d args", len(s.Args))
				}
			case steps.Env:
				if len(s.Args)%2 != 0 {
					t.Fatalf("ENV step with an odd number of args: %q", s.Args)
				}
			default:
				t.Fatalf("unknown step type %q", s.Type)
			}
		}
	})
}

// TestConvertLongLine reports a line longer than the parser reads with its own number
// (the parser's scanner named an earlier one); a line at the limit converts.
// TestConvertBuildArgs sets ARGs from outside over their defaults, before FROM (the image)
// and after it (the ENV step), and refuses names no ARG declares.
func TestConvertBuildArgs(t *testing.T) {
	const dockerfile = "ARG TAG=12\nFROM debian:${TAG}\nARG TAG\nARG GREETING=hello\nARG EMPTY\nRUN echo $GREETING\n"
	got, err := Convert(dockerfile, map[string]string{"TAG": "bookworm", "GREETING": "hi there", "EMPTY": ""})
	if err != nil {
		t.Fatal(err)
	}
	want := Template{FromImage: "debian:bookworm", Steps: withDefaults(
		steps.Step{Type: steps.Env, Args: []string{"TAG", "bookworm"}},
		steps.Step{Type: steps.Env, Args: []string{"GREETING", "hi there"}},
		steps.Step{Type: steps.Env, Args: []string{"EMPTY", ""}},
		run("echo $GREETING"),
	), Lines: []int{2, 2, 3, 4, 5, 6, 0, 0}}
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("got  %+v\nwant %+v", *got, want)
	}

	_, err = Convert(dockerfile, map[string]string{"GREETING": "x", "TAGS": "1", "ENV": "2"})
	var unused *UnusedBuildArgsError
	if !errors.As(err, &unused) || !reflect.DeepEqual(unused.Names, []string{"ENV", "TAGS"}) {
		t.Fatalf("error %v (%T), want the unused build args ENV and TAGS", err, err)
	}
	if want := "no ARG of the Dockerfile declares ENV, TAGS"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

func TestConvertLongLine(t *testing.T) {
	ok := "FROM alpine\nRUN echo " + strings.Repeat("x", MaxLineBytes-len("RUN echo ")) + "\n"
	if _, err := Convert(ok, nil); err != nil {
		t.Fatalf("a line at the limit: %v", err)
	}
	long := "FROM alpine\nRUN true\nRUN echo " + strings.Repeat("x", 70000) + "\nRUN true\n"
	_, err := Convert(long, nil)
	var le *LineError
	if !errors.As(err, &le) || le.Line != 3 || !strings.Contains(err.Error(), "more than the limit of 65535") {
		t.Fatalf("Convert of a 70 kB line 3: %v", err)
	}
}
