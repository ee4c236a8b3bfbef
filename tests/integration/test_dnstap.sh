#!/usr/bin/env bash
# dnstap from the agent (issue 37 item 4, user-space half): log.dnstap pointed at Debian's
# fstrm_capture, socket mode, pods from the fake API server (env NODE_NAME).
#   capture:  team-a/web-1 (169.254.100.2) asks 6 cluster names (NOERROR), 4 www.example.com
#             AAAA (the first forwarded, then cached) and big.example.com TXT (1,650 bytes:
#             truncated upstream over UDP, asked again over TCP); team-b/crawler-0
#             (169.254.101.2) 5 search-path expansions (NXDOMAIN). dnstap-ldns decodes exactly
#             these 16 CLIENT_QUERY/CLIENT_RESPONSE pairs in order (names, types, rcodes, the
#             client's address) and fstrm_dump shows each pod's namespace/name in Dnstap.extra;
#             the forwarder's records are one UDP pair for www.example.com AAAA (the cache
#             answered the rest) and, for big.example.com, the UDP query then the TCP pair. The check must be able to fail: it is run once with the pods'
#             names swapped and must fail.
#   noreader: no reader at log.dnstap.socket: the agent answers (dnsperf, 3 s at 20,000 QPS from
#             the pod, five rounds without and with dnstap by turns: each answers 99%, and the
#             agent's CPU time per answer, with / without, median of the rounds' ratios, at most
#             1.25, all printed) and counts the drops
#             (ndcache_dnstap_dropped_total{reason="no_reader"} at least two per query answered).
#   kernel:   tc mode, kernel_sample 0.05: about 500 of 10,000 kernel answers sampled (400 to
#             600), each a CLIENT_RESPONSE for web-1's address with team-a/web-1 in extra.
# Usage: test_dnstap.sh BUILD_DIR [capture|noreader|kernel ...]   (77: the build has no dnstap)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
bin="$build/control/ndcache"
shift
parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(capture noreader kernel)
# shellcheck source=lib.sh
. "$here/lib.sh"

need_bin "$bin" || exit 1
for c in fstrm_capture fstrm_dump dnstap-ldns dnsperf; do
	command -v "$c" >/dev/null || {
		echo "test_dnstap: $c missing (deploy/deps.sh test installs fstrm-bin, dnstap-ldns, dnsperf)" >&2
		exit 1
	}
done
if ! "$bin" --check-config --config /dev/stdin <<<'log: {dnstap: {socket: /x.sock}}' 2>&1 |
	grep -qv "has no dnstap"; then
	echo "skipped: this build has no dnstap"
	exit 77
fi

topo_up || exit 1
topo_pod_add 1 || exit 1
upstream_up || exit 1
API_PORT=16483
CTL_PORT=16484
NODE=node-a
POD_B=169.254.101.2
in_pod_b() { ip netns exec "ndc-pod1-$TOPO_ID" "$@"; }
sock="$TOPO_DIR/dnstap.sock"
cap_pid=""

pod_json() { # NS NAME NODE IP
	printf '{"apiVersion":"v1","kind":"Pod","metadata":{"namespace":"%s","name":"%s",' "$1" "$2"
	printf '"uid":"uid-%s"},"spec":{"nodeName":"%s"},' "$2" "$3"
	printf '"status":{"phase":"Running","podIP":"%s","podIPs":[{"ip":"%s"}]}}' "$4" "$4"
}
fakeapi_up 5 || exit 1
fakeapi_ctl "{\"op\":\"apply\",\"object\":[$(pod_json team-a web-1 $NODE $POD_ADDR),$(pod_json team-b crawler-0 $NODE $POD_B)]}" ||
	{
		bad "the fake API server took the pods"
		summary test_dnstap
		exit 1
	}
