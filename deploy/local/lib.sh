# shellcheck shell=bash
# deploy/local/lib.sh - shell helpers shared by deploy/local/*.sh (sourced, never run).
#
# It fixes the layout every script agrees on and the small process helpers they need:
#
#   PAYCB_ROOT   the work tree (derived from this file's location)
#   PAYCB_VAR    everything generated at run time: data, logs, pid files, secrets,
#                the rendered configs. Default <repo>/var, which .gitignore excludes,
#                so no data or log can ever be committed by accident.
#   PAYCB_CACHE  downloads kept across `make services-clean` and fresh clones
#                (the Kafka jars). Default ~/.cache/paycb, outside the repository.
#
# Tests point PAYCB_VAR and the port variables elsewhere to run a second, private copy
# of a service next to the one the developer has up.

PAYCB_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck disable=SC2034 # used by the scripts that source this file
PAYCB_LOCAL="$PAYCB_ROOT/deploy/local"
PAYCB_VAR="${PAYCB_VAR:-$PAYCB_ROOT/var}"
mkdir -p "$PAYCB_VAR"
# Absolute, because it is written into config files and passed to daemons that chdir.
PAYCB_VAR="$(cd "$PAYCB_VAR" && pwd)"
PAYCB_CACHE="${PAYCB_CACHE:-${HOME:-/root}/.cache/paycb}"
export PAYCB_ROOT PAYCB_VAR PAYCB_CACHE

# Kafka versions in order of preference; deps.sh downloads the first that resolves,
# kafka.sh runs the first that is completely cached.
PAYCB_KAFKA_VERSIONS="${PAYCB_KAFKA_VERSIONS:-3.9.2 3.9.1}"

# say NAME MESSAGE... - one progress line, prefixed by the component name.
say() {
	local name=$1
	shift
	printf '%s: %s\n' "$name" "$*"
}

# die NAME MESSAGE... - report on stderr and stop the script.
die() {
	local name=$1
	shift
	printf '%s: %s\n' "$name" "$*" >&2
	exit 1
}

# now_ms - wall clock in milliseconds, for deadlines and reported timings.
now_ms() {
	local t
	t=$(date +%s%N)
	echo $((t / 1000000))
}

# elapsed START_MS - seconds since START_MS, one decimal.
elapsed() {
	local d=$(($(now_ms) - $1))
	printf '%d.%d' $((d / 1000)) $((d % 1000 / 100))
}

# pid_alive PID - true if PID runs and is not a zombie. Our daemons are detached
# with setsid, so when their parent is gone they are reaped by whoever adopts them;
# in a container whose init does not reap, a dead daemon lingers as a zombie
# that `kill -0` still reports as alive.
pid_alive() {
	local pid=$1 state
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	state=$(awk '{ s = $0; sub(/^.*\) /, "", s); split(s, f, " "); print f[1] }' \
		"/proc/$pid/stat" 2>/dev/null) || return 1
	[[ $state != Z && $state != X ]]
}

# pid_matches PID WORD - true if PID is alive and its command line contains WORD.
# Guards against a stale pid file whose number the kernel has since given to
# an unrelated process: we must never signal that one.
pid_matches() {
	local pid=$1 word=$2 cmd
	pid_alive "$pid" || return 1
	cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
	[[ $cmd == *"$word"* ]]
}

# read_pidfile FILE WORD - print the pid recorded in FILE if that process is still
# ours (its command line contains WORD); otherwise remove the stale file and fail.
read_pidfile() {
	local file=$1 word=$2 pid
	[[ -s $file ]] || return 1
	pid=$(head -n1 "$file" 2>/dev/null | tr -dc '0-9')
	if [[ -n $pid ]] && pid_matches "$pid" "$word"; then
		echo "$pid"
		return 0
	fi
	rm -f "$file"
	return 1
}

# wait_pid_exit PID TIMEOUT_S - poll until PID has exited; false on timeout.
wait_pid_exit() {
	local pid=$1 deadline=$(($(now_ms) + $2 * 1000))
	while pid_alive "$pid"; do
		(($(now_ms) < deadline)) || return 1
		sleep 0.1
	done
	return 0
}

