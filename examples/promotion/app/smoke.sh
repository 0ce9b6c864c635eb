#!/bin/sh
# Smoke test of the candidate build, run by the gate of the :prod alias in a
# sandbox of that build; what it writes to stderr is the apply's error.
version=$(cat /app/version.txt)
if [ -z "$version" ]; then
	echo "smoke test failed: /app/version.txt is empty" >&2
	exit 1
fi
out="version $version: smoke test passed"
case "$out" in
*"$EXPECTED_OUTPUT"*) echo "$out" ;;
*)
	echo "smoke test failed: \"$out\" lacks \"$EXPECTED_OUTPUT\"" >&2
	exit 1
	;;
esac
