#!/usr/bin/env bash
# Builds the ndcache container image with podman, from nothing but Debian packages: a Debian 12
# base root filesystem made here with debootstrap (no registry), imported into podman, then
# deploy/kubernetes/Dockerfile built on it. Tags ndcache:<version of meson.build>, the name the
# DaemonSet in deploy/kubernetes/ndcache.yaml runs.
#
# Usage (root): deploy/image.sh [--new-base] [--no-cache]
#   --new-base   make the base again even if it exists (security updates: the base is only as
#                new as the day it was made; the build stages also run apt-get upgrade-free
#                installs from the same mirror, so rebuild the base to refresh it)
#   --no-cache   build every Dockerfile step again (podman build --no-cache)
#
# The mirror is the one this machine's apt uses, read at run time from /etc/apt/sources.list and
# /etc/apt/sources.list.d/*.{list,sources} (the bookworm suite; bookworm-updates and
# bookworm-security too when listed), with the apt settings it is reached with (proxy, release
# date checks): nothing about the mirror is written into the repository. The base gets those
# sources, so apt inside the build has the same mirror; podman build runs with the host's network.
#
# Elsewhere, with a registry: docker build -f deploy/kubernetes/Dockerfile . takes the Dockerfile's
# default base (BASE=debian:12); this script only replaces it with the local one (--build-arg).
set -eu -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
new_base=0
cache=()
for a in "$@"; do
	case "$a" in
	--new-base) new_base=1 ;;
	--no-cache) cache=(--no-cache) ;;
	-h | --help)
		sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "image.sh: unknown argument '$a' (--new-base, --no-cache)" >&2
		exit 2
		;;
	esac
done
[ "$(id -u)" = 0 ] || {
	echo "image.sh: needs root (debootstrap, podman's image store)" >&2
	exit 1
}

suite=bookworm
base=localhost/ndcache-debian:12
version=$(sed -n "s/^ *version *: *'\([^']*\)'.*/\1/p" "$root/meson.build" | head -1)
[ -n "$version" ] || {
	echo "image.sh: no version in meson.build" >&2
	exit 1
}
image=localhost/ndcache:$version

# -- packages this script needs ------------------------------------------------------------------
# runc: for hosts where crun cannot run (deploy/podman-probe.sh).
need=(podman runc debootstrap debian-archive-keyring)
missing=()
for p in "${need[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "image.sh: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# -- the machine's mirror ------------------------------------------------------------------------
# Prints "URI SUITE COMPONENTS..." for each deb source of this machine, one-line and deb822 files.
apt_sources() {
	local f
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		# deb [options] uri suite components...
		sed -n 's/#.*//; s/\[[^]]*\]//; s/^[[:space:]]*deb[[:space:]]\+//p' "$f"
	done
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		# deb822 stanzas: Types, URIs, Suites, Components (Enabled: no skips the stanza).
		awk '
			function flush() {
				if (types ~ /(^|[ \t])deb([ \t]|$)/ && enabled != "no")
					for (i = 1; i <= nu; i++) for (j = 1; j <= ns; j++)
						print u[i], s[j], comps
				types = ""; enabled = ""; comps = ""; nu = 0; ns = 0
			}
			/^[ \t]*#/ { next }
			/^[ \t]*$/ { flush(); next }
			{ key = tolower($1); sub(/:$/, "", key); $1 = ""; sub(/^[ \t]+/, "") }
			key == "types" { types = $0 }
			key == "enabled" { enabled = tolower($0) }
			key == "uris" { nu = split($0, u, /[ \t]+/) }
			key == "suites" { ns = split($0, s, /[ \t]+/) }
			key == "components" { comps = $0 }
			END { flush() }
		' "$f"
	done
}
sources=$(apt_sources | awk -v s="$suite" '$2 == s || $2 == s "-updates" || $2 == s "-security"')
mirror=$(echo "$sources" | awk -v s="$suite" '$2 == s { print $1; exit }')
if [ -z "$mirror" ]; then
	echo "image.sh: no '$suite' suite in this machine's apt sources (/etc/apt/sources.list," \
		"/etc/apt/sources.list.d/): debootstrap needs a Debian 12 mirror" >&2
	exit 1
fi

# The apt settings this machine reaches its mirror with; the base's apt needs the same.
apt_conf=$(apt-config dump | grep -E '^Acquire::(https?::Proxy|Check-Valid-Until|Check-Date) ' ||
	true)

# -- the base: debootstrap, then podman import ---------------------------------------------------
if [ $new_base = 1 ] || ! podman image exists "$base"; then
	rootfs=$(mktemp -d /var/tmp/ndcache-rootfs.XXXXXX)
	trap 'rm -rf "$rootfs"' EXIT
	echo "image.sh: debootstrap $suite (minbase) from the machine's mirror"
	t0=$SECONDS
	# minbase: essential packages and apt, what the debian:12 registry image holds too.
	if ! debootstrap --variant=minbase --components=main "$suite" "$rootfs" "$mirror" \
		>"$rootfs.log" 2>&1; then
		tail -20 "$rootfs.log" >&2
		echo "image.sh: debootstrap failed (full log: $rootfs.log)" >&2
		exit 1
	fi
	rm -f "$rootfs.log"
	echo "$sources" | awk '{ printf "deb %s", $1; for (i = 2; i <= NF; i++) printf " %s", $i; print "" }' \
		>"$rootfs/etc/apt/sources.list"
	if [ -n "$apt_conf" ]; then
		echo "$apt_conf" >"$rootfs/etc/apt/apt.conf.d/90ndcache-host"
	fi
	# As the registry's debian images do: no .deb kept after install, no package lists shipped.
	cat >"$rootfs/etc/apt/apt.conf.d/91ndcache-clean" <<-'EOF'
		DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };
		APT::Install-Recommends "false";
	EOF
	rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/archives/*.deb \
		"$rootfs"/var/cache/apt/*.bin "$rootfs"/var/log/*.log "$rootfs"/tmp/*
	tar -C "$rootfs" --numeric-owner --xattrs -c . |
		podman import \
			--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
			--change 'CMD ["/bin/bash"]' \
			--message "debootstrap --variant=minbase $suite" - "$base" >/dev/null
	rm -rf "$rootfs"
	trap - EXIT
	echo "image.sh: base $base made in $((SECONDS - t0)) s"
else
	echo "image.sh: base $base exists (made $(podman image inspect -f '{{.Created}}' "$base"));" \
		"--new-base to make it again"
fi

# -- the image -----------------------------------------------------------------------------------
. "$root/deploy/podman-probe.sh"
ndc_podman_probe "$base"
echo "image.sh: podman build $image"
t0=$SECONDS
# --pull=never: the base is local, nothing may come from a registry. --network host: apt in the
# build stages reaches the mirror as this machine does. The ignore file keeps build trees and git
# metadata out of the context (podman does not look for Dockerfile.dockerignore by itself).
podman "${PODMAN_GLOBAL[@]}" build "${PODMAN_LIMITS[@]}" --pull=never --network host "${cache[@]}" \
	--build-arg BASE="$base" \
	--ignorefile "$root/deploy/kubernetes/Dockerfile.dockerignore" \
	-f "$root/deploy/kubernetes/Dockerfile" -t "$image" "$root"
echo "image.sh: built $image in $((SECONDS - t0)) s," \
	"$(podman image inspect -f '{{.Size}}' "$image" | awk '{ printf "%.0f MB", $1 / 1e6 }')"