# stop_pid NAME PID TIMEOUT_S - SIGTERM, wait, then SIGKILL if it is still there.
# Callers that have a gentler way to ask (mariadb-admin shutdown) do that first.
stop_pid() {
	local name=$1 pid=$2 timeout=$3
	pid_alive "$pid" || return 0
	kill -TERM "$pid" 2>/dev/null || true
	if ! wait_pid_exit "$pid" "$timeout"; then
		say "$name" "pid $pid still running after ${timeout}s; sending SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
		wait_pid_exit "$pid" 10 || die "$name" "pid $pid survived SIGKILL"
	fi
}

# port_in_use PORT - true if something accepts TCP connections on 127.0.0.1:PORT.
# Only used to add a hint to a failure message; the daemons' own bind errors
# are the authority.
port_in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# port_ephemeral PORT - true if PORT lies in net.ipv4.ip_local_port_range, where the kernel
# picks the local ports of outgoing connections: a listener there can find its port taken by
# some client's connection of the moment ("Address already in use"), so it is worth a hint.
port_ephemeral() {
	local lo hi
	read -r lo hi </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || return 1
	((${1:-0} >= lo && ${1:-0} <= hi))
}

# fail_start NAME TIMEOUT_S LOG PORT REASON - the one failure report every start uses:
# who failed, why, the errors this start logged and the end of its log, so a CI log
# alone explains the failure. A JVM's cause is often far above its last 30 lines
# (they are the shutdown that followed it), hence the separate error excerpt.
# PAYCB_LOG_OFFSET is the size LOG had when this start began.
fail_start() {
	local name=$1 timeout=$2 log=$3 port=$4 reason=$5 errors
	{
		printf '%s: failed to start within %ss (%s)\n' "$name" "$timeout" "$reason"
		errors=$(tail -c "+$((${PAYCB_LOG_OFFSET:-0} + 1))" "$log" 2>/dev/null |
			grep -E 'ERROR|FATAL|Caused by:' | head -n 8 || true)
		if [[ -n $errors ]]; then
			printf '%s: first errors logged by this start:\n' "$name"
			sed 's/^/    /' <<<"$errors"
		fi
		printf '%s: last lines of %s:\n' "$name" "$log"
		if [[ -s $log ]]; then
			tail -n 30 "$log" | sed 's/^/    /'
		else
			echo "    (log is empty)"
		fi
		if [[ $reason == *exited* ]] && port_in_use "$port"; then
			printf '%s: note: another process is listening on 127.0.0.1:%s\n' "$name" "$port"
		fi
		if port_ephemeral "$port"; then
			printf '%s: note: port %s is in the kernel'"'"'s ephemeral range (%s); any outgoing\n' \
				"$name" "$port" "$(tr -s '\t ' - </proc/sys/net/ipv4/ip_local_port_range)"
			printf '%s: connection may hold it for a while; choose a port below it\n' "$name"
		fi
	} >&2
	exit 1
}

# rotate_log FILE - keep one previous generation once a log passes 64 MiB, so a
# long-lived developer box does not fill its disk with broker chatter.
rotate_log() {
	local file=$1 size
	[[ -f $file ]] || return 0
	size=$(stat -c %s "$file" 2>/dev/null || echo 0)
	if ((size > 64 * 1024 * 1024)); then
		mv -f "$file" "$file.1"
	fi
}

# take_lock NAME - serialise concurrent runs of one service script on one PAYCB_VAR
# (two `make` targets started at once must not both initialise a datadir).
# The lock is held until the script exits.
take_lock() {
	local name=$1
	# flock(2) locks belong to the open file: a second open in this same process
	# would wait for the first, so `clean` calling `down` must not lock again.
	[[ -n ${PAYCB_LOCK_FD:-} ]] && return 0
	mkdir -p "$PAYCB_VAR/run"
	exec {PAYCB_LOCK_FD}>"$PAYCB_VAR/run/$name.lock"
	flock -w 180 "$PAYCB_LOCK_FD" || die "$name" "another $name script holds $PAYCB_VAR/run/$name.lock"
}

# down_begin NAME - the start of a server's `down`: takes NAME's lock and sets the caller's
# pid to the running server's (running_pid, defined by each server's script); when none
# runs, says so and returns 1.
down_begin() {
	take_lock "$1"
	if pid=$(running_pid); then
		return 0
	fi
	say "$1" "not running"
	return 1
}

