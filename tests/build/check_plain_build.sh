#!/usr/bin/env bash
# A plain build builds the product only (issue 36): `meson setup DIR && ninja -C DIR` in a fresh
# build folder must build no object under tests/ (unit tests, fuzz replays, benchmarks, planted
# objects) and no benchmark BPF object (the reflector) anywhere; and `ninja meson-test-prereq`
# (what `meson test` runs first) must still build every test's executable and argument, so the
# suite does not lose a test to build_by_default : false.
# Usage: tests/build/check_plain_build.sh [SOURCE] [meson setup options...]
#        (SOURCE: the tree to check, default this one; environment: NDC_JOBS, default 2)
set -u
src=$(cd "${1:-$(dirname "$0")/../..}" && pwd) || exit 1
[ $# -gt 0 ] && shift
jobs=${NDC_JOBS:-2}
work=$(mktemp -d /tmp/ndc-plain-build.XXXXXX) || exit 1
trap 'rm -rf "$work"' EXIT
build=$work/build
rc=0

if ! meson setup "$build" "$src" "$@" >"$work/setup.log" 2>&1; then
	tail -20 "$work/setup.log" >&2
	echo "check_plain_build: meson setup failed" >&2
	exit 1
fi
if ! ninja -C "$build" -j "$jobs" >"$work/build.log" 2>&1; then
	tail -20 "$work/build.log" >&2
	echo "check_plain_build: the plain build failed" >&2
	exit 1
fi
echo "plain build: $(grep -c '^\[' "$work/build.log") steps"

# Every file a build step wrote under tests/ (meson itself writes none there at setup), and
# every benchmark or planted BPF object anywhere in the build folder.
built=$(cd "$build" && {
	[ -d tests ] && find tests -type f
	find . -type f \( -name '*reflector*' -o -name '*planted*' \) -not -path './meson-*'
} | sort -u)
if [ -n "$built" ]; then
	echo "FAIL: the plain build built test or benchmark files:"
	sed 's/^/  /' <<<"$built"
	rc=1
else
	echo "ok: nothing under tests/, no reflector or planted object"
fi
if [ ! -x "$build/control/ndcache" ]; then
	echo "FAIL: the plain build did not build control/ndcache"
	rc=1
fi

# What meson test builds first: every test's executable must then exist.
if ! ninja -C "$build" -j "$jobs" meson-test-prereq >"$work/prereq.log" 2>&1; then
	tail -20 "$work/prereq.log" >&2
	echo "FAIL: ninja meson-test-prereq failed"
	exit 1
fi
missing=$(meson introspect --tests "$build" | python3 -c '
import json, os, sys
for t in json.load(sys.stdin):
    for f in t["cmd"][:1] + [a for a in t["cmd"][1:] if a.startswith(sys.argv[1])]:
        if not os.path.exists(f):
            print(t["name"] + ": " + f)
' "$build")
if [ -n "$missing" ]; then
	echo "FAIL: after meson-test-prereq, tests whose files are missing:"
	sed 's/^/  /' <<<"$missing"
	rc=1
else
	echo "ok: meson-test-prereq builds every test's executable and built arguments" \
		"($(meson introspect --tests "$build" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))') tests)"
fi
exit $rc