conf="$TOPO_DIR/ndcache.yaml"
pods_synced() { [ "$(metric ndcache_pods_synced)" = 1 ]; }
connected() { [ "$(metric ndcache_dnstap_connected)" = 1 ]; }
frames_at_least() { [ "$(metric ndcache_dnstap_frames_total)" -ge "$1" ] 2>/dev/null; }
reader_drained() {
	[ "$(in_node ss -xnH src "$sock" | awk '{ q += $3 } END { print q + 0 }')" = 0 ]
}
# The reader in the node netns (the agent's unix socket is a path: any netns would do).
capture_start() {
	rm -f "$sock"
	ip netns exec "$NS_NODE" fstrm_capture -t protobuf:dnstap.Dnstap -u "$sock" -w "$1" \
		>"$1.log" 2>&1 &
	cap_pid=$!
	TOPO_PIDS+=("$cap_pid")
	wait_until 5 "fstrm_capture's socket $sock" test -S "$sock"
}
agent_start() { # EXTRA_LOG_YAML [MODE]
	ndcache_conf "$conf" kubernetes "${2:-socket}" eth-pod "log: {$1}"
	NODE_NAME=$NODE ndcache_start "$bin" "$conf"
	ndcache_ready 20 && wait_until 10 "ndcache_pods_synced 1" pods_synced
}

# check FILE WEB CRAWLER: the capture against what the pods sent; WEB and CRAWLER are the
# namespace/names expected in extra for 169.254.100.2 and 169.254.101.2.
check() {
	python3 - "$1" "$2" "$3" "$POD_ADDR" "$POD_B" <<'PY'
import re, subprocess, sys
path, web, crawler, addr_a, addr_b = sys.argv[1:]
docs = [d for d in subprocess.run(["dnstap-ldns", "-y", "-r", path], capture_output=True,
                                  text=True, check=True).stdout.split("\n---\n") if d.strip()]
dump = subprocess.run(["fstrm_dump", path], capture_output=True, text=True, check=True).stdout
frames = re.findall(r'^ "(.*)"$', dump, re.M)
if len(frames) != len(docs):
    sys.exit(f"dnstap-ldns decoded {len(docs)} records, fstrm_dump shows {len(frames)} frames")
def extra_of(frame):
    m = re.search(r'\\x1a\\x([0-9a-f]{2})', frame)
    if not m:
        return ""
    n = int(m.group(1), 16)
    return frame[m.end():m.end() + n]   # namespace/name: printable, unescaped by fstrm_dump
client, fwd = [], []
for doc, frame in zip(docs, frames):
    kind = re.search(r"^  type: (\S+)", doc, re.M).group(1)
    q = re.search(r"^    ;(\S+)\tIN\t(\S+)", doc, re.M)
    rc = re.search(r"rcode: (\w+)", doc)
    addr = re.search(r'^  query_address: "?([^"\s]+)"?', doc, re.M)
    rec = (kind, q and q.group(1), q and q.group(2), rc and rc.group(1))
    if kind.startswith("CLIENT_"):
        client.append(rec + (addr and addr.group(1), extra_of(frame)))
    elif q and q.group(1).lower() in ("www.example.com.", "big.example.com."):
        # the forwarder asks in mixed case (0x20, draft-vixie-dnsext-dns0x20)
        proto = re.search(r"^  socket_protocol: (\S+)", doc, re.M)
        fwd.append((kind, q.group(1).lower()) + rec[2:] + (proto and proto.group(1),))
want = []
def pair(name, qtype, rcode, addr, extra):
    want.append(("CLIENT_QUERY", name, qtype, "NOERROR", addr, extra))
    want.append(("CLIENT_RESPONSE", name, qtype, rcode, addr, extra))
for i in range(6):
    pair(["kubernetes.default.svc.cluster.local.", "kube-dns.kube-system.svc.cluster.local."][i % 2],
         "A", "NOERROR", addr_a, web)
for i in range(4):
    pair("www.example.com.", "AAAA", "NOERROR", addr_a, web)
pair("big.example.com.", "TXT", "NOERROR", addr_a, web)
for i in range(5):
    pair("www.example.com.team-b.svc.cluster.local.", "A", "NXDOMAIN", addr_b, crawler)
errs = []
if client != want:
    d = next(i for i in range(max(len(client), len(want)))
             if i >= len(client) or i >= len(want) or client[i] != want[i])
    errs.append(f"{len(client)} CLIENT_* records, {len(want)} sent; first difference at {d}: "
                f"got {client[d] if d < len(client) else None}, want {want[d] if d < len(want) else None}")
# big.example.com TXT (1,650 bytes) comes back truncated over UDP and is asked again over TCP
wf = [("FORWARDER_QUERY", "www.example.com.", "AAAA", "NOERROR", "UDP"),
      ("FORWARDER_RESPONSE", "www.example.com.", "AAAA", "NOERROR", "UDP"),
      ("FORWARDER_QUERY", "big.example.com.", "TXT", "NOERROR", "UDP"),
      ("FORWARDER_QUERY", "big.example.com.", "TXT", "NOERROR", "TCP"),
      ("FORWARDER_RESPONSE", "big.example.com.", "TXT", "NOERROR", "TCP")]
if fwd != wf:
    errs.append(f"forwarder records: {fwd}, want {wf}")
print("; ".join(errs) if errs else
      f"{len(client)} CLIENT_* records as sent (names, types, rcodes, addresses, pods in extra), "
      f"{len(fwd)} FORWARDER_* for the two misses (UDP, TC then TCP), {len(docs)} records in all")
sys.exit(1 if errs else 0)
PY
}

