#!/usr/bin/env bash
# The README's two commands on a fresh minimal Debian 12 machine: debootstrap --variant=minbase
# (plus git and ca-certificates, as in a container or cloud minimal image) into a temporary
# directory, a clone of this repository in it, then, in a chroot, deploy/demo.sh and, with
# --full, tests/run.sh. A package missing from deploy/deps.sh, a "command not found" or a hang
# shows up here first.
#
# The mirror is taken at run time from this machine's own apt sources (/etc/apt/sources.list and
# /etc/apt/sources.list.d/*.list, *.sources: the entries for bookworm, its updates and security
# suites); the same entries become the minimal root's sources. The chroot has /proc, /sys (with a
# bpffs of its own on /sys/fs/bpf, and the host's cgroups), /dev and a private /run; the
# directory is bind-mounted on itself so that `ip netns` and `unshare -m` can change mount
# propagation there. Every mount is undone on exit, failure and Ctrl-C included, and every wait
# is bounded.
#
# The debootstrap download (a --make-tarball of the day) and the .debs apt fetched in the root
# are kept under NDC_MINIMAL_CACHE (default /var/cache/ndcache-minbase; empty: no cache) so that
# later runs skip the downloads; the first run works from nothing.
#
# Usage (root): tests/minimal/run_minimal.sh [--full]
#   --full (or NDC_MINIMAL_FULL=1): also tests/run.sh in the root (about as long as the suite)
#   NDC_MINIMAL_KEEP=1: leave the root in place (unmounted) for a look; its path is printed
# Exits 77 (skipped) when run inside such a root already (tests/run.sh inside the root).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
full=${NDC_MINIMAL_FULL:-0}
for a in "$@"; do
	case "$a" in
	--full) full=1 ;;
	*)
		echo "usage: $0 [--full]" >&2
		exit 2
		;;
	esac
done
if [ -n "${NDC_IN_MINIMAL_ROOT:-}" ]; then
	echo "run_minimal.sh: skipped: already inside a minimal root"
	exit 77
fi
[ "$(id -u)" = 0 ] || {
	echo "run_minimal.sh: needs root (debootstrap, mounts, chroot)" >&2
	exit 1
}
for tool in debootstrap chroot git python3 timeout mount umount findmnt; do
	command -v "$tool" >/dev/null || {
		echo "run_minimal.sh: $tool not found (deploy/deps.sh test installs it)" >&2
		exit 1
	}
done

suite=bookworm
cache=${NDC_MINIMAL_CACHE-/var/cache/ndcache-minbase}
demo_max=${NDC_MINIMAL_DEMO_TIMEOUT:-1800}
suite_max=${NDC_MINIMAL_SUITE_TIMEOUT:-3600}
logs="$root/build-minimal"
mkdir -p "$logs" || exit 1
dir=$(mktemp -d /var/tmp/ndc-minbase.XXXXXX) || exit 1
chmod 755 "$dir" # it becomes /: every user must get through it (_apt, the agent's uid)
made_tmp=""
passed=0 failed=0
ok() {
	passed=$((passed + 1))
	echo "ok   - $1"
}
bad() {
	failed=$((failed + 1))
	echo "FAIL - $1"
	[ -n "${2:-}" ] && printf '%s\n' "$2" | tail -30 | sed 's/^/       /'
	return 0
}
say() { echo "minimal: $*"; }
t_start=$SECONDS
took() { echo "$((SECONDS - $1)) s"; }

