#!/usr/bin/env bash
# Installs the Debian 12 packages ndcache needs to build, test and benchmark, when missing.
# Usage: deploy/deps.sh [build|test|bench]   (default: test; each level includes the previous)
set -eu
level=${1:-test}

build_pkgs=(meson ninja-build pkg-config gcc python3 libyaml-dev libjson-c-dev libcurl4-openssl-dev
	clang libbpf-dev bpftool linux-libc-dev)
test_pkgs=(libcmocka-dev libknot-dev clang-format libclang-rt-14-dev iproute2 unbound dnsutils
	knot-dnsutils curl openssl python3-yaml libcap2-bin dpdk-dev libdpdk-dev ethtool iptables
	iputils-ping)
bench_pkgs=(dnsperf knot knot-resolver gnuplot-nox procps iperf3)

pkgs=("${build_pkgs[@]}")
case "$level" in
build) ;;
test) pkgs+=("${test_pkgs[@]}") ;;
bench) pkgs+=("${test_pkgs[@]}" "${bench_pkgs[@]}") ;;
*)
	echo "deps.sh: unknown level '$level' (build, test or bench)" >&2
	exit 2
	;;
esac

missing=()
for p in "${pkgs[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ]; then
	echo "deps.sh: missing packages: ${missing[*]}; run as root (or: sudo $0 $level)" >&2
	exit 1
fi
echo "deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Packaged daemons (unbound, knot, kresd) must not start as system services: the tests and
# benchmarks start their own copies inside network namespaces.
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' >"$policy"
	chmod +x "$policy"
	made_policy=1
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
[ $made_policy = 1 ] && rm -f "$policy"
exit 0
