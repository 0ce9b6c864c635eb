# Sourced by scripts that need a Docker engine: start_dockerd uses the one
# at DOCKER_HOST when it answers, else starts a private dockerd (no bridge
# network, no iptables, a user namespace for containers: root in a sandbox
# is not root of the host) on a socket under $work and exports DOCKER_HOST;
# stop_dockerd stops only an engine start_dockerd started, by its PID.
# start_isolated_dockerd starts a second engine that shares none of the
# server's files, reached over a unix socket ($isolated_unix) and over TCP
# on loopback ($isolated_tcp); stop_isolated_dockerd stops it by its PID.
# Both engines register gVisor's runsc as the runtime "runsc"
# (write_engine_config), which servers choose by default (--runtime auto).
#
# Needs: $work (a short private directory: it holds a unix socket); the
# repository
# root as the working directory (scripts/tools.sh).

dockerd_pid=""

docker_answers() {
	timeout 20 docker version --format '{{.Server.Version}}' >/dev/null 2>&1
}

# runsc_binary prints the path of gVisor's runsc: the pinned build from the
# Go module proxy (scripts/tools.sh), else Debian's package (a 2022
# release, ptrace platform only), else nothing, with a warning.
runsc_binary() {
	if scripts/tools.sh runsc 2>"$work/runsc-build.log"; then
		return 0
	fi
	printf '==> building runsc failed (%s): trying Debian'"'"'s runsc package\n' "$(tail -1 "$work/runsc-build.log")" >&2
	if scripts/install-packages.sh runsc >&2 && command -v runsc; then
		return 0
	fi
	echo "==> WARNING: no gVisor runtime: the engine's containers share the host's kernel" >&2
}

# write_engine_config FILE RUNSC writes a daemon.json for dockerd
# --config-file that registers RUNSC (when given) as the runtime "runsc".
# --network=none: runsc cannot join Docker's none network on this kernel;
# --overlay2=none: otherwise a container's writes stay in gVisor's memory
# overlay and docker commit misses them; --allow-suid: otherwise runsc
# ignores the setuid bit and sudo fails (TestDockerSudo); --oci-seccomp:
# otherwise runsc does not apply the containers' seccomp profile
# (TestDockerSandboxSeccomp; the server's self-test warns).
write_engine_config() {
	if [[ -z "$2" ]]; then
		echo '{}' >"$1"
		return 0
	fi
	printf '{"runtimes": {"runsc": {"path": "%s", "runtimeArgs": ["--network=none", "--overlay2=none", "--allow-suid", "--oci-seccomp"]}}}\n' "$2" >"$1"
}

start_dockerd() {
	if [[ -n "${DOCKER_HOST:-}" ]] && docker_answers; then
		printf '==> using the Docker engine at %s\n' "$DOCKER_HOST" >&2
		return 0
	fi
	# The engine's remapped root must reach its data root: dockerd refuses
	# one below a directory others cannot enter (a home of mode 0700,
	# mktemp's 0700), so the data lives under /var/lib. A second run at the
	# same time gets a data directory of its own rather than sharing a
	# locked one.
	local state=/var/lib/terraform-provider-e2b data
	mkdir -p "$state"
	chmod 0711 "$state"
	data="$state/docker-data"
	exec {docker_lock}>"$state/docker-data.lock"
	if ! flock -n "$docker_lock"; then
		chmod 0711 "$work"
		data="$work/docker-data"
	fi
	ensure_dockremap
	export DOCKER_HOST="unix://$work/docker.sock"
	# The tests may count on this engine's set-up (testutil.EngineLacks).
	export E2B_TEST_OWN_ENGINE=1
	write_engine_config "$work/daemon.json" "$(runsc_binary)"
	printf '==> starting dockerd at %s\n' "$DOCKER_HOST" >&2
	dockerd --iptables=false --ip6tables=false --bridge=none --userns-remap=default \
		-H "$DOCKER_HOST" --data-root "$data" --exec-root "$work/docker-exec" \
		--pidfile "$work/docker.pid" --config-file "$work/daemon.json" >"$work/dockerd.log" 2>&1 &
	dockerd_pid=$!
	local i
	for ((i = 0; i < 120; i++)); do
		if docker_answers; then
			return 0
		fi
		if ! kill -0 "$dockerd_pid" 2>/dev/null; then
			break
		fi
		sleep 0.5
	done
	cat "$work/dockerd.log" >&2
	echo "dockerd did not start" >&2
	return 1
}

# ensure_dockremap makes the user dockerd --userns-remap=default maps
# containers to, with 65536 subordinate uids and gids after every range
# /etc/subuid and /etc/subgid already hold; once: a later run finds them.
ensure_dockremap() {
	if ! getent passwd dockremap >/dev/null; then
		useradd --system --no-create-home --shell /usr/sbin/nologin dockremap
	fi
	local file start
	for file in /etc/subuid /etc/subgid; do
		touch "$file"
		if ! grep -q '^dockremap:' "$file"; then
			start="$(awk -F: 'BEGIN { n = 100000 } $2 + $3 > n { n = $2 + $3 } END { print n }' "$file")"
			printf 'dockremap:%s:65536\n' "$start" >>"$file"
		fi
	done
}

