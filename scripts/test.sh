#!/usr/bin/env bash
# Runs every check and test of the repository; CI runs exactly this.
#
#   scripts/test.sh                  everything
#   scripts/test.sh ./internal/x/... only these packages (vet, lint, tests);
#                                    the generated-files check is skipped
#
# It installs what it needs, idempotently and quickly when already done:
# Debian packages (apt), Terraform, OpenTofu and golangci-lint built from
# source into the user's cache, a Docker engine of its own (unless
# DOCKER_HOST already answers), the offline test images and arm64
# emulation through binfmt_misc (scripts/qemu-binfmt.sh). Then: gofmt,
# go vet, golangci-lint, no tracked merge leftovers (*.orig, *.rej, *.bak),
# generated code and docs up to date, the tests with the race detector and
# acceptance tests on (TF_ACC=1) with Terraform; buf lint and format of the
# .proto files; a build of every release target (scripts/cross-build.sh).
# Then, with every package, the acceptance tests again with OpenTofu, with
# the E2B SDK interop test and the isolation tests, under gVisor (runsc) on
# a second engine that shares none of this machine's files, and a build, a
# sandbox and the egress proxy under runc over TCP (start_isolated_dockerd
# in scripts/dockerd.sh); and the disk-limit tests under runc and gVisor on
# a third engine whose data root is a file system with quotas on a loop
# device (xfs with prjquota, else btrfs: start_quota_dockerd), where the
# disk limit must be hard. Where such an engine cannot run gVisor, or no
# container at all (an unprivileged container), or cannot be made, the
# summary lists what was not run (the OpenTofu pass then runs on the first
# engine).
# The tests of what happens outside Terraform and of earlier releases'
# states (-run '_outside|_upgrade') run again on the rest of the CLI
# matrix: the oldest Terraform and OpenTofu supported (built from source
# like the others) and a newer Terraform found on PATH, if any. The passes
# after the Terraform one run in three lanes side by side; each prints its
# time and the summary theirs together. A missing prerequisite fails a
# test instead of skipping it (E2B_TEST_REQUIRE_ALL). Exits non-zero when
# any of them fails, after running them all.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
packages=("$@")
if ((${#packages[@]} == 0)); then
	packages=(./...)
fi

cache="${XDG_CACHE_HOME:-$HOME/.cache}/terraform-provider-e2b"
mkdir -p "$cache"
work="$(mktemp -d "${TMPDIR:-/tmp}/e2b-test.XXXXXX")" # short: it holds a unix socket path
started=$SECONDS

log() { printf '==> %s\n' "$*" >&2; }

# start_dockerd and stop_dockerd: a private Docker engine unless DOCKER_HOST answers.
# shellcheck source=scripts/dockerd.sh
source scripts/dockerd.sh

cleanup() {
	local rc=$?
	stop_quota_dockerd
	stop_isolated_dockerd
	stop_dockerd
	jobs -p | xargs -r kill 2>/dev/null || true
	rm -rf "$work" || true
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- checks ------------------------------------------------------------------

failed=()
passed=()

check() {
	local name="$1"
	shift
	log "$name"
	if "$@"; then
		passed+=("$name")
	else
		failed+=("$name")
		echo "test.sh: $name FAILED" >&2
	fi
}

check_gofmt() {
	local dirs unformatted
	# Without directories gofmt would read standard input and pass.
	if ! dirs="$(go list -f '{{.Dir}}' "${packages[@]}")" || [[ -z "$dirs" ]]; then
		echo "go list found no package directories to check" >&2
		return 1
	fi
	# shellcheck disable=SC2086 # one directory per line, no spaces in them
	unformatted="$(gofmt -s -l $dirs | sort -u)" || return 1
	if [[ -n "$unformatted" ]]; then
		echo "not gofmt -s formatted (run make fmt):" >&2
		echo "$unformatted" >&2
		return 1
	fi
}

# tree_state prints what `git status` and the contents of changed and
# untracked files look like, to compare before and after generation.
tree_state() {
	git status --porcelain=v1 --untracked-files=all
	git diff
	git ls-files --others --exclude-standard -z | xargs -0 -r sha256sum
}

check_generated() {
	local before after
	before="$(tree_state)"
	make --no-print-directory generate >"$work/generate.log" 2>&1 || {
		cat "$work/generate.log" >&2
		return 1
	}
	after="$(tree_state)"
	if [[ "$before" != "$after" ]]; then
		echo "generated files are out of date (run make generate and commit the result):" >&2
		diff <(echo "$before") <(echo "$after") | head -50 >&2
		return 1
	fi
}

# check_no_leftovers fails when a merge or patch leftover is tracked: such a
# file is never meant to be committed (.gitignore ignores new ones).
check_no_leftovers() {
	local leftovers
	leftovers="$(git ls-files -- '*.orig' '*.rej' '*.bak')"
	if [[ -n "$leftovers" ]]; then
		echo "merge or patch leftovers are tracked (git rm them):" >&2
		echo "$leftovers" >&2
		return 1
	fi
}

# go_test CLI JSONFILE [go test flags and packages...] runs tests with
# acceptance tests on, against CLI (Terraform or OpenTofu).
go_test() {
	local cli="$1" json="$2"
	shift 2
	TF_ACC=1 \
		TF_ACC_TERRAFORM_PATH="$cli" \
		E2B_TEST_DOCKER_HOST="$DOCKER_HOST" \
		E2B_TEST_REQUIRE_ALL=1 \
		go tool -modfile=tools/go.mod gotestsum --format pkgname-and-test-fails \
		--jsonfile "$json" -- -race -count=1 -timeout 30m "$@"
}
# The timeout is per package: the provider's acceptance tests take 20
# minutes on a busy 2-core machine, under gVisor more.

# Acceptance tests that need a CLI newer than the pinned Terraform (the
# ephemeral resource: Terraform 1.10+; write-only arguments: 1.11+) run in
# the OpenTofu pass only.
newer_cli_tests='^(TestAccProcessEphemeralResource_echo|TestAccTemplateBuild_writeOnlySecret|TestAccTemplateBuild_writeOnlyErrors|TestAccExamples_validateEphemeral|TestAccExamples_applyEphemeral)$'

# Acceptance tests of what a CLI older than Terraform 1.11 answers (write-only
# arguments refused) run in the Terraform pass only; so do the examples'
# applies, which build templates and would only repeat themselves with
# OpenTofu (the ephemeral one aside, above).
older_cli_tests='^(TestAccTemplateBuild_writeOnlyOldCLI|TestAccExamples_apply|TestAccExamplePromotion_.*)$'

run_tests() {
	go_test "$terraform" "$work/tests-terraform.json" -skip "$newer_cli_tests" "${packages[@]}"
}

# tofu_go_test NAME [go test flags and packages...]: go_test with OpenTofu,
# which resolves unqualified provider names in its own registry's
# namespace, skipping the tests of what an older CLI answers; its results
# in tests-NAME.json.
tofu_go_test() {
	local name="$1"
	shift
	TF_ACC_PROVIDER_HOST=registry.opentofu.org go_test "$tofu" "$work/tests-$name.json" -skip "$older_cli_tests" "$@"
}

# The packages whose tests drive a Terraform CLI, again with OpenTofu, on
# the main engine: where the engine that shares no files cannot run, whose
# pass runs them otherwise (run_tofu_isolated_tests).
run_tofu_tests() {
	local cli_packages
	cli_packages="$(provider_package)"
	if [[ -z "$cli_packages" ]]; then
		log "no package of ${packages[*]} drives a CLI: OpenTofu pass skipped"
		return 0
	fi
	tofu_go_test tofu "$cli_packages"
}

# provider_package prints the provider's package when it is among those
# tested: the one whose tests drive a CLI.
provider_package() {
	go list "${packages[@]}" | grep -x 'github.com/e2b-terraform/terraform-provider-e2b/internal/provider' || true
}

# The tests of what happens outside Terraform and of states earlier releases
# wrote run on every CLI of the matrix (README.md, "Supported Terraform and
# OpenTofu versions"): the two passes above cover the pinned CLIs, extra
# passes of only these tests the others.
matrix_tests='_outside|_upgrade'

# run_matrix_tests KIND CLI NAME: the matrix tests with the CLI at CLI, of
# KIND terraform or tofu, its results in tests-NAME.json.
run_matrix_tests() {
	local kind="$1" cli="$2" name="$3" provider_host=registry.terraform.io
	[[ $kind == tofu ]] && provider_host=registry.opentofu.org
	TF_ACC_PROVIDER_HOST="$provider_host" go_test "$cli" "$work/tests-$name.json" -run "$matrix_tests" "$(provider_package)"
}

# Every pass after the first runs in the background (in_background) and is
# checked when it ends (wait_background). The passes go in lanes: the
# lanes run side by side, each lane's passes one after another. Eight
# passes at once on a 2-core machine (load 30 to 40) made each test up to
# eight times slower than alone, and a package passed its timeout; three
# lanes keep the machine busy without that.
bg_names=()
bg_jobs=()
bg_logs=()
declare -A lane_last # lane -> the log of its last pass

# in_background LANE NAME COMMAND...: starts the check NAME once the pass
# queued before it in LANE has ended, its output and its time kept in a
# log of its own.
in_background() {
	local lane="$1" name="$2" log prev
	shift 2
	log="$work/pass-${#bg_jobs[@]}.log"
	prev="${lane_last[$lane]:-}"
	lane_last[$lane]="$log"
	log "$name: queued in lane $lane"
	(
		trap ': >"$log.done"' EXIT
		if [[ -n $prev ]]; then
			while [[ ! -e $prev.done ]]; do sleep 1; done
		fi
		pass_started=$SECONDS
		rc=0
		"$@" || rc=$?
		echo "test.sh: $name took $((SECONDS - pass_started))s"
		exit "$rc"
	) >"$log" 2>&1 &
	bg_jobs+=($!)
	bg_names+=("$name")
	bg_logs+=("$log")
}

# wait_pass JOB LOG waits for a pass run in the background and prints its
# output.
wait_pass() {
	local rc=0
	wait "$1" || rc=$?
	cat "$2" >&2
	return "$rc"
}

# wait_background checks every pass started in the background, in order.
wait_background() {
	local i
	for i in "${!bg_jobs[@]}"; do
		check "${bg_names[$i]}" wait_pass "${bg_jobs[$i]}" "${bg_logs[$i]}"
	done
}

# cli_version CLI prints the version a Terraform or OpenTofu CLI reports.
cli_version() {
	"$1" version -json | sed -n 's/.*"terraform_version": *"\([^"]*\)".*/\1/p'
}

# newer_terraform prints the path of a Terraform on PATH newer than the
# pinned one, if there is one: tested when present, never required.
newer_terraform() {
	local path version
	path="$(command -v terraform)" || return 0
	version="$(cli_version "$path")" || return 0
	if [[ -n $version && $(printf '%s\n%s\n' "$version" "$(cli_version "$terraform")" | sort -V | tail -n 1) == "$version" && $version != "$(cli_version "$terraform")" ]]; then
		echo "$path"
	fi
}

# The tests a server on an engine that shares none of its files must pass
# (design/engine-channel.md), and those a server must pass under gVisor,
# run again on such an engine: over its unix socket under gVisor, with the
# acceptance tests of the OpenTofu pass and the SDK interop test
# (run_tofu_isolated_tests), the isolation, name, network-client, memory,
# descriptor, half-close and file-limit tests (the main pass runs them under
# runc); over TCP under runc, a build with a sandbox and the egress proxy,
# whose traffic rides the engine channel.
isolation_tests='^(TestDockerIsolation|TestDockerEgress|TestDockerSudo|TestDockerSandboxResolves.*|TestDockerNetworkClients|TestDockerMemoryExhaustion|TestDockerDescriptorExhaustion|TestDockerEgressUploadHalfClose|TestDockerFileLimit|TestDockerFileWatchPerSandbox)$'
tcp_tests='^(TestDockerEgress|TestDockerBuildAndSandbox|TestDockerSudo)$'

# run_tofu_isolated_tests RUNTIME: the OpenTofu pass (run_tofu_tests) with
# the SDK interop and isolation tests, on the engine that shares no files,
# under RUNTIME: one pass of the provider's acceptance tests for both.
run_tofu_isolated_tests() {
	DOCKER_HOST="$isolated_unix" E2B_TEST_RUNTIME="$1" tofu_go_test isolated -run "^TestAcc|^TestOfficialJSSDK$|$isolation_tests" \
		./internal/provider/... ./test/sdk/... ./internal/localserver/
}

# run_isolated_engine_tests NAME HOST RUNTIME RUN PACKAGES...: the tests
# matching RUN on the engine at HOST, their servers' containers under
# RUNTIME (E2B_TEST_RUNTIME: an explicit runtime, never a fallback).
run_isolated_engine_tests() {
	local name="$1" host="$2" runtime="$3" run="$4"
	shift 4
	DOCKER_HOST="$host" E2B_TEST_RUNTIME="$runtime" go_test "$terraform" "$work/tests-$name.json" -run "$run" -skip "$newer_cli_tests" "$@"
}

# engine_runtime HOST prints the runtime of an extra engine's pass: runsc,
# unless gVisor cannot run a container on this machine; then runc, so that
# the engine is still tested; "none" when no runtime can (inside an
# unprivileged container, such as scripts/fresh-machine.sh's, cgroups are
# read-only). Said here and in the summary.
engine_runtime() {
	local rt out
	for rt in runsc runc; do
		if out="$(DOCKER_HOST="$1" timeout 120 docker run --rm --runtime "$rt" --network none "$E2B_TEST_BASE_IMAGE" true 2>&1)"; then
			echo "$rt"
			return 0
		fi
		echo "test.sh: the engine at $1 cannot run a container under $rt: ${out##*$'\n'}" >&2
	done
	echo none
}

# The disk-limit tests, run on an engine that gives containers a hard disk
# limit (start_quota_dockerd) under each runtime it can run, where they
# must find one (E2B_TEST_HARD_DISK_LIMIT); the main pass runs them where
# only the watchdog holds.
disk_tests='^TestDockerDiskLimit$'

# run_quota_engine_tests RUNTIME: the disk-limit tests on the quota engine
# under RUNTIME.
run_quota_engine_tests() {
	E2B_TEST_HARD_DISK_LIMIT=1 run_isolated_engine_tests "quota-$1" "$quota_unix" "$1" "$disk_tests" ./internal/localserver/
}

# quota_engine_runtimes prints the runtimes the disk-limit tests run under on
# the quota engine: runc and, where it runs, gVisor; nothing when it runs
# no container.
quota_engine_runtimes() {
	case "$(engine_runtime "$quota_unix")" in
	runsc) echo runc runsc ;;
	runc) echo runc ;;
	esac
}

not_run=()

# --- main --------------------------------------------------------------------

# gcc and libc6-dev: the race detector needs cgo. busybox-static and
# debootstrap: the test images. node and npm: the official E2B JS SDK test.
# python3: the portable hash's reference implementation. A node, npm or
# python3 already on PATH is used as it is (another vendor's nodejs package
# carries npm and conflicts with Debian's).
commands=()
command -v node >/dev/null || commands+=(nodejs)
command -v npm >/dev/null || commands+=(npm)
command -v python3 >/dev/null || commands+=(python3)
scripts/install-packages.sh docker.io busybox-static debootstrap git make \
	ca-certificates gcc libc6-dev "${commands[@]}"

# The slow builds (Terraform and OpenTofu take minutes the first time) run
# in the background while the rest is set up and checked.
for tool in terraform tofu terraform-oldest tofu-oldest golangci-lint; do
	scripts/tools.sh "$tool" >"$work/$tool.path" 2>"$work/$tool.log" &
	eval "${tool//-/_}_job=\$!"
done
# buf (code generation and proto checks) is a tool of tools/go.mod: its
# first build takes minutes too.
go tool -modfile=tools/go.mod buf --version >"$work/buf.log" 2>&1 &
buf_job=$!

# wait_tool waits for a tool build and prints the path of the tool. Not
# called in $(...): a subshell cannot wait for this shell's jobs.
wait_tool() {
	local job="$1" name="$2"
	if ! wait "$job"; then
		cat "$work/$name.log" >&2
		echo "test.sh: building $name failed" >&2
		exit 1
	fi
}

start_dockerd
export E2B_TEST_BASE_IMAGE="${E2B_TEST_BASE_IMAGE:-e2b-test-base:latest}"
export E2B_TEST_DEBIAN_IMAGE="${E2B_TEST_DEBIAN_IMAGE:-e2b-test-debian:bookworm}"
export E2B_TEST_CLIENTS_IMAGE="${E2B_TEST_CLIENTS_IMAGE:-e2b-test-clients:bookworm}"
export E2B_TEST_ARM64_IMAGE="${E2B_TEST_ARM64_IMAGE:-e2b-test-base-arm64:latest}"
# The images are built while the checks run: minutes on a fresh machine
# (two debootstraps).
scripts/test-image.sh >"$work/test-image.log" 2>&1 &
images_job=$!
# arm64 sandboxes on this amd64 engine run under qemu-user. Where the kernel
# has no binfmt_misc the arm64 sandbox test skips; where registering failed
# otherwise it reports its prerequisite missing, which fails the run.
scripts/qemu-binfmt.sh || log "arm64 emulation is not available (scripts/qemu-binfmt.sh exited $?)"

# Terraform must not read a developer's CLI configuration (dev_overrides
# for this provider would replace the one under test) nor phone home.
: >"$work/terraformrc"
export TF_CLI_CONFIG_FILE="$work/terraformrc" CHECKPOINT_DISABLE=1

check "no merge leftovers" check_no_leftovers
check "gofmt" check_gofmt
check "go vet" go vet "${packages[@]}"
wait_tool "$buf_job" buf
check "proto lint and format" make --no-print-directory proto-check

wait_tool "$golangci_lint_job" golangci-lint
golangci_lint="$(cat "$work/golangci-lint.path")"
check "golangci-lint" "$golangci_lint" run "${packages[@]}"

wait_tool "$terraform_job" terraform
terraform="$(cat "$work/terraform.path")"
wait_tool "$tofu_job" tofu
tofu="$(cat "$work/tofu.path")"
if [[ "${packages[*]}" == "./..." ]]; then
	check "generated files up to date" check_generated
	check "every release target builds" scripts/cross-build.sh
else
	log "generated files and release target checks skipped: they cover the whole repository"
fi

wait_tool "$images_job" test-image
cat "$work/test-image.log" >&2
check "go test (Terraform $(cli_version "$terraform"))" run_tests

# The rest in lanes side by side (in_background): OpenTofu with the
# acceptance, SDK and isolation tests under gVisor on an engine that shares
# no files; the CLI matrix (the outside-change and upgrade tests on the
# oldest Terraform and OpenTofu supported and on a newer Terraform found on
# PATH); the engine over TCP and the one with disk quotas. Each pass starts
# local servers of its own.
background_started=$SECONDS
tofu_pass="acceptance tests (OpenTofu $(cli_version "$tofu"))"
if [[ "${packages[*]}" == "./..." ]]; then
	if start_isolated_dockerd; then
		isolated_rt="$(engine_runtime "$isolated_unix")"
		if [[ $isolated_rt != runsc ]]; then
			not_run+=("the tests under gVisor (runsc cannot run a container here)")
		fi
		if [[ $isolated_rt == none ]]; then
			not_run+=("the tests on an engine that shares no files (it cannot run a container here)")
			in_background isolated "$tofu_pass" run_tofu_tests
		else
			in_background isolated "$tofu_pass, SDK and isolation tests, under $isolated_rt on an engine that shares no files" \
				run_tofu_isolated_tests "$isolated_rt"
			in_background engines "build, sandbox and egress tests on an engine over TCP" \
				run_isolated_engine_tests tcp "$isolated_tcp" runc "$tcp_tests" ./internal/localserver/
		fi
	else
		case $? in
		3) not_run+=("the tests on an engine that shares no files (unshare: Operation not permitted: no mount namespace can be made here)") ;;
		*) failed+=("an engine that shares no files") ;;
		esac
		in_background isolated "$tofu_pass" run_tofu_tests
	fi
	if start_quota_dockerd; then
		read -r -a quota_runtimes <<<"$(quota_engine_runtimes)"
		case "${quota_runtimes[*]}" in
		"") failed+=("an engine with disk quotas that runs a container") ;;
		runc) not_run+=("the disk-limit tests under gVisor on the engine with disk quotas (runsc cannot run a container there)") ;;
		esac
		for rt in "${quota_runtimes[@]}"; do
			in_background engines "disk-limit tests under $rt on an engine with disk quotas ($quota_fs)" run_quota_engine_tests "$rt"
		done
	elif (($? == 3)); then
		not_run+=("the disk-limit tests on an engine with a hard disk limit (no file system with quotas Docker uses: $quota_unavailable)")
	else
		failed+=("an engine with disk quotas")
	fi
