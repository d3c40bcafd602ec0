#!/usr/bin/env bash
# deploy/local/deps.sh - install what paycb needs to build, test and run locally
# (`make deps`; also the first step of `make test` and `make run`).
#
#   1. Debian packages: compilers, the client libraries we link, MariaDB server and
#      client, kcat, a JDK and Maven (only when `java`/`mvn` are absent).
#      With --bench (`make bench`), also gnuplot-nox, which only the bench's charts
#      (tools/bench_plot.sh) use: the tests never need it.
#   2. The Apache Kafka broker jars, from Maven Central, into
#      ${PAYCB_CACHE:-~/.cache/paycb}/kafka-<version>/lib (no Debian package ships a
#      broker). Never inside the repository: commits must stay small.
#
# Idempotent and quick when everything is present: one dpkg-query for all packages,
# apt-get update only when something is missing, and the jar download is skipped when
# its completion marker exists. Prints one line per step.
set -euo pipefail

# shellcheck source=deploy/local/lib.sh
. "$(dirname "$0")/lib.sh"

PACKAGES=(build-essential pkg-config librdkafka-dev libmariadb-dev-compat libssl-dev
	libjansson-dev libconfig-dev libmicrohttpd-dev libcurl4-openssl-dev mariadb-server mariadb-client
	libcmocka-dev kcat curl openssl clang clang-format libclang-rt-14-dev python3
	# For the operations tests: nginx in front of ingest, promtool (Debian ships it only in
	# the prometheus package; its service is never started), systemd-analyze.
	nginx prometheus systemd)

# missing_packages PKG... - print those not in dpkg state "installed". dpkg-query -W
# alone is not enough: a removed package whose config files remain is still "known".
missing_packages() {
	local installed
	installed=$(dpkg-query -W -f='${Package} ${db:Status-Status}\n' "$@" 2>/dev/null |
		awk '$2 == "installed" { print $1 }' || true)
	local p
	for p in "$@"; do
		grep -qxF -- "$p" <<<"$installed" || echo "$p"
	done
}

install_packages() {
	local want=("${PACKAGES[@]}")
	[[ ${1:-} == --bench ]] && want+=(gnuplot-nox)
	# The JDK and Maven may come from elsewhere (SDKMAN, a CI image); any java and mvn do.
	command -v java >/dev/null 2>&1 || want+=(default-jdk-headless)
	command -v mvn >/dev/null 2>&1 || want+=(maven)

	local missing
	mapfile -t missing < <(missing_packages "${want[@]}")
	if ((${#missing[@]} == 0)); then
		say deps "debian packages present (${#want[@]} checked)"
		return 0
	fi

	say deps "installing ${missing[*]}"
	local t0 policy_added=0
	t0=$(now_ms)
	# Installing mariadb-server would start the system MariaDB on 3306. We never use it
	# (services.sh runs a private mariadbd), so when no policy-rc.d exists we add one
	# that denies service starts for the duration of the install, and remove it after.
	if [[ ! -e /usr/sbin/policy-rc.d ]]; then
		as_root sh -c 'printf "#!/bin/sh\n# added by paycb deps.sh during apt-get install\nexit 101\n" >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d'
		policy_added=1
		trap 'as_root rm -f /usr/sbin/policy-rc.d' EXIT
	fi
	# apt and dpkg chatter goes to a log, shown only when something fails.
	local log="$PAYCB_VAR/log/deps-apt.log"
	mkdir -p "$(dirname "$log")"
	if ! { as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
		as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "${missing[@]}"; } \
		>"$log" 2>&1; then
		tail -n 20 "$log" | sed 's/^/    /' >&2
		die deps "apt-get failed (full output in $log)"
	fi
	if ((policy_added)); then
		as_root rm -f /usr/sbin/policy-rc.d
		trap - EXIT
	fi
	say deps "installed ${#missing[@]} package(s) in $(elapsed "$t0")s"
}

# fetch_kafka VERSION - download one version's jars; false if Maven cannot resolve it.
fetch_kafka() {
	local v=$1 dir lib tmp t0 n size
	dir="$PAYCB_CACHE/kafka-$v"
	lib="$dir/lib"
	tmp="$dir/lib.tmp.$$"
	mkdir -p "$dir"
	rm -rf "$tmp"
	t0=$(now_ms)
	say deps "downloading kafka $v jars from Maven Central"
	# Debian's Maven pins maven-dependency-plugin 2.8 in its super-POM, so the plugin is
	# named with its version. The output goes to a temporary directory that is moved into
	# place only when Maven succeeded, so an interrupted download never looks complete.
	#
	# -U: retry artifacts whose earlier failure Maven cached in ~/.m2 (a network glitch
	# would otherwise block this version for a day).
	if ! mvn -B -q -U -f "$PAYCB_LOCAL/kafka/pom.xml" -Dkafka.version="$v" \
		org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
		-DincludeScope=runtime -DoutputDirectory="$tmp" >"$dir/mvn.log" 2>&1; then
		rm -rf "$tmp"
		say deps "kafka $v: maven failed (full output in $dir/mvn.log):"
		# The first [ERROR] line carries the cause; the rest is Maven's generic advice.
		sed 's/\x1b\[[0-9;]*m//g' "$dir/mvn.log" | grep -m 1 '^\[ERROR\] [^ ]' | sed 's/^/    /' || true
		return 1
	fi
	local j
	for j in "kafka_2.13-$v.jar" "kafka-clients-$v.jar" slf4j-reload4j-1.7.36.jar reload4j-1.2.25.jar; do
		if [[ ! -f $tmp/$j ]]; then
			rm -rf "$tmp"
			say deps "kafka $v: $j missing from the download"
			return 1
		fi
	done
	rm -rf "$lib"
	mv "$tmp" "$lib"
	n=$(find "$lib" -name '*.jar' | wc -l)
	size=$(du -sh "$lib" | cut -f1)
	# The marker is written last; kafka.sh and later runs trust only directories with it.
	printf 'version=%s\njars=%s\nsize=%s\nseconds=%s\n' "$v" "$n" "$size" "$(elapsed "$t0")" >"$dir/complete"
	say deps "kafka $v: $n jars, $size, downloaded in $(elapsed "$t0")s"
}

install_kafka() {
	local v
	for v in $PAYCB_KAFKA_VERSIONS; do
		if kafka_cached "$v"; then
			say deps "kafka jars cached at $(kafka_lib_dir "$v")"
			return 0
		fi
	done
	for v in $PAYCB_KAFKA_VERSIONS; do
		if fetch_kafka "$v"; then
			say deps "kafka jars cached at $(kafka_lib_dir "$v")"
			return 0
		fi
	done
	die deps "could not download any of the kafka versions: $PAYCB_KAFKA_VERSIONS"
}

install_packages "$@"
install_kafka
