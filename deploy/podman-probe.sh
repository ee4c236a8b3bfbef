# Sourced by deploy/image.sh and tests/deploy/test_image.sh: finds how podman can run a container
# on this machine, by trying it, and leaves the answer in two arrays:
#   PODMAN_GLOBAL  options before the podman command (--runtime)
#   PODMAN_LIMITS  options of `podman run` and `podman build` (--ulimit)
# Usage: . deploy/podman-probe.sh; ndc_podman_probe IMAGE || exit 1
#
# On a stock Debian 12 machine the defaults work and both arrays stay empty. Two things seen on
# other machines each need a change, and the probe says which it used:
# - crun refuses cgroup v1 hosts whose cgroup2 hierarchy has controllers ("cgroups in hybrid mode
#   not supported"); runc (Debian package runc) runs there.
# - root without CAP_SYS_RESOURCE (a sandbox that drops it) cannot raise limits, and podman asks
#   the runtime for its defaults (nofile 1048576): the limits of this shell are passed instead,
#   nproc capped at kernel.pid_max, which podman caps its own at.

ndc_podman_probe() {
	local image=$1 nproc pidmax err
	local -a limits
	nproc=$(ulimit -Hu)
	pidmax=$(cat /proc/sys/kernel/pid_max)
	[ "$nproc" = unlimited ] || [ "$nproc" -gt "$pidmax" ] && nproc=$pidmax
	limits=(--ulimit "nofile=$(ulimit -Sn):$(ulimit -Hn)" --ulimit "nproc=$nproc:$nproc")
	err=$(mktemp)
	PODMAN_GLOBAL=()
	PODMAN_LIMITS=()
	for try in default limits runc+limits runc; do
		case $try in
		default) PODMAN_GLOBAL=() PODMAN_LIMITS=() ;;
		limits) PODMAN_GLOBAL=() PODMAN_LIMITS=("${limits[@]}") ;;
		runc+limits) PODMAN_GLOBAL=(--runtime runc) PODMAN_LIMITS=("${limits[@]}") ;;
		runc) PODMAN_GLOBAL=(--runtime runc) PODMAN_LIMITS=() ;;
		esac
		if [ "${PODMAN_GLOBAL[0]:-}" = --runtime ] && ! command -v runc >/dev/null; then
			continue
		fi
		if timeout 60 podman "${PODMAN_GLOBAL[@]}" run --rm --network none \
			"${PODMAN_LIMITS[@]}" --user 0 --entrypoint /bin/true "$image" 2>>"$err"; then
			[ $try = default ] ||
				echo "podman-probe: using $try: the defaults fail here: $(head -1 "$err")"
			rm -f "$err"
			return 0
		fi
	done
	echo "podman-probe: no way to run a container found; podman said:" >&2
	sed 's/^/  /' "$err" >&2
	rm -f "$err"
	return 1
}
