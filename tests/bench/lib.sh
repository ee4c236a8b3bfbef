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

is_uint() { [[ $1 =~ ^[0-9]+$ ]] && [ "$1" -gt 0 ]; }

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
