// Package sdk proves that the official E2B JS SDK works, unchanged, against
// the local E2B-compatible server (the provider binary's `server`
// subcommand) and the envd it runs in every sandbox.
//
// The directory is a small npm project pinning the SDK (package.json,
// package-lock.json) and a script, interop.mjs, that builds one template and
// drives one sandbox through the SDK's public API given only E2B_API_URL,
// E2B_SANDBOX_URL, E2B_DOMAIN and E2B_API_KEY. The package's test starts the
// server on a Docker engine, installs the SDK with `npm ci` when it is not
// installed yet, runs the script and checks its JSON summary:
//
//	DOCKER_HOST=unix:///path/docker.sock go test -v ./test/sdk/
//
// It skips without node and npm, without DOCKER_HOST (or
// E2B_TEST_DOCKER_HOST), when the engine does not answer, or when the base
// image (E2B_TEST_BASE_IMAGE, default e2b-test-base:latest) is missing.
//
// The base image is busybox, without bash, while the SDK runs every command
// as `/bin/bash -l -c`: the template copies in a two-line /bin/bash that
// execs /bin/sh (busybox sh accepts -l and -c).
package sdk
