#!/usr/bin/env bash
# Kubernetes-sync benchmark (issue 3): ndcache synced from the fake API server at scale.
# Prints figures and met/MISSED against the issue's targets; it is a benchmark, not a test.
# See docs/bench/K8S.md for what each figure means.
#
# Usage: k8s_bench.sh [--services N[,N...]] [--changes-per-s R] [--duration S] [--out FILE.csv]
#                     [--churn services|endpoints|mixed] [--build DIR] [--logs DIR] [--quick]
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
fake="$root/tests/fakeapi/fake_apiserver.py"
gen="$here/gen_k8s_scale.py"

usage() {
	sed -n 's/^# \{0,1\}//; 6,7p' "$0" >&2
	exit 2
}

scales="10000,100000"
rate=1000
duration=10
churn=services
out=""
build="$root/build-k8b"
logs=""
while [ $# -gt 0 ]; do
	case $1 in
	--services) scales=${2:-}; shift 2 ;;
	--changes-per-s) rate=${2:-}; shift 2 ;;
	--duration) duration=${2:-}; shift 2 ;;
	--churn) churn=${2:-}; shift 2 ;;
	--out) out=${2:-}; shift 2 ;;
	--build) build=${2:-}; shift 2 ;;
	--logs) logs=${2:-}; shift 2 ;;
	--quick) scales=5000; duration=5; shift ;;
	-h | --help) usage ;;
	*) echo "k8s_bench: unknown argument $1" >&2; usage ;;
	esac
done
[[ $scales =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "k8s_bench: --services wants N[,N...]" >&2; exit 2; }
for n in ${scales//,/ }; do
	((n >= 100 && n <= 500000)) || { echo "k8s_bench: --services must be 100..500000" >&2; exit 2; }
done
if ! [[ $rate =~ ^[0-9]+$ ]] || ((rate < 1 || rate > 20000)); then
	echo "k8s_bench: --changes-per-s must be 1..20000" >&2
	exit 2
fi
case $churn in
services | endpoints | mixed) ;;
*) echo "k8s_bench: --churn wants services, endpoints or mixed" >&2; exit 2 ;;
esac
if ! [[ $duration =~ ^[0-9]+$ ]] || ((duration < 1 || duration > 120)); then
	echo "k8s_bench: --duration must be 1..120" >&2
	exit 2
fi
out=${out:-$build/k8s_bench.csv}

# Targets from issue 3.
READY_TARGET_S=5
RSS_TARGET_KB=$((100 * 1024))
P99_TARGET_US=5000
# Time limits (seconds): nothing waits longer than these.
API_LOAD_MAX=240
READY_MAX=120
DRAIN_MAX=45
API_PORT=16443
CTL_PORT=16444
HTTP=127.0.0.1:9254
ZONE=cluster.local

# shellcheck source=SCRIPTDIR/../integration/lib.sh
. "$root/tests/integration/lib.sh"

# --- Build (only the ndcache binary, release) ---------------------------------------------------
bin="$build/control/ndcache"
if [ ! -d "$build" ]; then
	meson setup "$build" --buildtype=release >/dev/null || exit 1
fi
if ! ninja -C "$build" control/ndcache >"/tmp/k8s_bench_build.$$.log" 2>&1; then
	if [ -x "$bin" ]; then
		echo "warning: building control/ndcache failed (another module mid-edit?); using the" \
			"existing binary from $(date -r "$bin" '+%F %T')" >&2
	else
		cat "/tmp/k8s_bench_build.$$.log" >&2
		rm -f "/tmp/k8s_bench_build.$$.log"
		exit 1
	fi
fi
rm -f "/tmp/k8s_bench_build.$$.log"

topo_up || exit 1
certs="$TOPO_DIR/certs"
"$root/tests/fakeapi/make_certs.sh" "$certs" >/dev/null || exit 1
token=bench-token
printf '%s' "$token" >"$TOPO_DIR/token"
cat >"$TOPO_DIR/kubeconfig" <<EOF
apiVersion: v1
kind: Config
current-context: bench
contexts:
- name: bench
  context: {cluster: fake, user: ndcache}
clusters:
- name: fake
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority: $certs/ca.pem
users:
- name: ndcache
  user:
    tokenFile: $TOPO_DIR/token
EOF
conf="$TOPO_DIR/ndcache.yaml"
cat >"$conf" <<EOF
listen: [$NODE_LOCAL]
source:
  kubernetes: {kubeconfig: $TOPO_DIR/kubeconfig}
dataplane: {mode: socket}
http: {listen: "$HTTP"}
workers: 1
EOF

