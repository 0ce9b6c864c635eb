#!/bin/sh
# Smoke test run in a sandbox of the candidate build.
set -e
test -s /app/version.txt
echo "version $(cat /app/version.txt): smoke test passed"