part_capture() {
	local out
	capture_start "$TOPO_DIR/agent.fstrm" || return
	agent_start "dnstap: {socket: $sock, sample: 1.0}" || {
		bad "capture: the agent with log.dnstap is ready"
		return
	}
	wait_until 10 "the agent connected to fstrm_capture" connected ||
		bad "capture: ndcache_dnstap_connected" "$(metrics | grep dnstap)"
	in_pod python3 "$here/top_send.py" "$NODE_LOCAL" 6 kubernetes.default.svc.cluster.local \
		kube-dns.kube-system.svc.cluster.local >/dev/null &&
		in_pod python3 "$here/top_send.py" "$NODE_LOCAL" 4 www.example.com:AAAA >/dev/null &&
		in_pod python3 "$here/top_send.py" "$NODE_LOCAL" 1 big.example.com:TXT >/dev/null &&
		in_pod_b python3 "$here/top_send.py" "$NODE_LOCAL" 5 \
			www.example.com.team-b.svc.cluster.local >/dev/null ||
		bad "capture: the pods' queries were answered"
	# 32 client frames and the misses' 5 (and the loop checks'): written before the agent stops
	wait_until 10 "37 frames written" frames_at_least 37 ||
		bad "capture: frames written" "$(metrics | grep dnstap)"
	wait_until 5 "fstrm_capture reads what was sent" reader_drained
	term_wait "$NDCACHE_PID" ndcache 10 &&
		! grep -Eq "ERROR: AddressSanitizer|runtime error:" "$TOPO_DIR/ndcache.log" ||
		bad "capture: the agent exits 0 at SIGTERM, no sanitizer report" \
			"$(tail -20 "$TOPO_DIR/ndcache.log")"
	term_wait "$cap_pid" fstrm_capture 10
	out=$(check "$TOPO_DIR/agent.fstrm" team-a/web-1 team-b/crawler-0 2>&1)
	[ $? = 0 ] && ok "capture: $out" || bad "capture: what dnstap-ldns decoded" "$out"
	out=$(check "$TOPO_DIR/agent.fstrm" team-b/crawler-0 team-a/web-1 2>&1)
	[ $? != 0 ] && ok "capture: the check fails with the pods' names swapped" ||
		bad "capture: the check passed swapped names" "$out"
}

