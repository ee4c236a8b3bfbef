#!/usr/bin/env bash
# The dnstap writer (control/dnstap, issue 37 item 4) against Debian's own dnstap reader: Frame
# Streams read by fstrm_capture (the bidirectional handshake, content type
# protobuf:dnstap.Dnstap), the records decoded by dnstap-ldns and the raw frames by fstrm_dump.
# The writer runs in a small driver (tests/integration/dnstap_driver.c); the agent's use of it is
# tests/integration/test_dnstap.sh's.
#   pairs:     200 CLIENT_QUERY/CLIENT_RESPONSE pairs with known names (q<i>.dnstap.test.),
#              types (A, AAAA, TXT, MX by turns) and rcodes (NOERROR, NXDOMAIN, SERVFAIL by
#              turns): dnstap-ldns shows all 400 in order with the client's address, and every
#              frame carries the pod's namespace/name in Dnstap.extra (dnstap-ldns 0.2.1 does not
#              print extra: fstrm_dump's frames are read for it).
#   noreader:  no reader: 200,000 log calls all return at once (ns per call printed, at most
#              2,000 ns on average) and all are counted as dropped.
#   reconnect: a reader that goes away and another that comes back on the same path: the first
#              gets the pairs a<i>, the events logged in between are dropped and counted, the
#              second gets the pairs b<i>, and the writer counts a reconnect.
# Usage: test_dnstap_writer.sh BUILD_DIR [pairs|noreader|reconnect ...]
#        (exit 77, skipped, when the build has no dnstap: libfstrm-dev, libprotobuf-c-dev and
#        protobuf-c-compiler missing at configure time)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
shift
parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(pairs noreader reconnect)
# shellcheck source=lib.sh
. "$here/lib.sh"

for c in fstrm_capture fstrm_dump dnstap-ldns; do
	command -v "$c" >/dev/null || {
		echo "test_dnstap_writer: $c missing (deploy/deps.sh test installs fstrm-bin and dnstap-ldns)" >&2
		exit 1
	}
done
if ! meson introspect --targets "$build" | grep -q '"name": "dnstap_driver"'; then
	echo "skipped: $build was configured without dnstap (no libfstrm, libprotobuf-c or protoc-c)"
	exit 77
fi
meson compile -C "$build" tests/dnstap_driver >/dev/null || {
	echo "test_dnstap_writer: cannot build the driver" >&2
	exit 1
}
driver="$build/tests/dnstap_driver"

dir=$(mktemp -d /tmp/ndc-dnstap.XXXXXX)
sock="$dir/dnstap.sock"
extra="ns-$$/pod-a"
cap_pid=""
drv_pid=""
cleanup() {
	[ -n "$drv_pid" ] && kill -9 "$drv_pid" 2>/dev/null
	[ -n "$cap_pid" ] && kill -9 "$cap_pid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT

# capture_start FILE: Debian's reader on $sock, writing FILE; waits for its socket.
capture_start() {
	rm -f "$sock"
	fstrm_capture -t protobuf:dnstap.Dnstap -u "$sock" -w "$1" >"$1.log" 2>&1 &
	cap_pid=$!
	wait_until 5 "fstrm_capture's socket $sock" test -S "$sock"
}
# reader_drained: the reader's end of each connection on $sock has nothing left unread (ss's
# Recv-Q): fstrm_capture drops what it has not read when it is stopped.
reader_drained() {
	[ "$(ss -xnH src "$sock" | awk '{ q += $3 } END { print q + 0 }')" = 0 ]
}
# capture_stop: SIGTERM (it closes its file cleanly), bounded.
capture_stop() {
	term_wait "$cap_pid" fstrm_capture 10
	cap_pid=""
}

# check_capture FILE PREFIX N: FILE holds the pairs PREFIX0..PREFIX<N-1> in order (other frames
# between them are counted, not failed), each with $extra in Dnstap.extra.
check_capture() {
	python3 - "$1" "$2" "$3" "$extra" <<'PY'
import re, subprocess, sys
path, prefix, n, extra = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
types, rcodes = ["A", "AAAA", "TXT", "MX"], ["NOERROR", "NXDOMAIN", "SERVFAIL"]
docs = [d for d in subprocess.run(["dnstap-ldns", "-y", "-r", path], capture_output=True,
                                  text=True, check=True).stdout.split("\n---\n") if d.strip()]
# fstrm_dump: frame headers on stderr, each data frame's bytes on stdout, one escaped line each
dump = subprocess.run(["fstrm_dump", path], capture_output=True, text=True, check=True).stdout
frames = re.findall(r'^ "(.*)"$', dump, re.M)
if len(frames) != len(docs):
    sys.exit(f"dnstap-ldns decoded {len(docs)} records, fstrm_dump shows {len(frames)} frames")
# Dnstap.extra: field 3, length-delimited (0x1a), then the length byte and the bytes
want_extra = "\\x1a" + ("\\x%02x" % len(extra)) + extra
got, other, errors = [], 0, []
for doc, frame in zip(docs, frames):
    kind = re.search(r"^  type: (\S+)", doc, re.M)
    q = re.search(r"^    ;(\S+)\tIN\t(\S+)", doc, re.M)
    rc = re.search(r"rcode: (\w+)", doc)
    addr = re.search(r'^  query_address: "([^"]+)"', doc, re.M)
    if not (kind and q and q.group(1).startswith(prefix)):
        other += 1
        continue
    got.append((kind.group(1), q.group(1), q.group(2), rc and rc.group(1)))
    if want_extra not in frame:
        errors.append(f"{q.group(1)} {kind.group(1)}: no extra {extra!r} in {frame[:80]}")
    if not addr or addr.group(1) != "169.254.100.2":
        errors.append(f"{q.group(1)}: query_address {addr and addr.group(1)}")
want = []
for i in range(n):
    name = f"{prefix}{i}.dnstap.test."
    want.append(("CLIENT_QUERY", name, types[i % 4], "NOERROR"))
    want.append(("CLIENT_RESPONSE", name, types[i % 4], rcodes[i % 3]))
if got != want:
    diff = next(i for i in range(max(len(got), len(want)))
                if i >= len(got) or i >= len(want) or got[i] != want[i])
    errors.append(f"{len(got)} records of {prefix}*, {len(want)} expected; first difference at "
                  f"{diff}: got {got[diff] if diff < len(got) else None}, "
                  f"want {want[diff] if diff < len(want) else None}")
for e in errors[:10]:
    print(e)
print(f"{len(got)} records {prefix}* as sent, {other} others, extra in each: "
      f"{'no' if errors else 'yes'}")
sys.exit(1 if errors else 0)
PY
}

part_pairs() {
	local out
	capture_start "$dir/pairs.fstrm" || return
	out=$("$driver" "$sock" pairs 200 "$extra" 2>&1)
	[ $? = 0 ] && ok "pairs: the driver logged 200 pairs to the reader ($(printf '%s\n' "$out" |
		sed -n 's/^pairs done ns_per_log=//p') ns per log call, queued)" ||
		bad "pairs: the driver failed" "$out"
	capture_stop
	# its count includes the control frames START and STOP
	grep -q "wrote 402 frames" "$dir/pairs.fstrm.log" &&
		ok "pairs: fstrm_capture wrote 400 data frames (402 with START and STOP)" ||
		bad "pairs: fstrm_capture's count" "$(cat "$dir/pairs.fstrm.log")"
	out=$(check_capture "$dir/pairs.fstrm" q 200 2>&1)
	[ $? = 0 ] && ok "pairs: dnstap-ldns: $out" || bad "pairs: what dnstap-ldns decoded" "$out"
	# the check must be able to fail: a capture without the extra field, or another rcode
	out=$(extra="ns-$$/pod-b" check_capture "$dir/pairs.fstrm" q 200 2>&1)
	[ $? != 0 ] && ok "pairs: the check fails on another pod's name in extra" ||
		bad "pairs: the check passed a wrong extra" "$out"
}

