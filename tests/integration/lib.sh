# shellcheck shell=bash
# Test topology shared by the demo, the integration tests and the benchmarks. Source it, then
# call topo_up. Everything it creates is removed by topo_down, which an EXIT trap runs even when
# the caller fails or is interrupted.
#
#   pod netns  (169.254.100.2/24, default route via .1)
#      |  veth ndcp<id> <-> ndcn<id>
#   node netns (169.254.100.1/24 on the veth; on lo: 169.254.20.10 node-local address,
#               169.254.53.1 upstream DNS, ::1)
#
# Only 169.254.0.0/16 and loopback addresses are used: no packet can leave these namespaces,
# which have no other interfaces and no other routes.

TOPO_ID=${TOPO_ID:-$$}
TOPO_TESTS=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd) # tests/
SAMPLE_CLUSTER="$TOPO_TESTS/../deploy/examples/sample-cluster.json"
NS_NODE="ndc-node-$TOPO_ID"
NS_POD="ndc-pod-$TOPO_ID"
NODE_LOCAL=169.254.20.10
UPSTREAM_ADDR=169.254.53.1
POD_ADDR=169.254.100.2
NODE_VETH_ADDR=169.254.100.1
TOPO_DIR=""
TOPO_PIDS=()
TOPO_EXTRA_NS=() # pods added by topo_pod_add

in_node() { ip netns exec "$NS_NODE" "$@"; }

# Test bookkeeping for the integration scripts: ok DESC, bad DESC [DETAIL], then
# summary NAME prints "NAME: N passed, N failed" and returns non-zero on any failure.
pass=0
fail=0
ok() {
	pass=$((pass + 1))
	echo "ok   - $1"
}
bad() {
	fail=$((fail + 1))
	echo "FAIL - $1"
	[ -n "${2:-}" ] && printf '%s\n' "$2" | head -40 | sed 's/^/       /'
	return 0
}
summary() {
	echo "$1: $pass passed, $fail failed"
	[ "$fail" = 0 ]
}
in_pod() { ip netns exec "$NS_POD" "$@"; }