# start_detached LOG PIDFILE CMD... - run CMD in its own session, so it survives this
# script and a Ctrl-C sent to `make`, with stdout and stderr appended to LOG.
# setsid does not fork here (a background job of a non-interactive shell is not a
# process-group leader), so $! is the daemon itself; the caller verifies that.
start_detached() {
	local log=$1 pidfile=$2
	shift 2
	if [[ -n ${PAYCB_LOCK_FD:-} ]]; then
		# The daemon must not inherit our lock: it would hold it for its whole life.
		setsid "$@" >>"$log" 2>&1 </dev/null {PAYCB_LOCK_FD}>&- &
	else
		setsid "$@" >>"$log" 2>&1 </dev/null &
	fi
	echo $! >"$pidfile"
}

# The helpers below are the parts of kafka.sh and mariadb.sh that are the same for both
# services. They use the names each of those scripts defines before calling them: NAME,
# PORT, PIDFILE, LOG, START_TIMEOUT and a function running_pid that prints the pid of our
# running daemon or fails.

# start_check PID T0 DEADLINE_MS WHAT NO_ANSWER - one round of a wait_ready loop that has
# not seen the daemon ready yet. It fails the start at once when PID has exited (WHAT names
# it in the report). When the deadline has passed it stops the half-started daemon first,
# because one that came up later could be mistaken for a good one, and fails the start
# with NO_ANSWER as the reason.
# shellcheck disable=SC2153 # NAME, PORT, PIDFILE and LOG are set by the sourcing script.
start_check() {
	local pid=$1 t0=$2 deadline=$3 what=$4 no_answer=$5
	if ! pid_alive "$pid"; then
		rm -f "$PIDFILE"
		fail_start "$NAME" "$START_TIMEOUT" "$LOG" "$PORT" "$what exited after $(elapsed "$t0")s"
	fi
	if (($(now_ms) >= deadline)); then
		stop_pid "$NAME" "$pid" 10
		rm -f "$PIDFILE"
		fail_start "$NAME" "$START_TIMEOUT" "$LOG" "$PORT" "$no_answer"
	fi
}

# service_kill - the kill command: SIGKILL the running daemon, for crash tests, and forget
# its pid file.
# shellcheck disable=SC2153 # NAME, PORT, PIDFILE and LOG are set by the sourcing script.
service_kill() {
	local pid
	take_lock "$NAME"
	if ! pid=$(running_pid); then
		say "$NAME" "not running"
		return 0
	fi
	kill -KILL "$pid" 2>/dev/null || true
	wait_pid_exit "$pid" 10 || die "$NAME" "pid $pid survived SIGKILL"
	rm -f "$PIDFILE"
	say "$NAME" "killed pid $pid (SIGKILL)"
}

# service_status CHECK SICK - the status command: exit 0 when our daemon runs and the
# function CHECK says it serves, 1 when the process exists but does not serve (SICK says
# how, after "process PID exists but"), 3 when it is stopped.
# shellcheck disable=SC2153 # NAME, PORT, PIDFILE and LOG are set by the sourcing script.
service_status() {
	local check=$1 sick=$2 pid
	if pid=$(running_pid) && "$check"; then
		say "$NAME" "running (pid $pid) on 127.0.0.1:$PORT"
		return 0
	elif [[ -n ${pid:-} ]]; then
		say "$NAME" "process $pid exists but $sick"
		return 1
	fi
	say "$NAME" "stopped"
	return 3
}

# kafka_lib_dir VERSION - where deps.sh caches the jars of one Kafka version.
kafka_lib_dir() {
	echo "$PAYCB_CACHE/kafka-$1/lib"
}

# kafka_cached VERSION - true when the download of VERSION finished (marker written
# last, after the jars were moved into place).
kafka_cached() {
	[[ -f $PAYCB_CACHE/kafka-$1/complete && -f $(kafka_lib_dir "$1")/kafka_2.13-$1.jar ]]
}

# kafka_version - the Kafka version to run: PAYCB_KAFKA_VERSION if set, else the
# first of PAYCB_KAFKA_VERSIONS that is cached.
kafka_version() {
	local v
	if [[ -n ${PAYCB_KAFKA_VERSION:-} ]]; then
		kafka_cached "$PAYCB_KAFKA_VERSION" || return 1
		echo "$PAYCB_KAFKA_VERSION"
		return 0
	fi
	for v in $PAYCB_KAFKA_VERSIONS; do
		if kafka_cached "$v"; then
			echo "$v"
			return 0
		fi
	done
	return 1
}

# as_root CMD... - run CMD as root: directly when we are root (CI), else via sudo.
as_root() {
	if (($(id -u) == 0)); then
		"$@"
	else
		sudo "$@"
	fi
}
