# shellcheck shell=bash
# tools/sim/pipeline.sh - starting and stopping one paycb pipeline in the background, for
# tools/demo.sh, tools/bench.sh and tests/sim/test_scenarios.sh (sourced, not run).
#
# A pipeline lives in one directory PL_DIR: its configuration files, log/<name>.log and
# run/<name>.pid for each daemon. Daemons are started in their own session (setsid) so a
# terminal's ^C does not reach them, and stopped by SIGTERM to the recorded pid (only after
# checking that the pid still runs the program recorded with it), then waited for with a
# deadline. Nothing here sleeps to synchronise: every wait polls for its condition.
#
#   pl_init DIR                         set up DIR/log and DIR/run
#   pl_start NAME CONF PROGRAM [PORT]   start bin/PROGRAM -c CONF; with PORT wait for its
#                                       admin listener's /healthz (else for the process)
#   pl_start_api NAME CONF PORT         start `bin/paycb-sim api` (the channels' API the
#                                       reconciler calls) and wait until it answers
#   pl_ready PORT [TIMEOUT_S]           wait for /readyz (database and Kafka answer)
#   pl_stop NAME [TIMEOUT_S]            SIGTERM, wait; SIGKILL after the deadline; the exit
#                                       status lands in PL_STATUS when NAME is our child
#   pl_stop_all                         ingest first, then processors, then the rest
#   pl_pid NAME                         the recorded pid if it still runs, else nothing
#   pl_cpu_ms PID                       user + system CPU time from /proc/PID/stat
#   pl_asleep TIMEOUT_S NAME...         wait until each NAME logged a sleeping producer
#                                       (event=kafka_producer_asleep) since its last wake
#   pl_free_port                        a free loopback port

PL_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PL_DIR=
PL_TICK=${PL_TICK:-0.05}
# shellcheck disable=SC2034 # read by the scripts that source this file
PL_STATUS=0

pl_init() {
	PL_DIR=$1
	mkdir -p "$PL_DIR/log" "$PL_DIR/run"
}

# pl_scratch DIR DB - a fresh run directory DIR (pl_init) and an EXIT trap that stops every
# daemon the run started and drops the scratch database DB. For the benches. pl_sql's private
# MariaDB client file (mode 0600: it holds the password) is written at its first use, since on
# a fresh machine the password exists only once the benches have started the services.
pl_scratch() {
	PL_SCRATCH_CNF=$1/my.cnf
	PL_SCRATCH_DB=$2
	rm -rf "$1"
	pl_init "$1"
	trap pl_scratch_cleanup EXIT
}

# pl_sql SQL [DB] - one statement through pl_scratch's client file, tab-separated, no header.
pl_sql() {
	if [[ ! -s $PL_SCRATCH_CNF ]]; then
		local pw
		pw=$(cat "$PAYCB_VAR/secrets/db_password") || return
		(
			umask 077
			printf '[client]\nhost=127.0.0.1\nport=%s\nuser=paycb\npassword=%s\n' \
				"${PAYCB_DB_PORT:-23306}" "$pw" >"$PL_SCRATCH_CNF"
		) || return
	fi
	mariadb --defaults-extra-file="$PL_SCRATCH_CNF" -N -B -e "$1" ${2:+"$2"}
}

pl_scratch_cleanup() {
	pl_stop_all >/dev/null 2>&1 || true
	pl_sql "DROP DATABASE IF EXISTS $PL_SCRATCH_DB" 2>/dev/null || true
}

