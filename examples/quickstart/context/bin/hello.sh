#!/bin/sh
# Prints the greeting copied into the template, and where it runs.
echo "$(cat "${GREETING_FILE:-/app/greeting.txt}") (${1:-build}, user $(id -un))"