# --- The change driver and samplers (runs in the node netns) -----------------------------------
# Drives R changes/s through the control API, samples ndcache's programming-latency metric per
# record-table build, and times sampled changes end to end (control POST returned -> the new
# ClusterIP answered). Prints key=value lines.
cat >"$TOPO_DIR/driver.py" <<'PY'
import http.client, json, math, os, socket, struct, sys, threading, time
sys.path.insert(0, os.environ["GEN_DIR"])
import gen_k8s_scale as g

tsv, ctl_port, rate, duration, drain_max, dns_addr, churn = sys.argv[1:8]
ctl_port, rate, duration, drain_max = int(ctl_port), int(rate), float(duration), float(drain_max)
PROBE_EVERY = 0.2
SCRAPE_EVERY = 0.05
POLL_EVERY = 0.0005

svcs = []
slices = []  # (index, ns, name, headless, endpoints) of every Service with endpoints
with open(tsv) as f:
    for line in f:
        i, ns, name, cip, alt, eps = line.split()
        if cip != "None" and i != "0":
            svcs.append((ns, name, cip, alt))
        if eps != "-" and i != "0":
            slices.append((int(i), ns, name, cip == "None", len(eps.split(","))))
n_probe = min(len(svcs) // 4, int(duration / PROBE_EVERY) + 10)
# The loader's Services may switch more than once (back to their original address), so the
# drain is timed on a marker Service changed once, after the load.
marker, probes, load = svcs[-1], svcs[-n_probe - 1:-1], svcs[:-n_probe - 1]

def pct(vals, p, lost=0):
    """Nearest rank; the lost (never served) rank after every served one."""
    if not vals and not lost:
        return "n/a"
    s = sorted(vals) + [math.inf] * lost
    v = s[max(0, math.ceil(p / 100.0 * len(s)) - 1)]
    return "lost" if v == math.inf else "%d" % v

class Ctl:
    def __init__(self):
        self.c = http.client.HTTPConnection("127.0.0.1", ctl_port, timeout=30)
    def apply(self, objs):
        body = json.dumps({"op": "apply", "object": objs})
        self.c.request("POST", "/control", body, {"Content-Type": "application/json"})
        r = self.c.getresponse()
        data = r.read()
        if r.status != 200:
            raise RuntimeError("control: %d %s" % (r.status, data[:200]))

def dns_a(sock, qid, name):
    q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"
    q += struct.pack("!HH", 1, 1)
    sock.send(q)
    while True:
        m = sock.recv(4096)
        if len(m) >= 12 and struct.unpack("!H", m[:2])[0] == qid:
            break
    an = struct.unpack("!H", m[6:8])[0]
    p = 12
    while m[p]:
        p += m[p] + 1
    p += 5
    ips = set()
    for _ in range(an):
        if m[p] & 0xC0 == 0xC0:
            p += 2
        else:
            while m[p]:
                p += m[p] + 1
            p += 1
        t, _, _, ln = struct.unpack("!HHIH", m[p:p + 10])
        p += 10
        if t == 1 and ln == 4:
            ips.add(socket.inet_ntoa(m[p:p + 4]))
        p += ln
    return ips

stop = threading.Event()
lock = threading.Lock()
sent = [0]
errors = []

def loader(t_end):
    ctl = Ctl()
    flip = {}
    k = j = 0
    t0 = time.monotonic()
    while not stop.is_set():
        now = time.monotonic()
        if now >= t_end:
            break
        due = int(rate * (now - t0)) - sent[0]
        if due > 0:
            objs = []
            for c in range(min(due, 500)):
                if churn == "endpoints" or (churn == "mixed" and (sent[0] + c) % 2):
                    # An endpoint turns not ready, or ready again: its Service's addresses,
                    # SRV sets, host names and reverse names change (the common change in a
                    # real cluster: pods come and go).
                    i, ns, name, headless, per = slices[j % len(slices)]
                    j += 1
                    sl = g.endpoint_slice(i, ns, name, headless, per)
                    ready = bool(flip.get(sl["metadata"]["name"]))
                    flip[sl["metadata"]["name"]] = not ready
                    sl["endpoints"][0]["conditions"]["ready"] = ready
                    objs.append(sl)
                    continue
                ns, name, cip, alt = load[k % len(load)]
                k += 1
                new = alt if not flip.get(name) else cip
                flip[name] = not flip.get(name)
                objs.append(g.service(ns, name, new))
            try:
                ctl.apply(objs)
            except Exception as e:
                errors.append(repr(e))
                stop.set()
                return
            with lock:
                sent[0] += len(objs)
        time.sleep(0.01)

pending = []  # [fqdn, new ip, t posted]
e2e_us = []
probe_timeouts = [0]

def prober(t_end):
    ctl = Ctl()
    for ns, name, cip, alt in probes:
        if stop.is_set() or time.monotonic() >= t_end:
            break
        t_next = time.monotonic() + PROBE_EVERY
        try:
            ctl.apply(g.service(ns, name, alt))
        except Exception as e:
            errors.append(repr(e))
            stop.set()
            return
        t = time.monotonic()
        with lock:
            sent[0] += 1
            pending.append(("%s.%s.svc.cluster.local" % (name, ns), alt, t))
        time.sleep(max(0.0, t_next - time.monotonic()))

def poller(t_stop):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.connect((dns_addr, 53))
    sock.settimeout(1.0)
    qid = 0
    while time.monotonic() < t_stop[0]:
        with lock:
            todo = list(pending)
        if not todo:
            if stop.is_set():
                break
            time.sleep(POLL_EVERY)
            continue
        # Tables are published whole and in event order: poll the oldest change; once it is
        # served, look at the younger ones at once.
        for fqdn, ip, t in todo:
            qid = (qid + 1) & 0xFFFF
            try:
                ips = dns_a(sock, qid, fqdn)
            except (socket.timeout, OSError, IndexError, struct.error):
                break
            now = time.monotonic()
            if ip not in ips:
                break
            e2e_us.append((now - t) * 1e6)
            with lock:
                pending.remove((fqdn, ip, t))
        time.sleep(POLL_EVERY)
    with lock:
        probe_timeouts[0] = len(pending)

batches = []  # programming_latency_last_us, one per table version seen
rebuilds = [None, None]
hists = [None, None]  # the per-change latency histogram when the load starts, and the latest

def hist(m):
    """Cumulative (upper bound us, count) of ndcache_programming_latency_us."""
    b = []
    for k, v in m.items():
        if k.startswith('ndcache_programming_latency_us_bucket{le="'):
            le = k.split('"')[1]
            b.append((float("inf") if le == "+Inf" else float(le), v))
    return sorted(b)

def hist_pct(h0, h1, p):
    """The bucket bound under which p% of the changes between two scrapes fell."""
    if not h0 or not h1 or len(h0) != len(h1):
        return "n/a"
    d = [(b1, c1 - c0) for (b1, c1), (_, c0) in zip(h1, h0)]
    total = d[-1][1]
    if total <= 0:
        return "n/a"
    for bound, cum in d:
        if cum >= total * p / 100.0:
            return "inf" if bound == float("inf") else "%d" % bound
    return "n/a"

def scrape():
    c = http.client.HTTPConnection("127.0.0.1", 9254, timeout=5)
    c.request("GET", "/metrics")
    r = c.getresponse()
    text = r.read().decode()
    c.close()
    m = {}
    for line in text.splitlines():
        if line.startswith("ndcache_"):
            k, _, v = line.partition(" ")
            m[k] = float(v)
    return m

intake = []  # (t, changes posted so far, watch events applied so far)

def scraper(t_stop):
    last = None
    ev0 = None
    while time.monotonic() < t_stop[0]:
        with lock:
            posted = sent[0]
        try:
            m = scrape()
        except OSError:
            time.sleep(SCRAPE_EVERY)
            continue
        ev = int(m.get("ndcache_k8s_events_total", 0))
        if ev0 is None:
            ev0 = ev
        intake.append((time.monotonic(), posted, ev - ev0))
        n = int(m.get("ndcache_records_rebuilds_total", 0)) + \
            int(m.get("ndcache_records_patches_total", 0))
        if hists[0] is None:
            hists[0] = hist(m)
        hists[1] = hist(m)
        if rebuilds[0] is None:
            rebuilds[0] = n
        elif n != last:
            batches.append(m.get("ndcache_programming_latency_last_us", 0))
        last = rebuilds[1] = n
        time.sleep(SCRAPE_EVERY)

t_start = time.monotonic()
t_end = t_start + duration
t_stop = [t_end + drain_max]
ths = [threading.Thread(target=f, args=(a,), daemon=True)
       for f, a in ((scraper, t_stop), (loader, t_end), (prober, t_end), (poller, t_stop))]
for t in ths:
    t.start()
ths[1].join()
ths[2].join()
load_s = time.monotonic() - t_start
# Drain: one more change after the load; how long until it is served (or the limit).
drain = "n/a"
if not errors:
    drain = "lost"
    ns, name, cip, alt = marker
    fqdn = "%s.%s.svc.cluster.local" % (name, ns)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.connect((dns_addr, 53))
    sock.settimeout(1.0)
    try:
        Ctl().apply(g.service(ns, name, alt))
    except Exception as e:
        errors.append(repr(e))
    t0 = time.monotonic()
    while time.monotonic() < t_stop[0] and not errors:
        try:
            if alt in dns_a(sock, 7, fqdn):
                drain = "%.2f" % (time.monotonic() - t0)
                break
        except (socket.timeout, OSError):
            pass
        time.sleep(0.005)
# Let the poller finish what is pending, then one more build's sample.
while time.monotonic() < t_stop[0]:
    with lock:
        if not pending:
            break
    time.sleep(0.01)
time.sleep(2 * SCRAPE_EVERY)
t_stop[0] = 0
for t in (ths[0], ths[3]):
    t.join()

# Watch events ndcache applied to its store while the load ran, and the largest backlog of
# posted changes not yet applied (the programming-latency metric starts only at "applied").
applied = [a for t, p, a in intake if t <= t_start + load_s]
print("intake=%.0f" % ((applied[-1] / load_s) if applied else 0))
print("backlog_max=%d" % max([p - a for t, p, a in intake] or [0]))
n_builds = 0 if rebuilds[0] is None else rebuilds[1] - rebuilds[0]
print("per_build=%s" % ("%.1f" % (intake[-1][2] / n_builds) if intake and n_builds else "n/a"))
print("changes=%d" % sent[0])
print("load_s=%.2f" % load_s)
print("achieved=%.0f" % (sent[0] / load_s))
print("batches_seen=%d" % len(batches))
print("rebuilds=%s" % ("n/a" if rebuilds[0] is None else rebuilds[1] - rebuilds[0]))
# Every change is in the histogram (not only sampled tables): the percentiles are its bucket
# bounds, so "1000" reads "at most 1 ms".
print("metric_p50_us=%s" % hist_pct(hists[0], hists[1], 50))
print("metric_p99_us=%s" % hist_pct(hists[0], hists[1], 99))
print("metric_changes=%s" % ("n/a" if not hists[1] else "%d" % (hists[1][-1][1] - hists[0][-1][1])))
print("metric_max_us=%s" % ("n/a" if not batches else "%d" % max(batches)))
print("e2e_n=%d" % len(e2e_us))
print("e2e_timeouts=%d" % probe_timeouts[0])
print("e2e_p50_us=%s" % pct(e2e_us, 50, probe_timeouts[0]))
print("e2e_p99_us=%s" % pct(e2e_us, 99, probe_timeouts[0]))
print("e2e_max_us=%s" % pct(e2e_us, 100, probe_timeouts[0]))
print("drain_s=%s" % drain)
print("errors=%d" % len(errors))
for e in errors[:3]:
    sys.stderr.write("driver: %s\n" % e)
PY

# --- Helpers -----------------------------------------------------------------------------------
now() { echo "$EPOCHREALTIME"; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a - b }'; }
loadavg() { cut -d' ' -f1 /proc/loadavg; }
# CPU seconds (user + system, all threads) of a process.
cpu_s() {
	awk -v hz="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); printf "%.2f", ($12 + $13) / hz }' \
		"/proc/$1/stat" 2>/dev/null || echo 0
}
status_kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status" 2>/dev/null; }
metric() {
	in_node curl -s --max-time 2 "http://$HTTP/metrics" | awk -v m="$1" '$1 == m { printf "%d", $2 }'
}
# Bytes to whole MB, "?" when the metric was missing.
mb() { [[ ${1:-} =~ ^[0-9]+$ ]] && echo $(($1 / 1048576)) || echo "?"; }
ready_code() { in_node curl -s --max-time 1 -o /dev/null -w '%{http_code}' "http://$HTTP/ready"; }
# Stops one process started here and forgets it.
stop_pid() {
	local pid=$1 i keep=()
	kill -TERM "$pid" 2>/dev/null
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -9 "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	for i in "${TOPO_PIDS[@]}"; do
		[ "$i" != "$pid" ] && keep+=("$i")
	done
	TOPO_PIDS=("${keep[@]}")
}
# dig from the pod: sorted answer data, one line.
ask() { in_pod dig +time=2 +tries=1 +short "@$NODE_LOCAL" "$1" "$2" 2>&1 | sort | paste -sd' '; }
rcode() {
	in_pod dig +time=2 +tries=1 "@$NODE_LOCAL" "$1" "$2" 2>&1 | grep -o 'status: [A-Z]*' |
		cut -d' ' -f2
}

checks_ok=0
checks_total=0
check() { # name got want
	checks_total=$((checks_total + 1))
	if [ "$2" = "$3" ]; then
		checks_ok=$((checks_ok + 1))
	else
		echo "  answer check FAILED: $1: got '$2', want '$3'" >&2
	fi
}
# Answer checks from the pod netns: ClusterIP, headless (every ready endpoint), an endpoint
# hostname, SRV, and NXDOMAIN for a name that does not exist.
answer_checks() {
	local tsv=$1 line i ns name cip eps fq want
	checks_ok=0
	checks_total=0
	check kubernetes "$(ask kubernetes.default.svc.$ZONE A)" 10.96.0.1
	for line in "$(sed -n 2p "$tsv")" "$(awk '$4 != "None"' "$tsv" | tail -1)" \
		"$(awk '$4 == "None"' "$tsv" | head -1)" "$(awk '$4 == "None"' "$tsv" | tail -1)" \
		"$(awk 'NR % 997 == 0 && $4 != "None"' "$tsv" | tail -1)"; do
		read -r i ns name cip _ eps <<<"$line"
		fq="$name.$ns.svc.$ZONE"
		if [ "$cip" = None ]; then
			want=$(tr ',' '\n' <<<"$eps" | sort | paste -sd' ')
			check "$fq (headless)" "$(ask "$fq" A)" "$want"
			check "$name-1.$fq" "$(ask "$name-1.$fq" A)" "$(cut -d, -f2 <<<"$eps")"
		else
			check "$fq" "$(ask "$fq" A)" "$cip"
		fi
	done
	read -r i ns name cip _ eps <<<"$(sed -n 2p "$tsv")"
	fq="$name.$ns.svc.$ZONE"
	check "_http._tcp.$fq SRV" "$(ask "_http._tcp.$fq" SRV | awk '{ print $3, $4 }')" "80 $fq."
	check "nosuch.$ns.svc.$ZONE" "$(rcode "nosuch.$ns.svc.$ZONE" A)" NXDOMAIN
}

date_s=$(date -u '+%Y-%m-%dT%H:%M:%SZ')
kernel=$(uname -r)
cpu_model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
mem_mb=$(free -m | awk '/^Mem:/ { print $2 }')
echo "k8s_bench: $date_s, $(hostname), $(nproc) CPUs ($cpu_model), $mem_mb MB," \
	"kernel $kernel"
la_start=$(loadavg)
echo "k8s_bench: load average $(cut -d' ' -f1-3 /proc/loadavg)" \
	"(other work on this machine skews every figure)"
echo "k8s_bench: ndcache $("$bin" --version 2>/dev/null | head -1) ($bin), workers 1, socket mode;" \
	"$rate changes/s ($churn) for ${duration}s; scales: $scales services"

csv_head="date,host,services,headless,namespaces,endpoints,k8s_objects,records,api_load_s,ready_s,rss_ready_kb,hwm_ready_kb,rss_end_kb,hwm_end_kb,checks_ok,checks_total,rate_target,rate_achieved,changes,duration_s,rebuilds,batches_seen,metric_p50_us,metric_p99_us,metric_max_us,e2e_n,e2e_timeouts,e2e_p50_us,e2e_p99_us,e2e_max_us,drain_s,ndcache_cpu_sync_s,api_cpu_sync_s,ndcache_cpu_load_pct,api_cpu_load_pct,loadavg1_start,loadavg1_end,nproc,kernel,intake_per_s,backlog_max,lists_s,first_build_s,churn"
rows=()
declare -A R
failed=0

run_scale() {
	local n=$1 dir="$TOPO_DIR/gen-$1" t0 t1 i code api_pid nd_pid la0 line k v
	R=()
	la0=$(loadavg)
	echo
	echo "== $n services =="
	line=$(python3 "$gen" --services "$n" --out "$dir") || return 1
	echo "  cluster: $line"
	for kv in $line; do R[gen_${kv%%=*}]=${kv#*=}; done

	# Fake API server: its load is not timed against ndcache.
	t0=$(now)
	ip netns exec "$NS_NODE" python3 "$fake" --cert "$certs/server.pem" --key "$certs/server.key" \
		--token "$token" --objects "$dir/cluster.json" --port $API_PORT --control-port $CTL_PORT \
		--bookmark-interval 1 >"$TOPO_DIR/fakeapi.out" 2>"$TOPO_DIR/fakeapi.err" &
	api_pid=$!
	TOPO_PIDS+=("$api_pid")
	for ((i = 0; i < API_LOAD_MAX * 5; i++)); do
		grep -q "fakeapi listening" "$TOPO_DIR/fakeapi.out" 2>/dev/null && break
		kill -0 "$api_pid" 2>/dev/null || break
		sleep 0.2
	done
	if ! grep -q "fakeapi listening" "$TOPO_DIR/fakeapi.out" 2>/dev/null; then
		echo "  fake API server did not start within ${API_LOAD_MAX}s" >&2
		head -20 "$TOPO_DIR/fakeapi.err" >&2
		stop_pid "$api_pid"
		return 1
	fi
	R[api_load_s]=$(sub "$(now)" "$t0")
	echo "  fake API server loaded ${R[gen_services]} services in ${R[api_load_s]} s" \
		"(RSS $(($(status_kb "$api_pid" VmRSS) / 1024)) MB)"

	# (1) Ready: from ndcache's start until /ready is 200, polled every 50 ms.
	local api_cpu0
	api_cpu0=$(cpu_s "$api_pid")
	t0=$(now)
	# Log lines stamped as they arrive (the process substitution is not $!: that stays ndcache).
	ip netns exec "$NS_NODE" "$bin" --config "$conf" >/dev/null 2> >(while IFS= read -r l; do
		echo "$EPOCHREALTIME $l"
	done >"$TOPO_DIR/ndcache-$n.log") &
	nd_pid=$!
	TOPO_PIDS+=("$nd_pid")
	code=000
	while :; do
		code=$(ready_code)
		[ "$code" = 200 ] && break
		kill -0 "$nd_pid" 2>/dev/null || break
		[ "$(sub "$(now)" "$t0" | cut -d. -f1)" -ge $READY_MAX ] && break
		sleep 0.05
	done
	t1=$(now)
	if [ "$code" != 200 ]; then
		echo "  ndcache not ready after $(sub "$t1" "$t0") s (/ready $code)" >&2
		tail -20 "$TOPO_DIR/ndcache-$n.log" >&2
		stop_pid "$nd_pid"
		stop_pid "$api_pid"
		return 1
	fi
	R[ready_s]=$(sub "$t1" "$t0")
	R[ndcache_cpu_sync_s]=$(cpu_s "$nd_pid")
	R[api_cpu_sync_s]=$(sub "$(cpu_s "$api_pid")" "$api_cpu0")
	# (2) Memory once ready.
	R[rss_ready_kb]=$(status_kb "$nd_pid" VmRSS)
	R[hwm_ready_kb]=$(status_kb "$nd_pid" VmHWM)
	# Where the time went: the last list finished (fake API server and parsing), then the
	# first table was built and served.
	R[lists_s]=$(awk -v t0="$t0" '/: listed [0-9]+ objects/ { t = $1 } END { printf "%.3f", t - t0 }' \
		"$TOPO_DIR/ndcache-$n.log")
	R[first_build_s]=$(awk -v t0="$t0" '/: listed [0-9]+ objects/ { t = $1 }
		/RRsets of .*: ready/ { r = $1 } END { printf "%.3f", r - t }' "$TOPO_DIR/ndcache-$n.log")
	R[records]=$(metric ndcache_records)
	R[k8s_objects]=$(metric ndcache_k8s_objects)
	R[table_ready]=$(metric ndcache_records_bytes)
	echo "  ready after ${R[ready_s]} s (ndcache CPU ${R[ndcache_cpu_sync_s]} s, fake API server" \
		"CPU ${R[api_cpu_sync_s]} s meanwhile); ${R[k8s_objects]} objects, ${R[records]} RRsets;" \
		"RSS $((R[rss_ready_kb] / 1024)) MB, peak $((R[hwm_ready_kb] / 1024)) MB"
	echo "  memory once ready: record table $(mb "${R[table_ready]}") MB of the RSS; RSS anonymous" \
		"$(($(status_kb "$nd_pid" RssAnon) / 1024)) MB, file-backed (binary, libraries)" \
		"$(($(status_kb "$nd_pid" RssFile) / 1024)) MB (heap breakdown: tests/bench/bench_store)"
	echo "  of which: lists done ${R[lists_s]} s after start, then the first table built and" \
		"served in ${R[first_build_s]} s (from ndcache's log, stamped as it arrived)"

	# (3) Answers.
	answer_checks "$dir/services.tsv"
	R[checks_ok]=$checks_ok
	R[checks_total]=$checks_total
	echo "  answer checks: $checks_ok of $checks_total correct"
	[ "$checks_ok" = "$checks_total" ] || failed=1

	# (4) Programming latency under load, (5) rebuilds.
	local nd_cpu1 api_cpu1 t2
	nd_cpu1=$(cpu_s "$nd_pid")
	api_cpu1=$(cpu_s "$api_pid")
	t0=$(now)
	GEN_DIR=$here ip netns exec "$NS_NODE" python3 "$TOPO_DIR/driver.py" "$dir/services.tsv" \
		"$CTL_PORT" "$rate" "$duration" "$DRAIN_MAX" "$NODE_LOCAL" "$churn" >"$TOPO_DIR/driver.out" \
		2>"$TOPO_DIR/driver.err"
	t2=$(now)
	while IFS='=' read -r k v; do
		[ -n "$k" ] && R[$k]=$v
	done <"$TOPO_DIR/driver.out"
	[ -s "$TOPO_DIR/driver.err" ] && sed 's/^/  /' "$TOPO_DIR/driver.err" | head -10 >&2
	if [ -z "${R[changes]:-}" ] || [ "${R[errors]:-1}" != 0 ]; then
		echo "  change driver failed" >&2
		failed=1
	fi
	local el
	el=$(sub "$t2" "$t0")
	R[ndcache_cpu_load_pct]=$(awk -v a="$(cpu_s "$nd_pid")" -v b="$nd_cpu1" -v t="$el" \
		'BEGIN { printf "%.0f", 100 * (a - b) / t }')
	R[api_cpu_load_pct]=$(awk -v a="$(cpu_s "$api_pid")" -v b="$api_cpu1" -v t="$el" \
		'BEGIN { printf "%.0f", 100 * (a - b) / t }')
	R[rss_end_kb]=$(status_kb "$nd_pid" VmRSS)
	R[hwm_end_kb]=$(status_kb "$nd_pid" VmHWM)
	R[loadavg1_start]=$la0
	R[loadavg1_end]=$(loadavg)
	echo "  load: ${R[changes]:-?} changes in ${R[load_s]:-?} s = ${R[achieved]:-?}/s" \
		"(target $rate/s); ${R[rebuilds]:-?} tables (full or patched), ${R[batches_seen]:-?} sampled;" \
		"a change posted after the load served $([ "${R[drain_s]:-}" = lost ] &&
			echo "NOT within ${DRAIN_MAX}s" || echo "after ${R[drain_s]:-?} s")"
	echo "  ndcache applied ${R[intake]:-?} watch events/s to its store during the load; largest" \
		"backlog ${R[backlog_max]:-?} changes posted but not yet applied; ${R[per_build]:-?} events" \
		"per table build"
	echo "  CPU during the load: ndcache ${R[ndcache_cpu_load_pct]}%, fake API server" \
		"${R[api_cpu_load_pct]}% of one CPU; ndcache RSS $((R[rss_end_kb] / 1024)) MB," \
		"peak $((R[hwm_end_kb] / 1024)) MB; load average ${R[loadavg1_end]}"
	stop_pid "$nd_pid"
	stop_pid "$api_pid"
	if [ -n "$logs" ]; then
		mkdir -p "$logs"
		cp "$TOPO_DIR/ndcache-$n.log" "$TOPO_DIR/fakeapi.err" "$TOPO_DIR/driver.out" "$logs/" &&
			mv "$logs/fakeapi.err" "$logs/fakeapi-$n.err" && mv "$logs/driver.out" "$logs/driver-$n.out"
	fi

	rows+=("$(printf '%s,' "$date_s" "$(hostname)" "$n" "${R[gen_headless]}" "${R[gen_namespaces]}" \
		"${R[gen_endpoints]}" "${R[k8s_objects]}" "${R[records]}" "${R[api_load_s]}" "${R[ready_s]}" \
		"${R[rss_ready_kb]}" "${R[hwm_ready_kb]}" "${R[rss_end_kb]}" "${R[hwm_end_kb]}" \
		"${R[checks_ok]}" "${R[checks_total]}" "$rate" "${R[achieved]:-}" "${R[changes]:-}" \
		"$duration" "${R[rebuilds]:-}" "${R[batches_seen]:-}" "${R[metric_p50_us]:-}" \
		"${R[metric_p99_us]:-}" "${R[metric_max_us]:-}" "${R[e2e_n]:-}" "${R[e2e_timeouts]:-}" \
		"${R[e2e_p50_us]:-}" "${R[e2e_p99_us]:-}" "${R[e2e_max_us]:-}" "${R[drain_s]:-}" \
		"${R[ndcache_cpu_sync_s]}" "${R[api_cpu_sync_s]}" "${R[ndcache_cpu_load_pct]}" \
		"${R[api_cpu_load_pct]}" "${R[loadavg1_start]}" "${R[loadavg1_end]}" "$(nproc)" \
		"$kernel" "${R[intake]:-}" "${R[backlog_max]:-}" "${R[lists_s]}" "${R[first_build_s]}")$churn")
	return 0
}

for n in ${scales//,/ }; do
	run_scale "$n" || {
		failed=1
		rows+=("$date_s,$(hostname),$n,FAILED")
	}
done

# --- Table, verdicts, CSV ----------------------------------------------------------------------
ms() { # microseconds -> milliseconds, or as is
	[[ $1 =~ ^[0-9]+$ ]] && awk -v u="$1" 'BEGIN { printf "%.1f", u / 1000 }' || printf '%s' "${1:-?}"
}
msu() { [[ $1 =~ ^[0-9]+$ ]] && echo "$(ms "$1") ms" || printf '%s' "${1:-?}"; }
verdict() { [ "$1" = 1 ] && echo met || echo MISSED; }
echo
echo "== Results ($date_s, $(hostname), $(nproc) CPUs, load average at start $la_start) =="
printf '%8s %7s %6s %6s %7s %7s | %5s %6s %6s %8s %8s %8s | %8s %8s %8s %5s %7s\n' \
	services ready_s rss_MB end_MB peak_MB answers chg/s apply/s builds "met p50" "met p99" \
	"met max" "e2e p50" "e2e p99" "e2e max" e2e_n drain_s
for row in "${rows[@]}"; do
	IFS=, read -r -a f <<<"$row"
	if [ "${f[3]}" = FAILED ]; then
		printf '%9s  FAILED (see above)\n' "${f[2]}"
		continue
	fi
	printf '%8s %7s %6s %6s %7s %7s | %5s %6s %6s %8s %8s %8s | %8s %8s %8s %5s %7s\n' \
		"${f[2]}" "${f[9]}" "$((f[10] / 1024))" "$((f[12] / 1024))" "$((f[13] / 1024))" \
		"${f[14]}/${f[15]}" "${f[17]}" "${f[39]}" "${f[20]}" "$(ms "${f[22]}")" "$(ms "${f[23]}")" \
		"$(ms "${f[24]}")" "$(ms "${f[27]}")" "$(ms "${f[28]}")" "$(ms "${f[29]}")" \
		"$((f[25] + f[26]))" "${f[30]}"
done
echo "(latencies in ms; 'met' = the ndcache_programming_latency_us histogram over every change of"
echo " the load, each from its arrival until its table is served: percentiles are bucket bounds;"
echo " 'e2e' = control POST returned -> new ClusterIP answered, sampled changes, 'lost' = not"
echo " served within ${DRAIN_MAX}s after the load; apply/s = watch events ndcache applied per second)"
echo
echo "Targets (issue 3):"
for row in "${rows[@]}"; do
	IFS=, read -r -a f <<<"$row"
	[ "${f[3]}" = FAILED ] && continue
	n=${f[2]}
	printf '  %6s services: ready %6s s <= %d s: %s; RSS %d MB < 100 MB: %s (peak %d MB: %s);\n' \
		"$n" "${f[9]}" $READY_TARGET_S \
		"$(verdict "$(awk -v r="${f[9]}" -v t=$READY_TARGET_S 'BEGIN { print (r <= t) }')")" \
		$((f[10] / 1024)) "$(verdict $((f[10] < RSS_TARGET_KB)))" \
		$((f[13] / 1024)) "$(verdict $((f[13] < RSS_TARGET_KB)))"
	mp99=${f[23]}
	ep99=${f[28]}
	printf '  %6s           programming latency p99 %s <= 5 ms: %s (end to end p99 %s: %s)\n' \
		"" "$(msu "$mp99")" \
		"$( [[ $mp99 =~ ^[0-9]+$ ]] && verdict $((mp99 <= P99_TARGET_US)) || echo "MISSED (no sample)")" \
		"$(msu "$ep99")" \
		"$(if [[ $ep99 =~ ^[0-9]+$ ]]; then verdict $((ep99 <= P99_TARGET_US)); else
			echo "MISSED: ${f[26]} of $((f[25] + f[26])) sampled changes not served" \
				"within ${DRAIN_MAX}s after the load"; fi)"
	if [[ ${f[17]} =~ ^[0-9]+$ ]] && [[ ${f[39]} =~ ^[0-9]+$ ]] && ((f[39] * 10 < f[17] * 9)); then
		echo "                   note: ndcache applied only ${f[39]} of ${f[17]} changes/s: the" \
			"rest waited in the watch stream (up to ${f[40]}) before the metric's clock starts;" \
			"the end-to-end figure includes that wait"
	fi
	if [[ ${f[17]} =~ ^[0-9]+$ ]] && ((f[17] * 10 < rate * 9)); then
		echo "                   warning: only ${f[17]} of $rate changes/s were offered; the" \
			"latency is for that rate"
	fi
done
mkdir -p "$(dirname "$out")"
{
	echo "$csv_head"
	printf '%s\n' "${rows[@]}"
} >"$out"
echo
echo "CSV: $out"
exit $failed
