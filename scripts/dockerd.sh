# Sourced by scripts that need a Docker engine: start_dockerd uses the one
# at DOCKER_HOST when it answers, else starts a private dockerd (no bridge
# network, no iptables) on a socket under $work and exports DOCKER_HOST;
# stop_dockerd stops only an engine start_dockerd started, by its PID.
#
# Needs: $work (a short private directory: it holds a unix socket) and
# $cache (where the engine keeps its images between runs).

dockerd_pid=""

docker_answers() {
	timeout 20 docker version --format '{{.Server.Version}}' >/dev/null 2>&1
}

start_dockerd() {
	if [[ -n "${DOCKER_HOST:-}" ]] && docker_answers; then
		printf '==> using the Docker engine at %s\n' "$DOCKER_HOST" >&2
		return 0
	fi
	# A second run at the same time gets a data directory of its own rather
	# than sharing a locked one.
	local data="$cache/docker-data"
	exec {docker_lock}>"$cache/docker-data.lock"
	if ! flock -n "$docker_lock"; then
		data="$work/docker-data"
	fi
	export DOCKER_HOST="unix://$work/docker.sock"
	printf '==> starting dockerd at %s\n' "$DOCKER_HOST" >&2
	dockerd --iptables=false --ip6tables=false --bridge=none \
		-H "$DOCKER_HOST" --data-root "$data" --exec-root "$work/docker-exec" \
		--pidfile "$work/docker.pid" >"$work/dockerd.log" 2>&1 &
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

stop_dockerd() {
	if [[ -z "$dockerd_pid" ]]; then
		return 0
	fi
	# Containers left behind in this private engine go with it.
	docker ps -aq 2>/dev/null | xargs -r docker rm -f >/dev/null 2>&1 || true
	kill -TERM "$dockerd_pid" 2>/dev/null || true
	local i
	for ((i = 0; i < 60; i++)); do
		kill -0 "$dockerd_pid" 2>/dev/null || break
		sleep 0.5
	done
	kill -KILL "$dockerd_pid" 2>/dev/null || true
	wait "$dockerd_pid" 2>/dev/null || true
	dockerd_pid=""
	# dockerd leaves its network namespace mounted under its exec root, which
	# would keep $work from being removed.
	awk -v dir="$work/" 'index($2, dir) == 1 { print $2 }' /proc/self/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
}
