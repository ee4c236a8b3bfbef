#!/usr/bin/env bash
# Shared by the benchmark scripts (sourced right after they set $here and $root): help and
# errors in the scripts' own words, argument checks, and the unbound server they compare with.
# Each script names itself in BENCH_NAME before sourcing.

# The script's header comment, from line 2 down to "set -u", is its help.
usage() {
	sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'
	exit "${1:-2}"
}

die() {
	echo "$BENCH_NAME: $*" >&2
	exit 1
}

# is_uint0 N: N is a decimal integer (0 too); is_uint N: one above 0
is_uint0() { [[ $1 =~ ^[0-9]{1,18}$ ]]; }
is_uint() { is_uint0 "$1" && [ "$1" -gt 0 ]; }

# bench_unbound_conf FILE WORKDIR CLUSTERDIR [SERVER_LINES [TAIL]]: unbound on
# $NODE_LOCAL:53, one thread, IPv4, answering the cluster's local-data (CLUSTERDIR/
# unbound-local.conf from gen_cluster.py) and nothing else. SERVER_LINES (tab-indented server:
# options) go in before the zones; TAIL (whole clauses, e.g. a forward-zone) at the end.
bench_unbound_conf() {
	{
		printf 'server:\n'
		printf '\t%s\n' "interface: $NODE_LOCAL" 'port: 53' 'do-daemonize: no' \
			'use-syslog: no' 'logfile: ""' 'verbosity: 0' 'chroot: ""' 'username: ""' \
			"directory: \"$2\"" 'pidfile: ""' 'access-control: 169.254.0.0/16 allow' \
			'num-threads: 1' 'do-ip6: no'
		[ -z "${4:-}" ] || printf '%s\n' "$4"
		printf '\t%s\n' 'local-zone: "." static' 'local-zone: "cluster.local." static' \
			"include: \"$3/unbound-local.conf\""
		[ -z "${5:-}" ] || printf '%s\n' "$5"
	} >"$1"
}

# bench_build BUILD OUT TARGET...: BUILD set up if missing (release, BPF on), the targets built
# (log in OUT/build.log), bpffs mounted.
bench_build() {
	local build=$1 out=$2
	shift 2
	if [ ! -f "$build/build.ninja" ]; then
		meson setup "$build" --buildtype=release -Dbpf=enabled >/dev/null ||
			die "meson setup $build --buildtype=release -Dbpf=enabled failed"
	fi
	mkdir -p "$out" || die "cannot create $out"
	ninja -C "$build" "$@" >"$out/build.log" 2>&1 || {
		tail -20 "$out/build.log" >&2
		die "build failed (log: $out/build.log)"
	}
	mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf || die "cannot mount bpffs"
}

# bench_detach IFACE...: XDP off the pod's eth0, XDP and clsact off the node's IFACEs. The
# programs go with the veths when the namespaces are deleted; detached first anyway, so that
# nothing depends on who else may hold the namespaces open.
bench_detach() {
	local i
	ip netns exec "$NS_POD" ip link set dev eth0 xdp off 2>/dev/null
	for i in "$@"; do
		ip netns exec "$NS_NODE" ip link set dev "$i" xdp off 2>/dev/null
		ip netns exec "$NS_NODE" tc qdisc del dev "$i" clsact 2>/dev/null
	done
}

# bench_relaunch VAR SCRIPT [ARG...], in the first copy of a benchmark, after sourcing
# tests/integration/lib.sh and defining cleanup (which stops MAIN_PID, the namespaces' processes
# and the topology): makes the topology, arms cleanup on every exit, runs the caller's
# bench_setup if it defined one, then SCRIPT again with VAR=TOPO_ID:TOPO_DIR in its environment
# (the copy that measures), waits for it (at most NDC_BENCH_MAX_S, default 14400 s) and exits
# with its status. The copy runs in the background so that this shell, waiting in the wait
# builtin, acts on Ctrl-C at once.
bench_relaunch() {
	local var=$1 rc
	shift
	topo_up
	rc=$?
	trap cleanup EXIT
	trap 'exit 130' INT TERM
	[ $rc = 0 ] || die "could not create the network namespaces"
	if declare -F bench_setup >/dev/null; then
		bench_setup || exit 1
	fi
	env "$var=$TOPO_ID:$TOPO_DIR" "$BASH" "$@" &
	MAIN_PID=$!
	wait_pid "$MAIN_PID" "${NDC_BENCH_MAX_S:-14400}" \
		"the measurements (limit NDC_BENCH_MAX_S, default 14400 s)"
	rc=$?
	MAIN_PID=""
	exit $rc
}

# bench_mem PID: "RSS_KB HWM_KB MAP_BYTES MAPS" of a running process: VmRSS and VmHWM (peak RSS)
# from /proc/PID/status, and the BPF maps it holds open, each counted once (by map_id) with its
# memlock from /proc/PID/fdinfo: the kernel memory the maps take, charged to the pod whether or
# not it is mapped (RSS counts only the pages of mmapped maps the process has touched).
bench_mem() {
	local pid=$1 mem
	[ -r "/proc/$pid/status" ] || return 1
	mem=$(awk '$1 == "VmRSS:" { r = $2 } $1 == "VmHWM:" { h = $2 } END { print r + 0, h + 0 }' \
		"/proc/$pid/status") || return 1
	# Unreadable or closing fds are skipped: only maps count, and a fd's lines stay together.
	echo "$mem $(awk '$1 == "memlock:" { m[FILENAME] = $2 } $1 == "map_id:" { id[FILENAME] = $2 }
		END { for (f in id) if (!(id[f] in seen)) { seen[id[f]] = 1; b += m[f]; n++ }
		      print b + 0, n + 0 }' "/proc/$pid"/fdinfo/* 2>/dev/null)"
}

# bench_mem_line PID: bench_mem as one line for people: "RSS 12.3 MB (peak 14.0 MB), BPF maps
# 126.0 MB in 9 maps".
bench_mem_line() {
	local r
	r=$(bench_mem "$1") || return 1
	awk '{ printf "RSS %.1f MB (peak %.1f MB), BPF maps %.1f MB in %d maps\n",
		$1 / 1024, $2 / 1024, $3 / 1048576, $4 }' <<<"$r"
}