# Mounts under $dir, deepest first.
mounts_under() {
	awk -v d="$dir" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r
}
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
	local p i left
	trap '' INT TERM
	# Whatever still runs inside the root (started by this script's chroots) goes first, or
	# its mounts stay busy.
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/root" 2>/dev/null)" = "$dir" ] && kill -9 "${p#/proc/}" 2>/dev/null
	done
	for ((i = 0; i < 50; i++)); do
		left=$(mounts_under)
		[ -z "$left" ] && break
		while IFS= read -r p; do
			umount "$p" 2>/dev/null
		done <<<"$left"
		sleep 0.1
	done
	left=$(mounts_under)
	if [ -n "$left" ]; then
		# Lazy as a last resort: detached now, freed once the last user goes.
		while IFS= read -r p; do umount -l "$p" 2>/dev/null; done <<<"$left"
		left=$(mounts_under)
	fi
	if [ -n "$left" ]; then
		echo "run_minimal.sh: could not unmount: $left; $dir left in place" >&2
	elif [ "${NDC_MINIMAL_KEEP:-0}" = 1 ]; then
		echo "run_minimal.sh: root kept (unmounted) in $dir"
	else
		rm -rf --one-file-system "$dir"
	fi
	[ -n "$made_tmp" ] && rm -rf --one-file-system "$made_tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- The mirror and the sources, from this machine's apt configuration ---
sources=$(python3 - "$suite" <<'PY'
import glob, re, sys
codename = sys.argv[1]
entries = []  # (uri, suite, components, signed_by)

def wanted(suite):
    return suite == codename or suite.startswith(codename + "-")

for f in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    for stanza in re.split(r"\n\s*\n", open(f).read()):
        fields, key = {}, None
        for line in stanza.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            if line[0] in " \t" and key:
                fields[key] += " " + line.strip()
                continue
            key, _, value = line.partition(":")
            key = key.strip().lower()
            fields[key] = value.strip()
        if "deb" not in fields.get("types", "").split():
            continue
        if fields.get("enabled", "yes").lower() == "no":
            continue
        for uri in fields.get("uris", "").split():
            for suite in fields.get("suites", "").split():
                if wanted(suite):
                    entries.append((uri, suite, fields.get("components", "main"),
                                    fields.get("signed-by", "")))
for f in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")):
    try:
        lines = open(f).read().splitlines()
    except OSError:
        continue
    for line in lines:
        line = line.split("#", 1)[0].strip()
        m = re.match(r"deb\s+(\[([^\]]*)\]\s+)?(\S+)\s+(\S+)\s*(.*)", line)
        if not m or not wanted(m.group(4)):
            continue
        signed = re.search(r"signed-by=(\S+)", m.group(2) or "")
        entries.append((m.group(3), m.group(4), m.group(5) or "main",
                        signed.group(1) if signed else ""))
for uri, suite, comps, signed in entries:
    opt = f"[signed-by={signed}] " if signed.startswith("/") else ""
    print(f"deb {opt}{uri} {suite} {comps}")
PY
)
mirror=$(awk -v s="$suite" '{ sub(/\[[^]]*\] /, "") } $3 == s { print $2; exit }' <<<"$sources")
if [ -z "$mirror" ]; then
	echo "run_minimal.sh: no '$suite' entry in /etc/apt/sources.list or sources.list.d/" >&2
	exit 1
fi
say "Debian $suite from this machine's apt sources ($(wc -l <<<"$sources") entries)"

# --- debootstrap, from the day's tarball when there is one ---
t_bs=$SECONDS
bs=(debootstrap --variant=minbase --include=git,ca-certificates)
tarball=""
if [ -n "$cache" ] && mkdir -p "$cache" 2>/dev/null; then
	tarball="$cache/minbase-$suite-$(date +%F).tar"
	# Older days' tarballs and .debs not used for 30 days go.
	find "$cache" -maxdepth 1 -name "minbase-$suite-*.tar" ! -path "$tarball" -delete
	mkdir -p "$cache/archives"
	find "$cache/archives" -name '*.deb' -atime +30 -delete
	if [ ! -s "$tarball" ]; then
		say "debootstrap: downloading the minbase packages (kept in $tarball)"
		made_tmp=$(mktemp -d /var/tmp/ndc-minbase-dl.XXXXXX)
		if timeout 1200 "${bs[@]}" --make-tarball="$tarball.part" "$suite" "$made_tmp" "$mirror" \
			>"$logs/debootstrap-download.log" 2>&1; then
			mv "$tarball.part" "$tarball"
		else
			rm -f "$tarball.part"
			tail -20 "$logs/debootstrap-download.log" >&2
			say "debootstrap --make-tarball failed or timed out (1200 s); installing without it"
		fi
		rm -rf --one-file-system "$made_tmp"
		made_tmp=""
	fi
	[ -s "$tarball" ] || tarball=""