# pl_asleep TIMEOUT_S NAME... - waits until the last producer event in each NAME's log is
# event=kafka_producer_asleep (kafka.producer_sleep_s after its last message), or TIMEOUT_S
# passed; prints the seconds waited, with " (not all)" after a timeout. A build whose
# producers never sleep waits the whole TIMEOUT_S, so builds compared start alike.
pl_asleep() {
	local timeout=$1 deadline start n log
	shift
	start=$(pl_now_ms)
	deadline=$((start + timeout * 1000))
	while :; do
		n=0
		for log in "$@"; do
			grep -o 'event=kafka_producer_[a-z]*' "$PL_DIR/log/$log.log" 2>/dev/null |
				tail -n 1 | grep -q asleep && n=$((n + 1))
		done
		((n == $#)) && break
		if (($(pl_now_ms) >= deadline)); then
			echo "$(((deadline - start) / 1000)) (not all)"
			return 0
		fi
		sleep "$PL_TICK"
	done
	n=$(($(pl_now_ms) - start))
	echo "$((n / 1000)).$((n % 1000 / 100))"
}

pl_now_ms() {
	local t
	t=$(date +%s%N)
	echo $((t / 1000000))
}

pl_free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# pl_alive PID PROGRAM - PID runs PROGRAM and is not a zombie.
pl_alive() {
	local state
	# The process may end between any two reads of /proc: every read may fail.
	{ tr '\0' ' ' <"/proc/$1/cmdline"; } 2>/dev/null | grep -- "$2" >/dev/null || return 1
	state=$(awk '{ s = $0; sub(/^.*\) /, "", s); split(s, f, " "); print f[1] }' "/proc/$1/stat" 2>/dev/null) || return 1
	[[ -n $state && $state != Z && $state != X ]]
}

# pl_running PID - PID exists and is not a zombie, whatever it runs.
pl_running() {
	local state
	state=$(awk '{ s = $0; sub(/^.*\) /, "", s); split(s, f, " "); print f[1] }' "/proc/$1/stat" 2>/dev/null) || return 1
	[[ -n $state && $state != Z && $state != X ]]
}

pl_pid() {
	local f="$PL_DIR/run/$1.pid" pid prog
	[[ -f $f ]] || return 0
	read -r pid prog <"$f" || return 0
	if pl_alive "$pid" "$prog"; then echo "$pid"; fi
}

# pl_http_ok PORT PATH - the admin listener answers 200.
pl_http_ok() {
	[[ $(curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:$1$2" 2>/dev/null) == 200 ]]
}

pl_start() {
	local name=$1 conf=$2 prog=$3 port=${4:-0} log pid deadline
	log="$PL_DIR/log/$name.log"
	if [[ -n $(pl_pid "$name") ]]; then
		echo "pipeline: $name is already running (pid $(pl_pid "$name"))" >&2
		return 1
	fi
	setsid "$PL_ROOT/bin/$prog" -c "$conf" >>"$log" 2>&1 </dev/null &
	pid=$!
	echo "$pid $prog" >"$PL_DIR/run/$name.pid"
	deadline=$(($(pl_now_ms) + 30000))
	while (($(pl_now_ms) < deadline)); do
		# Between the fork and the exec the child still runs this shell's command line,
		# so only a child that is gone (or a zombie) has exited.
		if ! pl_alive "$pid" "$prog" && ! pl_running "$pid"; then
			echo "pipeline: $name exited at start; last lines of $log:" >&2
			tail -n 15 "$log" >&2
			return 1
		fi
		if ((port == 0)) || pl_http_ok "$port" /healthz; then
			return 0
		fi
		sleep "$PL_TICK"
	done
	echo "pipeline: $name did not answer on port $port within 30 s (see $log)" >&2
	return 1
}

pl_start_api() {
	local name=$1 conf=$2 port=$3 log pid deadline
	log="$PL_DIR/log/$name.log"
	if [[ -n $(pl_pid "$name") ]]; then
		echo "pipeline: $name is already running (pid $(pl_pid "$name"))" >&2
		return 1
	fi
	setsid "$PL_ROOT/bin/paycb-sim" api -c "$conf" --port "$port" >>"$log" 2>&1 </dev/null &
	pid=$!
	echo "$pid paycb-sim" >"$PL_DIR/run/$name.pid"
	deadline=$(($(pl_now_ms) + 30000))
	until pl_http_ok "$port" /_sim/stats; do
		if ! pl_running "$pid" || (($(pl_now_ms) >= deadline)); then
			echo "pipeline: $name did not answer on port $port; last lines of $log:" >&2
			tail -n 15 "$log" >&2
			return 1
		fi
		sleep "$PL_TICK"
	done
}

pl_ready() {
	local port=$1 deadline
	deadline=$(($(pl_now_ms) + ${2:-60} * 1000))
	until pl_http_ok "$port" /readyz; do
		(($(pl_now_ms) < deadline)) || return 1
		sleep "$PL_TICK"
	done
}

pl_stop() {
	local name=$1 timeout=${2:-30} pid prog deadline f="$PL_DIR/run/$1.pid"
	[[ -f $f ]] || return 0
	read -r pid prog <"$f" || true
	if [[ -z ${pid:-} ]] || ! pl_alive "$pid" "$prog"; then
		rm -f "$f"
		return 0
	fi
	kill -TERM "$pid" 2>/dev/null || true
	deadline=$(($(pl_now_ms) + timeout * 1000))
	while pl_alive "$pid" "$prog"; do
		if (($(pl_now_ms) >= deadline)); then
			echo "pipeline: $name (pid $pid) did not stop within ${timeout}s; SIGKILL" >&2
			kill -KILL "$pid" 2>/dev/null || true
			break
		fi
		sleep "$PL_TICK"
	done
	# Reap it when it is our own child (tests); a detached daemon was reaped by init.
	PL_STATUS=0
	# shellcheck disable=SC2034 # read by the scripts that source this file
	wait "$pid" 2>/dev/null || PL_STATUS=$?
	rm -f "$f"
}

pl_stop_all() {
	local f name rc=0
	# Ingest first, so no callback arrives that no processor would take.
	pl_stop ingest || rc=1
	for f in "$PL_DIR"/run/*.pid; do
		[[ -e $f ]] || continue
		name=$(basename "$f" .pid)
		pl_stop "$name" || rc=1
	done
	return $rc
}

pl_cpu_ms() {
	local tck
	tck=$(getconf CLK_TCK)
	awk -v t="$tck" '{ s = $0; sub(/^.*\) /, "", s); split(s, f, " "); printf "%d\n", (f[12] + f[13]) * 1000 / t }' "/proc/$1/stat" 2>/dev/null || echo 0
}
