#!/usr/bin/env bash
# Differential fuzzer, long run (issue 21): tests/bpf/fuzz_diff.c (the suite runs it over 100,000
# frames) over many more. Every reply the fast path's tc and XDP programs make to mutated and
# random queries is checked against the socket path's reply to the same query, decoded; passes
# to the stack are counted, never wrong. Prints the machine, the commit, the fuzzer's counts and
# its verdict; a mismatch is printed with its seed, case number and frame in hex (replay with
# BUILD/tests/test_fuzz_diff --replay HEX, or --seed S --first I --count 1).
#
# Usage: tests/bench/fuzz_diff.sh [options]
#   --count N        frames (default 10000000)
#   --seed S         the run's seed (default: the fuzzer picks one and prints it)
#   --services N     a table from gen_cluster.py's N-service cluster (snapshot) instead of the
#                    sample cluster (N up to 16000)
#   --planted        load the object with the planted bug (tests/planted/wrong_slot/): must be caught
#   --regions        rebuild the table once filled, so that it has both regions (abi.h); a table
#                    of --services grew and has them anyway
#   --build DIR      meson build dir (default build-mem; set up release, -Dbpf=enabled if missing)
# Needs root (BPF_PROG_TEST_RUN). Exit status: the fuzzer's (0: every reply agreed, or with
# --planted the bug was caught; 1 otherwise).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

count=10000000
seed=""
services=""
planted=0
regions=0
build="$root/build-mem"
# shellcheck disable=SC2034 # read by lib.sh
BENCH_NAME=fuzz_diff
# shellcheck source=SCRIPTDIR/lib.sh
. "$here/lib.sh"

while [ $# -gt 0 ]; do
	case "$1" in
	-h | --help) usage 0 ;;
	--planted) planted=1; shift; continue ;;
	--regions) regions=1; shift; continue ;;
	esac
	[ $# -ge 2 ] || die "$1 needs a value"
	case "$1" in
	--count) count=$2 ;;
	--seed) seed=$2 ;;
	--services) services=$2 ;;
	--build) build=$2 ;;
	*) echo "fuzz_diff: unknown argument '$1'" >&2; usage 2 ;;
	esac
	shift 2
done
is_uint "$count" || die "--count: a positive integer"
[ -z "$seed" ] || [[ $seed =~ ^[0-9]+$ ]] || die "--seed: a number"
[ -z "$services" ] || { is_uint "$services" && [ "$services" -le 16000 ]; } ||
	die "--services: 1..16000"
[ "$(id -u)" = 0 ] || die "needs root (BPF_PROG_TEST_RUN)"
case "$build" in /*) ;; *) build="$PWD/$build" ;; esac

bench_build "$build" "$build/fuzz_diff" tests/test_fuzz_diff \
	tests/planted/wrong_slot/ndc_fastpath_planted.bpf.o
args=(--count "$count")
[ -z "$seed" ] || args+=(--seed "$seed")
[ "$planted" = 0 ] || args+=(--object \
	"$build/tests/planted/wrong_slot/ndc_fastpath_planted.bpf.o" --expect-mismatch)
[ "$regions" = 0 ] || args+=(--regions)
tmp=""
if [ -n "$services" ]; then
	tmp=$(mktemp -d /tmp/ndc-fuzz.XXXXXX) || die "mktemp failed"
	trap 'rm -rf "$tmp"' EXIT
	python3 "$here/gen_cluster.py" --services "$services" --namespaces 100 --out "$tmp" \
		>/dev/null || die "gen_cluster.py failed"
	args+=(--snapshot "$tmp/cluster.json")
fi

commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$root" diff --quiet HEAD 2>/dev/null || commit+="-dirty"
echo "fuzz_diff: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs" \
	"($(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)), kernel $(uname -r)," \
	"commit $commit"
echo "fuzz_diff: $build/tests/test_fuzz_diff ${args[*]}"
start=$SECONDS
"$build/tests/test_fuzz_diff" "${args[@]}"
rc=$?
echo "fuzz_diff: $count frames requested; exit $rc after $((SECONDS - start)) s"
exit $rc