# Every wait is bounded (issue 11): wait_pid PID SECONDS WHAT waits for a process this shell
# started, at most SECONDS, and returns its exit status; past that it says what it waited for,
# kills it and returns 124.
wait_pid() {
	local pid=$1 secs=$2 what=$3 i
	local end=$((SECONDS + secs))
	# Polled every 0.1 s for 3 s, then every second (long waits in benchmarks stay quiet).
	for ((i = 0; SECONDS < end; i++)); do
		if ! kill -0 "$pid" 2>/dev/null; then
			wait "$pid" 2>/dev/null
			return
		fi
		if [ $i -lt 30 ]; then sleep 0.1; else sleep 1; fi
	done
	echo "timeout: $what (pid $pid) still running after ${secs}s; killed" >&2
	kill -9 "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null # reaps a SIGKILLed child at once
	return 124
}
# until_ok SECONDS CMD...: runs CMD every 0.1 s until it succeeds (0) or SECONDS have passed
# since the first try (1; a CMD under way then is let finish: give it a time bound of its own).
# (Its locals have names no caller's CMD uses: bash's dynamic scope would show them to CMD.)
until_ok() {
	local _uo_end
	_uo_end=$((${EPOCHREALTIME//[.,]/} + $1 * 1000000))
	shift
	until "$@"; do
		[ "${EPOCHREALTIME//[.,]/}" -lt "$_uo_end" ] || return 1
		sleep 0.1
	done
}
# wait_until SECONDS WHAT CMD...: until_ok, and when time runs out says on stderr what it waited
# for and returns 1. The wait before a check: poll the condition the check needs (the agent
# listens, the event reached it), never a fixed sleep then one probe (issue 34).
wait_until() {
	local _wu_secs=$1 _wu_what=$2
	shift 2
	until_ok "$_wu_secs" "$@" && return 0
	echo "timeout: $_wu_what: not within ${_wu_secs}s" >&2
	return 1
}
# term_wait PID WHAT [SECONDS]: SIGTERM, then wait_pid (default 5 s); returns its status.
term_wait() {
	kill -TERM "$1" 2>/dev/null
	wait_pid "$1" "${3:-5}" "$2"
}

# ns_stop NS...: every process left in these network namespaces (this test's own), SIGTERM,
# up to 3 s, then SIGKILL. For the benchmarks' cleanup, whose servers run in a second copy.
ns_stop() {
	local ns pids
	for ns in "$@"; do
		pids=$(ip netns pids "$ns" 2>/dev/null)
		# shellcheck disable=SC2086 # a list of PIDs
		[ -z "$pids" ] || kill $pids 2>/dev/null
	done
	for _ in $(seq 30); do
		pids=$(for ns in "$@"; do ip netns pids "$ns" 2>/dev/null; done)
		[ -n "$pids" ] || return 0
		sleep 0.1
	done
	# shellcheck disable=SC2086 # a list of PIDs
	kill -9 $pids 2>/dev/null
	return 0
}

topo_down() {
	local pid
	for pid in "${TOPO_PIDS[@]}"; do
		kill "$pid" 2>/dev/null
	done
	for pid in "${TOPO_PIDS[@]}"; do
		# Give each process a moment, then make sure.
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null # SIGKILLed: reaped at once
	done
	TOPO_PIDS=()
	for ns in "${TOPO_EXTRA_NS[@]}"; do ip netns del "$ns" 2>/dev/null; done
	TOPO_EXTRA_NS=()
	ip netns del "$NS_POD" 2>/dev/null
	ip netns del "$NS_NODE" 2>/dev/null
	[ -n "$TOPO_DIR" ] && rm -rf "$TOPO_DIR"
	TOPO_DIR=""
}

topo_up() {
	if [ "$(id -u)" != 0 ]; then
		echo "topology: needs root (network namespaces)" >&2
		return 1
	fi
	trap 'topo_down' EXIT
	trap 'exit 130' INT TERM
	TOPO_DIR=$(mktemp -d /tmp/ndc-topo.XXXXXX)
	ip netns add "$NS_NODE" || return 1
	ip netns add "$NS_POD" || return 1
	ip link add "ndcp$TOPO_ID" type veth peer name "ndcn$TOPO_ID" || return 1
	ip link set "ndcp$TOPO_ID" netns "$NS_POD"
	ip link set "ndcn$TOPO_ID" netns "$NS_NODE"
	in_node ip link set lo up
	in_node ip addr add "$NODE_LOCAL/32" dev lo
	in_node ip addr add "$UPSTREAM_ADDR/32" dev lo
	in_node ip link set "ndcn$TOPO_ID" name eth-pod
	in_node ip addr add "$NODE_VETH_ADDR/24" dev eth-pod
	in_node ip link set eth-pod up
	in_pod ip link set lo up
	in_pod ip link set "ndcp$TOPO_ID" name eth0
	in_pod ip addr add "$POD_ADDR/24" dev eth0
	in_pod ip link set eth0 up
	in_pod ip route add default via "$NODE_VETH_ADDR"
}

# A second (third, ...) pod, after topo_up: topo_pod_add N sets up netns ndc-pod<N>-$TOPO_ID with
# 169.254.(100+N).2/24 on its eth0, default route via 169.254.(100+N).1 on the node's eth-pod<N>
# (add it to dataplane.interfaces for tc mode). N is 1..99. Call it directly, not in $(...): the
# namespace is remembered for topo_down. Its own subnet: the first pod's 169.254.100.0/24 stays
# the only route through eth-pod.
topo_pod_add() {
	local n=$1 ns="ndc-pod$1-$TOPO_ID" net="169.254.$((100 + $1))"
	ip netns add "$ns" || return 1
	TOPO_EXTRA_NS+=("$ns")
	ip link add "ndcp$n-$TOPO_ID" type veth peer name "ndcn$n-$TOPO_ID" || return 1
	ip link set "ndcp$n-$TOPO_ID" netns "$ns"
	ip link set "ndcn$n-$TOPO_ID" netns "$NS_NODE"
	in_node ip link set "ndcn$n-$TOPO_ID" name "eth-pod$n"
	in_node ip addr add "$net.1/24" dev "eth-pod$n"
	in_node ip link set "eth-pod$n" up
	ip netns exec "$ns" ip link set lo up
	ip netns exec "$ns" ip link set "ndcp$n-$TOPO_ID" name eth0
	ip netns exec "$ns" ip addr add "$net.2/24" dev eth0
	ip netns exec "$ns" ip link set eth0 up
	ip netns exec "$ns" ip route add default via "$net.1"
}

# pod_xdp_pass: an XDP program that passes everything on the pod's eth0. XDP mode needs it: a veth
# delivers the frames its peer sends with XDP_TX only when it has an XDP program itself. Says
# why and returns 1 when it cannot be built or attached.
pod_xdp_pass() {
	cat >"$TOPO_DIR/xdp_pass.c" <<'EOF'
struct xdp_md;
__attribute__((section("xdp"), used)) int xdp_pass(struct xdp_md *ctx)
{
	return 2; /* XDP_PASS */
}
char _license[] __attribute__((section("license"), used)) = "GPL";
EOF
	clang -O2 -target bpf -c "$TOPO_DIR/xdp_pass.c" -o "$TOPO_DIR/xdp_pass.o" &&
		in_pod ip -force link set dev eth0 xdp obj "$TOPO_DIR/xdp_pass.o" sec xdp && return 0
	echo "xdp: cannot attach an XDP pass program to the pod's eth0" >&2
	return 1
}

# Waits until a UDP DNS server answers in the node netns: wait_dns ADDR PORT NAME [SECONDS]
wait_dns() {
	local addr=$1 port=$2 name=$3 secs=${4:-10} i
	for ((i = 0; i < secs * 10; i++)); do
		if in_node dig +time=1 +tries=1 -p "$port" "@$addr" "$name" >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.1
	done
	echo "topology: no DNS answer from $addr port $port after ${secs}s" >&2
	return 1
}

# N TXT records of 200 bytes each at NAME, as unbound local-data lines: answers bigger than
# 512 (4 of them) and than 1232 bytes (8), to exercise truncation and the TCP retry.
txt_rrs() {
	local name=$1 n=$2 i
	for ((i = 0; i < n; i++)); do
		printf "\tlocal-data: '%s 300 IN TXT \"%d%s\"'\n" "$name" "$i" "$(printf 'x%.0s' $(seq 1 199))"
	done
}

# Starts unbound as the upstream (kube-dns stand-in) on $UPSTREAM_ADDR:53 in the node netns,
# authoritative for example.com and example.org from local-data. "." is a static local zone, so
# unbound never recurses: nothing outside these namespaces is ever asked.
# Extra local-data lines may be passed in UNBOUND_EXTRA, extra server: lines (tab-indented, e.g. a
# local-zone and an include) in UNBOUND_EXTRA_CONF.
upstream_up() {
	local conf="$TOPO_DIR/unbound.conf"
	cat >"$conf" <<EOF
server:
	interface: $UPSTREAM_ADDR
	port: 53
	do-daemonize: no
	use-syslog: no
	logfile: ""
	verbosity: 1
	log-queries: yes
	chroot: ""
	username: ""
	directory: "$TOPO_DIR"
	pidfile: ""
	access-control: 169.254.0.0/16 allow
	access-control: 127.0.0.0/8 allow
	num-threads: 1
	do-ip6: no
	local-zone: "." static
	local-zone: "example.com." static
	local-data: "example.com. 300 IN SOA ns.example.com. hostmaster.example.com. 1 3600 600 86400 60"
	local-data: "www.example.com. 300 IN A 192.0.2.10"
	local-data: "www.example.com. 300 IN AAAA 2001:db8::10"
	local-data: "api.example.com. 300 IN A 192.0.2.20"
	local-data: "payments.example.com. 300 IN A 192.0.2.30"
$(txt_rrs mid.example.com 4)
$(txt_rrs big.example.com 8)
	local-zone: "example.org." static
	local-data: "example.org. 300 IN SOA ns.example.org. hostmaster.example.org. 1 3600 600 86400 60"
	local-data: "www.example.org. 120 IN A 198.51.100.7"
$(for rr in "${UNBOUND_EXTRA[@]}"; do printf '\tlocal-data: "%s"\n' "$rr"; done)
${UNBOUND_EXTRA_CONF:-}
EOF
	# Not through in_node: a backgrounded function is a subshell, and $! must be the daemon.
	ip netns exec "$NS_NODE" unbound -d -c "$conf" >"$TOPO_DIR/unbound.log" 2>&1 &
	TOPO_PIDS+=($!)
	wait_dns "$UPSTREAM_ADDR" 53 www.example.com
}

# Another unbound in the node netns, for stub domains and second upstreams:
#   unbound_up NAME ADDR <<EOF
#   local-zone: "acme.local." static
#   local-data: "www.acme.local. 300 IN A 192.0.2.111"
#   EOF
# ADDR (a 169.254.0.0/16 address) is put on the node's lo; its server: lines come from stdin;
# every query it gets is in $TOPO_DIR/unbound-NAME.log ("info: CLIENT NAME. TYPE IN").
unbound_up() {
	local name=$1 addr=$2 conf="$TOPO_DIR/unbound-$1.conf"
	in_node ip addr add "$addr/32" dev lo 2>/dev/null
	{
		cat <<EOF
server:
	interface: $addr
	port: 53
	do-daemonize: no
	use-syslog: no
	logfile: ""
	verbosity: 1
	log-queries: yes
	chroot: ""
	username: ""
	directory: "$TOPO_DIR"
	pidfile: ""
	access-control: 169.254.0.0/16 allow
	access-control: 127.0.0.0/8 allow
	num-threads: 1
	do-ip6: no
	local-zone: "." static
EOF
		sed 's/^/\t/'
	} >"$conf"
	ip netns exec "$NS_NODE" unbound -d -c "$conf" >"$TOPO_DIR/unbound-$name.log" 2>&1 &
	TOPO_PIDS+=($!)
	wait_dns "$addr" 53 .
}

# The start of a test script: need_bin BINARY says it is missing and returns 1 (the caller exits);
# need_bpffs mounts bpffs where it is not (tc and XDP modes pin their maps there).
need_bin() {
	[ -x "$1" ] && return 0
	echo "no binary at $1: build first" >&2
	return 1
}
need_bpffs() {
	mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
}

# The fake API server (tests/fakeapi: HTTPS with a CA made here, a bearer token, the real list and
# watch protocol) in the node netns on 127.0.0.1:$API_PORT, its control port $CTL_PORT (both set
# by the caller: tests running side by side use ports of their own):
#   fakeapi_up SECONDS [fake_apiserver.py args...]
# starts it with the sample cluster and bookmarks every second, and waits at most SECONDS for it
# to listen (else says so with its stderr and returns 1). Sets API_PID. The first call makes the
# certificates ($TOPO_DIR/certs), the token file ($TOPO_DIR/token: FAKEAPI_TOKEN) and the agent's
# $TOPO_DIR/kubeconfig; call it again, once API_PID is stopped, to restart the server.
FAKEAPI_TOKEN=${FAKEAPI_TOKEN:-token-$TOPO_ID}
fakeapi_up() {
	local secs=$1 certs="$TOPO_DIR/certs"
	shift
	if [ ! -s "$TOPO_DIR/kubeconfig" ]; then
		"$TOPO_TESTS/fakeapi/make_certs.sh" "$certs" >/dev/null || return 1
		printf '%s' "$FAKEAPI_TOKEN" >"$TOPO_DIR/token"
		fakeapi_kubeconfig "$TOPO_DIR/kubeconfig" "$certs/ca.pem"
	fi
	# Not through in_node: $! must be the server itself.
	ip netns exec "$NS_NODE" python3 "$TOPO_TESTS/fakeapi/fake_apiserver.py" \
		--cert "$certs/server.pem" --key "$certs/server.key" --token "$FAKEAPI_TOKEN" \
		--objects "$SAMPLE_CLUSTER" --port "$API_PORT" --control-port "$CTL_PORT" \
		--bookmark-interval 1 "$@" >"$TOPO_DIR/fakeapi.out" 2>"$TOPO_DIR/fakeapi.err" &
	API_PID=$!
	TOPO_PIDS+=("$API_PID")
	until_ok "$secs" grep -q "fakeapi listening" "$TOPO_DIR/fakeapi.out" && return 0
	echo "timeout: the fake API server did not listen within ${secs}s" >&2
	cat "$TOPO_DIR/fakeapi.err" >&2
	return 1
}
# fakeapi_kubeconfig FILE CA: a kubeconfig for the fake API server, trusting CA, with the token.
fakeapi_kubeconfig() {
	cat >"$1" <<EOF
apiVersion: v1
kind: Config
current-context: test
contexts:
- name: test
  context: {cluster: fake, user: ndcache}
clusters:
- name: fake
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority: $2
users:
- name: ndcache
  user:
    tokenFile: $TOPO_DIR/token
EOF
}
# fakeapi_ctl JSON: one operation on the fake API server's control port (tests/fakeapi/README.md).
fakeapi_ctl() {
	in_node curl -sf --max-time 5 -X POST --data "$1" "http://127.0.0.1:$CTL_PORT/control" >/dev/null
}

# ndcache_conf FILE SOURCE MODE IFACES [LINE...]: the agent's config: it serves $NODE_LOCAL,
# forwards to $UPSTREAM_ADDR:53, syncs from SOURCE ("kubernetes": the fake API server's
# kubeconfig; else a snapshot file), runs the data plane MODE on IFACES (comma-separated: the
# node's ends of the pods' veths), and each LINE is added as it is (top-level YAML).
ndcache_conf() {
	local file=$1 src=$2 mode=$3 ifaces=$4 line
	shift 4
	if [ "$src" = kubernetes ]; then
		src="kubernetes: {kubeconfig: $TOPO_DIR/kubeconfig}"
	else
		src="snapshot: $src"
	fi
	{
		printf 'listen: [%s]\nupstream: [%s:53]\nsource:\n  %s\n' \
			"$NODE_LOCAL" "$UPSTREAM_ADDR" "$src"
		printf 'dataplane: {mode: %s, interfaces: [%s]}\n' "$mode" "${ifaces//,/, }"
		for line in "$@"; do printf '%s\n' "$line"; done
	} >"$file"
}

# ndcache_start BINARY CONFIG [extra args]: starts the agent in the node netns (its log in
# $TOPO_DIR/ndcache.log), without waiting. Sets NDCACHE_PID.
ndcache_start() {
	local bin=$1 conf=$2
	shift 2
	ip netns exec "$NS_NODE" "$bin" --config "$conf" "$@" >"$TOPO_DIR/ndcache.log" 2>&1 &
	NDCACHE_PID=$!
	TOPO_PIDS+=("$NDCACHE_PID")
}
# ndcache_ready SECONDS: waits at most SECONDS for the agent's /ready to say 200; else says so
# with the tail of its log and returns 1.
ndcache_ready() {
	until_ok "$1" ready_200 && return 0
	echo "timeout: the agent was not ready within ${1}s" >&2
	tail -20 "$TOPO_DIR/ndcache.log" >&2
	return 1
}
ready_200() {
	[ "$(in_node curl -s --max-time 5 -o /dev/null -w '%{http_code}' \
		http://127.0.0.1:9254/ready)" = 200 ]
}
# fastpath_missing MODE: true (and says so) when MODE is tc and the agent logged that the fast path
# could not load here: the caller skips that mode's checks (they are not counted as passed).
fastpath_missing() {
	[ "$1" = tc ] && grep -q "fast path unavailable" "$TOPO_DIR/ndcache.log" || return 1
	echo "tc: the fast path did not load here; skipped"
}

# The agent's /metrics (metrics), or one sample's value (metric NAME, labels included).
metrics() { in_node curl -s --max-time 5 http://127.0.0.1:9254/metrics; }
metric() { metrics | awk -v m="$1" '$1 == m {print $2}'; }

# Starts ndcache in the node netns and waits (10 s) until it answers a cluster name:
# ndcache_up BINARY CONFIG [extra args]
ndcache_up() {
	ndcache_start "$@"
	wait_dns "$NODE_LOCAL" 53 kubernetes.default.svc.cluster.local || {
		cat "$TOPO_DIR/ndcache.log" >&2
		return 1
	}
}