fi
say "debootstrap --variant=minbase --include=git,ca-certificates $suite into $dir"
if [ -n "$tarball" ]; then
	bs+=(--unpack-tarball="$tarball")
fi
if ! timeout 1200 "${bs[@]}" "$suite" "$dir" "$mirror" >"$logs/debootstrap.log" 2>&1; then
	tail -20 "$logs/debootstrap.log" >&2
	echo "run_minimal.sh: debootstrap failed or timed out (1200 s); log: $logs/debootstrap.log" >&2
	exit 1
fi
t_debootstrap=$(took $t_bs)
say "debootstrap: $t_debootstrap ($(chroot "$dir" dpkg-query -W | wc -l) packages)"

# The machine's sources, name resolution and any apt proxy setting; the cached .debs.
printf '%s\n' "$sources" >"$dir/etc/apt/sources.list"
cp -L /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null
for f in /etc/apt/apt.conf.d/*; do
	grep -qi 'proxy' "$f" 2>/dev/null && cp "$f" "$dir/etc/apt/apt.conf.d/"
done
if [ -n "$cache" ] && [ -d "$cache/archives" ]; then
	cp -l "$cache/archives/"*.deb "$dir/var/cache/apt/archives/" 2>/dev/null ||
		cp "$cache/archives/"*.deb "$dir/var/cache/apt/archives/" 2>/dev/null
fi

# --- The repository: a clone of this one's checked-out commit ---
git clone -q --no-hardlinks "$root" "$dir/root/ndcache" || {
	echo "run_minimal.sh: git clone $root failed" >&2
	exit 1
}
say "clone of $(git -C "$dir/root/ndcache" log -1 --format='%h %s' | cut -c1-80)"
[ -z "$(git -C "$root" status --porcelain --untracked-files=no)" ] ||
	say "note: uncommitted changes in $root are not in the clone"

# --- Mounts ---
mount --bind "$dir" "$dir" &&
	mount --make-private "$dir" &&
	mount -t proc proc "$dir/proc" &&
	mount --bind /sys "$dir/sys" &&
	mount -t bpf bpf "$dir/sys/fs/bpf" &&
	# A booted machine has its cgroups mounted (systemd does it): podman needs them for the
	# image tests. Read from the host's, as /sys is.
	{ ! mountpoint -q /sys/fs/cgroup || { mount --rbind /sys/fs/cgroup "$dir/sys/fs/cgroup" &&
		mount --make-rslave "$dir/sys/fs/cgroup"; }; } &&
	mount --rbind /dev "$dir/dev" &&
	mount --make-rslave "$dir/dev" &&
	mount -t tmpfs -o mode=755 tmpfs "$dir/run" || {
	echo "run_minimal.sh: mounting /proc, /sys, bpffs, /dev or /run in $dir failed" >&2
	exit 1
}

# in_root SECONDS LOG CMD: runs CMD (a bash command line) in the root with a clean environment,
# bounded, its output shown and kept in LOG; returns its status (124: timed out).
in_root() {
	local secs=$1 log=$2 rc
	shift 2
	timeout -k 30 "$secs" chroot "$dir" /usr/bin/env -i HOME=/root TERM=dumb \
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		NDC_IN_MINIMAL_ROOT=1 CI="${CI:-}" ${NDC_JOBS:+NDC_JOBS=$NDC_JOBS} \
		bash -c "cd /root/ndcache && $*" </dev/null 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	[ "$rc" = 124 ] && echo "run_minimal.sh: timeout: '$*' in the minimal root after $secs s"
	return "$rc"
}
# no_cnf NAME LOG: the log has no "command not found"
no_cnf() {
	if grep -q "command not found" "$2"; then
		bad "$1: \"command not found\" in its output" "$(grep "command not found" "$2")"
	else
		ok "$1: no \"command not found\""
	fi
}

# --- The first command ---
echo "minimal: ---------------- deploy/demo.sh in the minimal root ----------------"
t0=$SECONDS
in_root "$demo_max" "$logs/demo.log" deploy/demo.sh
rc=$?
t_demo=$(took $t0)
echo "minimal: ---------------- end of deploy/demo.sh ($t_demo, exit $rc) ----------------"
verdict=$(grep -E '^demo: [0-9]+ of [0-9]+ answers as expected' "$logs/demo.log" | tail -1)
if [ "$rc" = 0 ] && [[ $verdict =~ ^demo:\ ([0-9]+)\ of\ ([0-9]+)\  ]] &&
	[ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ]; then
	ok "deploy/demo.sh: exit 0, '$verdict' ($t_demo)"
else
	bad "deploy/demo.sh: exit $rc, verdict '${verdict:-none}'" "$(tail -30 "$logs/demo.log")"
fi
no_cnf deploy/demo.sh "$logs/demo.log"

# deps.sh masked the daemons it installed: no unit of unbound wanted by any target, each masked.
units=$(chroot "$dir" dpkg-query -L unbound 2>/dev/null |
	sed -n -E 's#^/(usr/)?lib/systemd/system/([^/]+\.service)$#\2#p')
enabled="" unmasked=""
for u in $units; do
	[ -n "$(find "$dir/etc/systemd/system" -path "*.wants/$u" 2>/dev/null)" ] && enabled+=" $u"
	[ "$(readlink "$dir/etc/systemd/system/$u")" = /dev/null ] || unmasked+=" $u"
done
if [ -z "$units" ]; then
	bad "unbound's units: none found in the root (was unbound installed?)"
elif [ -z "$enabled$unmasked" ]; then
	ok "deploy/deps.sh left unbound's units off: $(echo $units)"
else
	bad "deploy/deps.sh: enabled:${enabled:- none}; not masked:${unmasked:- none}"
fi

# --- The second command ---
if [ "$full" = 1 ]; then
	echo "minimal: ---------------- tests/run.sh in the minimal root ----------------"
	t0=$SECONDS
	in_root "$suite_max" "$logs/run.log" tests/run.sh
	rc=$?
	t_suite=$(took $t0)
	echo "minimal: ---------------- end of tests/run.sh ($t_suite, exit $rc) ----------------"
	last=$(grep -E '^tests/run.sh: [0-9]+ passed, [0-9]+ failed' "$logs/run.log" | tail -1)
	if [ "$rc" = 0 ] && [[ $last =~ ^tests/run.sh:\ [0-9]+\ passed,\ 0\ failed ]]; then
		ok "tests/run.sh: exit 0, '$last' ($t_suite)"
	else
		bad "tests/run.sh: exit $rc, '${last:-no closing line}'" "$(tail -30 "$logs/run.log")"
	fi
	no_cnf tests/run.sh "$logs/run.log"
else
	echo "minimal: tests/run.sh in the root: not run (--full or NDC_MINIMAL_FULL=1 runs it)"
fi

# Keep what apt downloaded for the next run.
if [ -n "$cache" ] && [ -d "$cache/archives" ]; then
	cp -n "$dir/var/cache/apt/archives/"*.deb "$cache/archives/" 2>/dev/null
fi
say "timings: debootstrap $t_debootstrap, demo $t_demo${t_suite:+, suite $t_suite}," \
	"total $(took $t_start); logs in $logs"
echo "run_minimal.sh: $passed passed, $failed failed"
[ "$failed" = 0 ]