part_noreader() {
	local out ns
	rm -f "$sock"
	out=$("$driver" "$sock" noreader 200000 "$extra" 2>&1)
	[ $? = 0 ] && ok "noreader: 200,000 log calls, all dropped and counted" ||
		bad "noreader: the driver's counts" "$out"
	ns=$(printf '%s\n' "$out" | sed -n 's/^noreader ns_per_log=//p')
	echo "       $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'): ${ns:-?} ns per log call"
	if [ -n "$ns" ] && awk -v n="$ns" 'BEGIN { exit !(n < 2000) }'; then
		ok "noreader: $ns ns per log call with no reader (under 2,000)"
	else
		bad "noreader: log calls slow or not measured" "$out"
	fi
}

part_reconnect() {
	local out="$dir/reconnect.out" rc
	capture_start "$dir/first.fstrm" || return
	"$driver" "$sock" reconnect 50 "$extra" >"$out" 2>&1 &
	drv_pid=$!
	# phase1: the driver's writer has sent the 100 frames; then the reader must have read them
	wait_until 15 "the driver's first 50 pairs" grep -q '^phase1' "$out" || {
		bad "reconnect: first phase" "$(cat "$out")"
		return
	}
	wait_until 5 "fstrm_capture reads what was sent" reader_drained ||
		bad "reconnect: fstrm_capture left bytes unread" "$(ss -xn src "$sock")"
	capture_stop
	wait_until 10 "the writer sees the reader go" grep -q '^disconnected' "$out" ||
		bad "reconnect: the writer did not notice the reader go" "$(cat "$out")"
	capture_start "$dir/second.fstrm" || return
	wait_pid "$drv_pid" 30 "dnstap_driver reconnect"
	rc=$?
	drv_pid=""
	[ $rc = 0 ] && ok "reconnect: the writer came back to the new reader: $(grep '^phase2' "$out")" ||
		bad "reconnect: the driver's counts (exit $rc)" "$(cat "$out")"
	capture_stop
	local o1 o2
	o1=$(check_capture "$dir/first.fstrm" a 50 2>&1)
	[ $? = 0 ] && ok "reconnect: first reader: $o1" || bad "reconnect: first reader" "$o1"
	o2=$(check_capture "$dir/second.fstrm" b 50 2>&1)
	[ $? = 0 ] && ok "reconnect: second reader: $o2" || bad "reconnect: second reader" "$o2"
}

for p in "${parts[@]}"; do
	case "$p" in
	pairs | noreader | reconnect) "part_$p" ;;
	*)
		echo "unknown part $p" >&2
		exit 2
		;;
	esac
done
summary test_dnstap_writer
