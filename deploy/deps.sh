#!/usr/bin/env bash
# Installs the Debian 12 packages ndcache needs to build, test and benchmark, when missing.
# Packaged daemons it installs (unbound, knot, kresd, iperf3, dnsdist, pdns-recursor) are masked
# right away: the tests and benchmarks start their own copies inside network namespaces, and
# nothing here should run a resolver at the next boot or rewrite /etc/resolv.conf
# (unbound-resolvconf).
# Usage: deploy/deps.sh [build|test|bench]   (default: test; each level includes the previous)
#        deploy/deps.sh --list [LEVEL]        the packages of LEVEL, one a line (nothing installed)
set -eu

# libfstrm-dev, libprotobuf-c-dev, protobuf-c-compiler: the dnstap writer (control/dnstap/;
# optional to meson: a build without them compiles it out).
build_pkgs=(meson ninja-build pkg-config gcc python3 libyaml-dev libjson-c-dev libcurl4-openssl-dev
	clang libbpf-dev bpftool linux-libc-dev libfstrm-dev libprotobuf-c-dev protobuf-c-compiler)
# procps: pgrep, ps, sysctl; debootstrap: the minimal-root check (tests/minimal/); knot (knotd)
# and python3-dnspython: the reference comparison (tests/integration/test_reference.sh);
# fstrm-bin and dnstap-ldns: Debian's dnstap reader (tests/integration/test_dnstap_writer.sh);
# dnsperf: the agent's rate with and without dnstap (tests/integration/test_dnstap.sh).
test_pkgs=(libcmocka-dev libknot-dev clang-format libclang-rt-14-dev iproute2 unbound bind9-dnsutils
	knot-dnsutils curl openssl python3-yaml libcap2-bin procps debootstrap iptables nftables
	dpdk-dev libdpdk-dev ethtool iputils-ping knot python3-dnspython fstrm-bin dnstap-ldns dnsperf)
bench_pkgs=(dnsperf knot-resolver gnuplot-nox iperf3 dnsdist pdns-recursor)
# Packages that ship system services; which of their units to mask is read from the package.
daemon_pkgs=(unbound knot knot-resolver iperf3 dnsdist pdns-recursor)

list=0
if [ "${1:-}" = --list ]; then
	list=1
	shift
fi
level=${1:-test}

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
if [ $list = 1 ]; then
	printf '%s\n' "${pkgs[@]}"
	exit 0
fi

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

missing=()
for p in "${pkgs[@]}"; do
	installed "$p" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ]; then
	echo "deps.sh: missing packages: ${missing[*]}; run as root (or: sudo $0 $level)" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# Packaged daemons must not even start once during the install: policy-rc.d refuses every start.
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' >"$policy"
	chmod +x "$policy"
	made_policy=1
fi
trap '[ $made_policy = 1 ] && rm -f "$policy"' EXIT

# apt's own progress (APT::Status-Fd), one line per phase and per tenth of it, instead of its
# hundreds of lines or, with -qq, nothing for a minute.
progress() {
	awk -F: '
		$1 == "dlstatus" || $1 == "pmstatus" {
			phase = $1 == "dlstatus" ? "downloading" : "installing"
			step = int($3 / 10) * 10
			if (phase != last || step > shown) {
				printf "deps.sh: %s %d%%\n", phase, step
				fflush()
				last = phase
				shown = step
			}
		}'
}
echo "deps.sh: apt-get update"
apt-get update -qq || {
	echo "deps.sh: apt-get update failed" >&2
	exit 1
}
echo "deps.sh: installing ${#missing[@]} packages: ${missing[*]}"
log=$(mktemp /tmp/ndc-deps.XXXXXX)
set +e
apt-get install -y -qq --no-install-recommends -o APT::Status-Fd=3 "${missing[@]}" \
	3>&1 >"$log" 2>&1 | progress
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" != 0 ]; then
	tail -20 "$log" >&2
	echo "deps.sh: apt-get install failed (exit $rc, log above)" >&2
	rm -f "$log"
	exit 1
fi
rm -f "$log"
echo "deps.sh: installed ${#missing[@]} packages"

# Mask every system unit of the daemon packages installed just now (deb-systemd-helper keeps
# the state, so upgrades leave them masked; without it, the symlinks systemctl mask would make).
units=()
for p in "${missing[@]}"; do
	[[ " ${daemon_pkgs[*]} " == *" $p "* ]] || continue
	while IFS= read -r u; do
		units+=("$u")
	done < <(dpkg-query -L "$p" | sed -n -E 's#^/(usr/)?lib/systemd/system/([^/]+\.(service|socket|timer|target))$#\2#p')
done
if [ ${#units[@]} -gt 0 ]; then
	for u in "${units[@]}"; do
		if command -v deb-systemd-helper >/dev/null; then
			deb-systemd-helper disable "$u" >/dev/null 2>&1 || true
			deb-systemd-helper mask "$u" >/dev/null 2>&1 || true
		fi
		mkdir -p /etc/systemd/system
		find /etc/systemd/system -path "*.wants/$u" -type l -delete 2>/dev/null || true
		[ -e "/etc/systemd/system/$u" ] || ln -s /dev/null "/etc/systemd/system/$u"
	done
	echo "deps.sh: masked ${units[*]}: packaged daemons stay off (the tests start their own;" \
		"systemctl unmask UNIT to use one)"
fi
exit 0