else
	log "second-engine runs skipped: they run with every package"
	in_background isolated "$tofu_pass" run_tofu_tests
fi

wait_tool "$terraform_oldest_job" terraform-oldest
wait_tool "$tofu_oldest_job" tofu-oldest
matrix=("terraform $(cat "$work/terraform-oldest.path")" "tofu $(cat "$work/tofu-oldest.path")")
newer="$(newer_terraform)"
if [[ -n $newer ]]; then
	matrix+=("terraform $newer")
else
	log "no Terraform newer than $(cli_version "$terraform") on PATH: its matrix pass is not run"
fi
if [[ -n "$(provider_package)" ]]; then
	for entry in "${matrix[@]}"; do
		read -r kind cli <<<"$entry"
		in_background matrix "outside-change and upgrade tests ($kind-$(cli_version "$cli"))" run_matrix_tests "$kind" "$cli" "matrix-$kind-$(cli_version "$cli")"
	done
else
	log "no package of ${packages[*]} drives a CLI: the CLI matrix is skipped"
fi

wait_background
background_time="$((SECONDS - background_started))s"
stop_isolated_dockerd
stop_quota_dockerd

# count ACTION: test events of that action in both passes' JSON.
count() {
	cat "$work"/tests-*.json 2>/dev/null | grep -c "\"Action\":\"$1\",\"Package\":\"[^\"]*\",\"Test\"" || true
}
# The tests that skipped because this machine cannot provide what they need
# (testutil.Unavailable), with their reasons.
while IFS= read -r reason; do
	not_run+=("$reason;")
done < <(cat "$work"/tests-*.json 2>/dev/null | grep -o 'not run on this machine: [^"]*' | sed 's/^not run on this machine: //; s/\\n$//' | sort -u)
tests_passed="$(count pass)"
tests_failed="$(count fail)"
tests_skipped="$(count skip)"

echo
echo "checks passed: ${passed[*]:-none}"
echo "checks failed: ${failed[*]:-none}"
echo "not run on this machine: ${not_run[*]:-none}"
echo "time: $((SECONDS - started))s (of which the passes after the first, in lanes: ${background_time:-none})"
echo "tests: $tests_passed passed, $tests_failed failed, $tests_skipped skipped"
((${#failed[@]} == 0))