# stop_pid PID stops an engine this script started: TERM, then KILL after
# 30 s.
stop_pid() {
	kill -TERM "$1" 2>/dev/null || true
	local i
	for ((i = 0; i < 60; i++)); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.5
	done
	kill -KILL "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

stop_dockerd() {
	if [[ -z "$dockerd_pid" ]]; then
		return 0
	fi
	# Containers left behind in this private engine go with it.
	docker ps -aq 2>/dev/null | xargs -r docker rm -f >/dev/null 2>&1 || true
	stop_pid "$dockerd_pid"
	dockerd_pid=""
	# dockerd leaves its network namespace mounted under its exec root, which
	# would keep $work from being removed.
	awk -v dir="$work/" 'index($2, dir) == 1 { print $2 }' /proc/self/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
}

isolated_pid=""
isolated_dir=""
isolated_unix=""
isolated_tcp=""

# start_isolated_dockerd starts a dockerd in a mount namespace of its own
# with empty tmpfs over /tmp, $HOME and the checkout (what Docker Desktop, a
# remote engine or a CI docker-in-docker service look like to the server:
# none of its paths exist there), its data on that tmpfs, its socket in a
# directory outside them, and a TCP listener on 127.0.0.1. It gets the
# test images from the engine at DOCKER_HOST through the API. runsc is
# copied beside its socket, where the engine's namespace still sees it.
# Returns 3 where this machine cannot make a mount namespace.
start_isolated_dockerd() {
	isolated_dir="$(mktemp -d /run/e2b-engine.XXXXXX)"
	local runsc
	runsc="$(runsc_binary)"
	if [[ -n "$runsc" ]]; then
		cp "$runsc" "$isolated_dir/runsc"
		runsc="$isolated_dir/runsc"
	fi
	write_engine_config "$isolated_dir/daemon.json" "$runsc"
	local port
	port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
	isolated_unix="unix://$isolated_dir/docker.sock"
	isolated_tcp="tcp://127.0.0.1:$port"
	printf '==> starting an engine that shares no files at %s and %s\n' "$isolated_unix" "$isolated_tcp" >&2
	# unshare and sh exec: $! is dockerd's PID.
	unshare --mount --propagation private -- sh -c '
		for d in /tmp "$HOME" "$3"; do
			# One below /tmp (a CI runner'"'"'s HOME, a checkout in /tmp) is
			# already hidden by the tmpfs over /tmp, and no longer exists.
			[ -d "$d" ] || continue
			mount -t tmpfs -o mode=0755 tmpfs "$d" || exit 1
		done
		exec dockerd --iptables=false --ip6tables=false --bridge=none --tls=false \
			-H "$1" -H "$2" --data-root /tmp/docker-data --exec-root /tmp/docker-exec \
			--pidfile /tmp/docker.pid --config-file "$4"
	' sh "$isolated_unix" "$isolated_tcp" "$PWD" "$isolated_dir/daemon.json" >"$isolated_dir/dockerd.log" 2>&1 &
	isolated_pid=$!
	if ! wait_engine "$isolated_unix" "$isolated_pid" "$isolated_dir/dockerd.log"; then
		echo "the isolated dockerd did not start" >&2
		# 3: this machine cannot make a mount namespace (an unprivileged
		# container), not a failure of the scripts.
		if grep -q 'unshare failed: Operation not permitted' "$isolated_dir/dockerd.log"; then
			return 3
		fi
		return 1
	fi
	docker save "$E2B_TEST_BASE_IMAGE" "$E2B_TEST_DEBIAN_IMAGE" "$E2B_TEST_CLIENTS_IMAGE" | DOCKER_HOST="$isolated_unix" docker load -q >/dev/null
}

# wait_engine HOST PID LOG waits up to a minute for the engine PID started
# to answer at HOST; 1, with its LOG on stderr, when it exits first or
# does not answer.
wait_engine() {
	local i
	for ((i = 0; i < 120; i++)); do
		if DOCKER_HOST="$1" docker_answers; then
			return 0
		fi
		if ! kill -0 "$2" 2>/dev/null; then
			break
		fi
		sleep 0.5
	done
	cat "$3" >&2
	return 1
}

stop_isolated_dockerd() {
	if [[ -z "$isolated_pid" ]]; then
		return 0
	fi
	DOCKER_HOST="$isolated_unix" docker ps -aq 2>/dev/null | DOCKER_HOST="$isolated_unix" xargs -r docker rm -f >/dev/null 2>&1 || true
	stop_pid "$isolated_pid"
	isolated_pid=""
	rm -rf "$isolated_dir"
}

quota_pid=""
quota_dir=""
quota_unix=""
quota_fs=""
quota_unavailable=""

# start_quota_dockerd starts a dockerd whose data root is a file system of
# its own on a loop device where Docker gives containers a hard disk limit
# (--storage-opt size: writes past it fail): xfs mounted with prjquota
# under overlay2, as on a production host; where this kernel has no xfs
# quotas (CONFIG_XFS_QUOTA), btrfs with Docker's btrfs driver (qgroups).
# $quota_fs names the one made. Its socket is in a private directory under
# /run, its 4 GiB image file (sparse) under /var/lib; it gets the test
# images from the engine at DOCKER_HOST through the API. Returns 3, with
# the reason in $quota_unavailable, where this machine can make neither
# (no loop device, no such file system, no mount).
start_quota_dockerd() {
	scripts/install-packages.sh xfsprogs btrfs-progs >&2
	quota_dir="$(mktemp -d /run/e2b-quota.XXXXXX)"
	local image driver=overlay2
	image="$(quota_image)"
	mkdir -p "${image%/*}" "$quota_dir/data"
	# Sparse: the file takes what the engine writes, not 4 GiB.
	truncate -s 4G "$image"
	if quota_mount xfs "$image" -o loop,prjquota; then
		quota_fs=xfs
	elif quota_mount btrfs "$image" -o loop; then
		printf '==> no xfs with project quotas here (%s): btrfs instead\n' "$quota_unavailable" >&2
		quota_fs=btrfs
		driver=btrfs
		# Quotas on before any container: Docker's driver enables them with
		# the first container that has a size, and until the scan that
		# starts ends, btrfs enforced no limit (a RUN step wrote 2 GiB past
		# a 64 MiB one).
		btrfs quota enable "$quota_dir/data" && btrfs quota rescan -w "$quota_dir/data" >/dev/null
	else
		printf '==> no file system with quotas Docker uses can be made here: %s\n' "$quota_unavailable" >&2
		rm -f "$image"
		rm -rf "$quota_dir"
		quota_dir=""
		return 3
	fi
	write_engine_config "$quota_dir/daemon.json" "$(runsc_binary)"
	quota_unix="unix://$quota_dir/docker.sock"
	printf '==> starting an engine on %s with disk quotas at %s\n' "$quota_fs" "$quota_unix" >&2
	dockerd --iptables=false --ip6tables=false --bridge=none --storage-driver "$driver" \
		-H "$quota_unix" --data-root "$quota_dir/data/docker" --exec-root "$quota_dir/exec" \
		--pidfile "$quota_dir/docker.pid" --config-file "$quota_dir/daemon.json" >"$quota_dir/dockerd.log" 2>&1 &
	quota_pid=$!
	if ! wait_engine "$quota_unix" "$quota_pid" "$quota_dir/dockerd.log"; then
		echo "the quota engine's dockerd did not start" >&2
		return 1
	fi
	docker save "$E2B_TEST_BASE_IMAGE" "$E2B_TEST_DEBIAN_IMAGE" | DOCKER_HOST="$quota_unix" docker load -q >/dev/null
}

# quota_mount FS IMAGE MOUNT-OPTIONS... makes file system FS in IMAGE and
# mounts it on $quota_dir/data; on failure, adds why to $quota_unavailable
# (the kernel's word when it has one: mount's own names none).
quota_mount() {
	local fs="$1" image="$2" out why
	shift 2
	if out="$("mkfs.$fs" -q -f "$image" 2>&1 && mount -t "$fs" "$@" "$image" "$quota_dir/data" 2>&1)"; then
		return 0
	fi
	why="$(dmesg 2>/dev/null | grep -i "$fs" | tail -1 | sed 's/^\[[^]]*\] //')"
	quota_unavailable+="${quota_unavailable:+; }$fs: ${why:-${out%%$'\n'*}}"
	return 1
}

stop_quota_dockerd() {
	if [[ -z "$quota_dir" ]]; then
		return 0
	fi
	if [[ -n "$quota_pid" ]]; then
		DOCKER_HOST="$quota_unix" docker ps -aq 2>/dev/null | DOCKER_HOST="$quota_unix" xargs -r docker rm -f >/dev/null 2>&1 || true
		stop_pid "$quota_pid"
		quota_pid=""
	fi
	# The engine's network namespace mounts under its exec root, then the
	# file system itself (mount -o loop detaches its loop device). What
	# stays mounted is left, and said, rather than emptied by rm.
	awk -v dir="$quota_dir/" 'index($2, dir) == 1 { print $2 }' /proc/self/mounts | sort -r | xargs -r -n1 umount 2>/dev/null || true
	if awk -v dir="$quota_dir/" 'index($2, dir) == 1 { found = 1 } END { exit !found }' /proc/self/mounts; then
		printf '==> WARNING: %s is still mounted; left in place\n' "$quota_dir/data" >&2
	else
		rm -f "$(quota_image)"
		rm -rf "$quota_dir"
	fi
	quota_dir=""
}

# quota_image prints the path of the quota engine's image file: on disk,
# not beside its socket in /run (a tmpfs, where it would take memory).
quota_image() {
	echo "/var/lib/terraform-provider-e2b/${quota_dir##*/}.img"
}