# The agent's time on a CPU so far, in ns: every thread's (/proc/PID/task/*/schedstat, first field).
cpu_ns() {
	cat /proc/"$NDCACHE_PID"/task/*/schedstat 2>/dev/null | awk '{ n += $1 } END { printf "%d", n }'
}

# dnsperf for 3 s from the pod at a fixed 20,000 QPS (a fifth or less of what this host answers at
# most: 85,000-174,000 measured):
# prints "SENT ANSWERED NS" (NS: the agent's CPU time per answered query).
perf() {
	local c0 c1 out
	printf 'kubernetes.default.svc.cluster.local A\nwww.example.com A\n' >"$TOPO_DIR/perf.txt"
	in_pod python3 "$here/top_send.py" "$NODE_LOCAL" 2 www.example.com >/dev/null
	c0=$(cpu_ns)
	out=$(in_pod dnsperf -s "$NODE_LOCAL" -d "$TOPO_DIR/perf.txt" -l 3 -c 4 -Q 20000 -t 1 2>&1)
	c1=$(cpu_ns)
	echo "$out" | awk -v c="$((c1 - c0))" '/Queries sent:/ { s = $3 } /Queries completed:/ { a = $3 }
		END { printf "%d %d %.0f\n", s, a, (a > 0 ? c / a : 0) }'
}

# True when perf's "SENT ANSWERED NS" ($1 $2) says at least 99% of what was sent was answered.
answered_99() {
	[ -n "${2:-}" ] && [ "$2" -ge $((${1:-0} * 99 / 100)) ]
}

# What dnstap with no reader costs is measured as the agent's CPU time per answered query at a
# fixed rate, rounds without and with dnstap by turns, each round's pair compared (the median of
# their ratios). The answered rate at full load was this check's figure until session 25: on this
# shared host it is bimodal (rounds without dnstap gave 85,000-104,000 QPS or, one in three,
# 135,000-174,000; with dnstap 76,000-109,000), so one lucky round without decided it, twice in
# three CI runs. CPU time per query at a rate the host keeps up with does not depend on how
# dnsperf and the agent share the two CPUs.
part_noreader() {
	local out qb round rounds=5 dropped=0 d all="" ratios="" median lost=0
	for round in $(seq "$rounds"); do
		agent_start "" || {
			bad "noreader: the agent without dnstap is ready"
			return
		}
		out=$(perf)
		term_wait "$NDCACHE_PID" ndcache 10
		set -- $out
		all+=" without=${1:-?}/${2:-?}/${3:-?}ns"
		answered_99 "$@" || lost=$((lost + 1))
		qb=${3:-0}
		rm -f "$sock"
		agent_start "dnstap: {socket: $sock}" || {
			bad "noreader: the agent with dnstap and no reader is ready"
			return
		}
		out=$(perf)
		d=$(metric 'ndcache_dnstap_dropped_total{reason="no_reader"}')
		answered=$(metric 'ndcache_queries_total')
		term_wait "$NDCACHE_PID" ndcache 10
		set -- $out
		all+=" with=${1:-?}/${2:-?}/${3:-?}ns"
		answered_99 "$@" || lost=$((lost + 1))
		# a round without a figure counts as a large ratio: it fails the median unless the others carry it
		ratios+=" $(awk -v w="${3:-0}" -v b="$qb" 'BEGIN { printf "%.3f", (b > 0 && w > 0 ? w / b : 99) }')"
		# two events (query, response) per query the socket path answered, each dropped
		if [ -n "$d" ] && [ -n "$answered" ] && [ "$d" -ge $((2 * answered)) ]; then
			dropped=$((dropped + 1))
		else
			all+=" (dropped $d of 2 x $answered)"
		fi
	done
	echo "       $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), socket mode, dnsperf -c 4 -Q 20000 -l 3, $rounds rounds each (sent/answered/agent CPU ns per answer):$all"
	median=$(echo "$ratios" | tr ' ' '\n' | sed '/^$/d' | sort -n | sed -n "$((rounds / 2 + 1))p")
	echo "       each round's CPU per answer with / without:$ratios (median $median)"
	if awk -v m="${median:-99}" 'BEGIN { exit !(m <= 1.25) }'; then
		ok "noreader: dnstap with no reader costs the agent little (CPU per answer with / without, median of $rounds rounds: $median, at most 1.25)"
	else
		bad "noreader: CPU per answer with dnstap and no reader" "$all"
	fi
	if [ "$lost" = 0 ]; then
		ok "noreader: every round answered at least 99% of 20,000 QPS, with and without dnstap"
	else
		bad "noreader: answered at 20,000 QPS" "$all"
	fi
	if [ "$dropped" = "$rounds" ]; then
		ok "noreader: the drops are counted (two per query answered, every round)"
	else
		bad "noreader: drops counted" "$all"
	fi
}

# tc mode, sample 0 (nothing from the socket path), kernel_sample 0.05: web-1 asks one cluster
# name 10,000 times, the kernel answers and samples about 500 (within 20%), each a CLIENT_RESPONSE
# for web-1's address with team-a/web-1 in extra. 0.05 rather than the default 0.01: 20% of 100
# samples is two standard deviations (a run in twenty would fail), of 500 four and a half.
part_kernel() {
	local out n
	capture_start "$TOPO_DIR/kernel.fstrm" || return
	agent_start "dnstap: {socket: $sock, sample: 0, kernel_sample: 0.05}" tc || {
		bad "kernel: the agent (tc) with log.dnstap is ready"
		return
	}
	if fastpath_missing tc; then
		term_wait "$NDCACHE_PID" ndcache 10
		term_wait "$cap_pid" fstrm_capture 10
		return
	fi
	wait_until 10 "the agent connected to fstrm_capture" connected ||
		bad "kernel: ndcache_dnstap_connected" "$(metrics | grep dnstap)"
	out=$(in_pod python3 "$here/top_send.py" "$NODE_LOCAL" 10000 \
		kubernetes.default.svc.cluster.local) || bad "kernel: web-1's 10,000 queries" "$out"
	wait_until 10 "at least 400 kernel samples written" frames_at_least 400 ||
		bad "kernel: samples written" "$(metrics | grep dnstap)"
	term_wait "$NDCACHE_PID" ndcache 10 ||
		bad "kernel: the agent exits 0 at SIGTERM" "$(tail -20 "$TOPO_DIR/ndcache.log")"
	wait_until 5 "fstrm_capture reads what was sent" reader_drained
	term_wait "$cap_pid" fstrm_capture 10
	n=$(python3 - "$TOPO_DIR/kernel.fstrm" "$POD_ADDR" <<'PY'
import re, subprocess, sys
path, addr = sys.argv[1:]
docs = [d for d in subprocess.run(["dnstap-ldns", "-y", "-r", path], capture_output=True,
                                  text=True, check=True).stdout.split("\n---\n") if d.strip()]
dump = subprocess.run(["fstrm_dump", path], capture_output=True, text=True, check=True).stdout
frames = re.findall(r'^ "(.*)"$', dump, re.M)
good = client = 0  # the loop checks' FORWARDER_* records are not the kernel's
for doc, frame in zip(docs, frames):
    client += bool(re.search(r"^  type: CLIENT_", doc, re.M))
    if (re.search(r"^  type: CLIENT_RESPONSE", doc, re.M)
            and re.search(r'^  query_address: "?' + re.escape(addr), doc, re.M)
            and re.search(r"^    ;kubernetes\.default\.svc\.cluster\.local\.\tIN\tA", doc, re.M)
            and "team-a/web-1" in frame):
        good += 1
print(f"{good} {client}")
PY
)
	set -- $n
	if [ "${1:-0}" = "${2:-x}" ] && [ "$1" -ge 400 ] && [ "$1" -le 600 ]; then
		ok "kernel: $1 sampled kernel answers of 10,000 at kernel_sample 0.05 (400 to 600), each web-1's answer with team-a/web-1"
	else
		bad "kernel: sampled kernel answers" "$1 matching of $2 client records (want 400 to 600, all matching)"
	fi
}

for p in "${parts[@]}"; do
	case "$p" in
	capture | noreader | kernel) "part_$p" ;;
	*)
		echo "unknown part $p" >&2
		exit 2
		;;
	esac
done
summary test_dnstap
