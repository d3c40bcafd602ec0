#!/usr/bin/env bash
# tests/ops/test_systemd.sh - `make install` into a temp DESTDIR, then the systemd units
# checked there without a running systemd.
#
# `systemd-analyze verify --root=DIR` (systemd 252) loads a unit from an alternative root,
# with its dependencies, and checks that ExecStart's binary exists and is executable inside
# that root, which is why the binaries are installed first. A root needs the distribution's
# own units too (sysinit.target, network-online.target, ...), so /usr/lib/systemd/system is
# copied into it. verify exits 0 even when it ignores an unknown or malformed directive, so a
# unit passes only with exit 0 AND no output; two broken units prove that both kinds of
# mistake are caught. Templates are verified as instances (paycb-ingest@1.service).
# `systemd-analyze security --offline=yes` scores the sandbox. The rest: the install layout
# and modes (configuration 0640, secrets 0700), the paths rewritten for another PREFIX and
# SYSCONFDIR, an existing configuration left alone, the sysusers entry, and TimeoutStopSec
# above each daemon's drain for the example configuration. About 5 s.
set -uo pipefail
# shellcheck source=tests/ops/lib.sh
. "$(dirname "$0")/lib.sh"

command -v systemd-analyze >/dev/null || bail "systemd-analyze is installed (apt-get install systemd)"
R="$T/root"
out=$(make -s --no-print-directory install DESTDIR="$R" PREFIX=/usr/local 2>&1)
check "make install DESTDIR=... PREFIX=/usr/local" test $? -eq 0 || diag "$out"
U="$R/usr/local/lib/systemd/system"
mkdir -p "$R/usr/lib/systemd"
cp -a /usr/lib/systemd/system "$R/usr/lib/systemd/" || bail "copy the distribution's units into the root"
# ExecReload runs /bin/kill, which verify looks for inside the root like ExecStart's binary.
mkdir -p "$R/bin" && cp /bin/kill "$R/bin/kill" || bail "copy /bin/kill into the root"

# verify_clean UNIT [ROOT] - verify passes: exit 0 and not a word on stdout or stderr.
verify_clean() {
	local out rc
	out=$(cd "${2:-$R}/usr/local/lib/systemd/system" 2>/dev/null &&
		systemd-analyze verify --root="${2:-$R}" "$1" 2>&1)
	rc=$?
	[[ $rc -eq 0 && -z $out ]] && return 0
	diag "$out"
	return 1
}

units=(paycb-ingest@1.service paycb-ingest@2.service paycb-processor@1.service
	paycb-processor@2.service paycb-retrier.service paycb-migrate.service paycb.target)
for u in "${units[@]}"; do
	check "systemd-analyze verify $u: clean" verify_clean "$u"
done

# The checker catches what it must: a missing binary, and a directive systemd would ignore.
sed 's#^ExecStart=/usr/local/bin/paycb-retrier#ExecStart=/usr/local/bin/paycb-nonesuch#' \
	"$U/paycb-retrier.service" >"$U/paycb-broken1.service"
sed 's/^RestartSec=/RestartSecs=/' "$U/paycb-retrier.service" >"$U/paycb-broken2.service"
fails() { ! "$@" >/dev/null 2>&1; }
check "... and it rejects a unit whose binary is missing" fails verify_clean paycb-broken1.service
check "... and one with an unknown directive" fails verify_clean paycb-broken2.service
rm -f "$U/paycb-broken1.service" "$U/paycb-broken2.service"

for u in paycb-ingest@1.service paycb-processor@1.service paycb-retrier.service paycb-migrate.service; do
	out=$(cd "$U" && systemd-analyze security --offline=yes --root="$R" --threshold=20 "$u" 2>&1)
	check "systemd-analyze security $u: exposure $(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' <<<"$out") <= 2.0" test $? -eq 0
done

# Hardening and restart policy, as written in every daemon unit.
for f in paycb-ingest@.service paycb-processor@.service paycb-retrier.service \
	paycb-reconciler.service; do
	miss=()
	for want in User=paycb Group=paycb NoNewPrivileges=yes ProtectSystem=strict ProtectHome=yes \
		LimitCORE=0 \
		PrivateTmp=yes PrivateDevices=yes CapabilityBoundingSet= Restart=on-failure \
		'RestartPreventExitStatus=64 78' KillSignal=SIGTERM 'SystemCallFilter=@system-service' \
		'ExecReload=/bin/kill -HUP $MAINPID'; do
		grep -qxF -- "$want" "$U/$f" || miss+=("$want")
	done
	check "$f: hardened, Restart=on-failure, no restart on a config error, reload by SIGHUP${miss[*]:+ (missing: ${miss[*]})}" test ${#miss[@]} -eq 0
done

# TimeoutStopSec longer than the drain of the example configuration.
stop_s() { sed -n 's/^TimeoutStopSec=\([0-9]*\)$/\1/p' "$U/$1"; }
E="$R/etc/paycb"
budget_ms=$(conf_value ingest publish_budget_ms "$E/ingest-1.conf")
drain=$((budget_ms / 1000 + 5 + 10))
check "paycb-ingest@: TimeoutStopSec $(stop_s paycb-ingest@.service) > drain (publish_budget ${budget_ms} ms + 5 s + 10 s flush = ${drain} s)" \
	test "$(stop_s paycb-ingest@.service)" -gt "$drain"
read_s=$(conf_value database read_timeout_s "$E/paycb.conf")
lock_s=$(conf_value database lock_wait_timeout_s "$E/paycb.conf")
drain=$((read_s + lock_s + 10))
check "paycb-processor@: TimeoutStopSec $(stop_s paycb-processor@.service) > drain (one message: read ${read_s} s + lock wait ${lock_s} s, + 10 s flush = ${drain} s)" \
	test "$(stop_s paycb-processor@.service)" -gt "$drain"
deliv_ms=$(conf_value kafka delivery_timeout_ms "$E/paycb.conf")
drain=$((deliv_ms / 1000 + 10))
check "paycb-retrier: TimeoutStopSec $(stop_s paycb-retrier.service) > drain (a publish ${deliv_ms} ms + 10 s flush = ${drain} s)" \
	test "$(stop_s paycb-retrier.service)" -gt "$drain"

# What each instance's ExecStart names exists in the installed tree.
for u in paycb-ingest@1 paycb-ingest@2 paycb-processor@1 paycb-processor@2; do
	inst=${u#*@} tmpl="${u%@*}@.service"
	conf=$(sed -n 's/^ExecStart=.* -c \([^ ]*\).*/\1/p' "$U/$tmpl")
	conf=${conf//%i/$inst}
	check "$u.service reads $conf, which make install put there" test -f "$R$conf"
done

# Layout and modes.
mode() { stat -c %a "$1" 2>/dev/null; }
check "configuration directory 0750" test "$(mode "$E")" = 750
check "secrets directory 0700" test "$(mode "$E/secrets")" = 700
bad=()
for f in "$E"/*.conf "$E"/examples/*.conf; do
	[[ $(mode "$f") == 640 ]] || bad+=("${f#"$R"}")
done
check "every installed configuration file is 0640${bad[*]:+ (not: ${bad[*]})}" test ${#bad[@]} -eq 0
check "the example configuration is installed (paycb.conf, ingest-1.conf, processor-1.conf)" \
	test -f "$E/paycb.conf" -a -f "$E/ingest-1.conf" -a -f "$E/processor-1.conf"
bad=()
for p in paycb-ingest paycb-processor paycb-retrier paycb-migrate paycbctl; do
	[[ $(mode "$R/usr/local/bin/$p") == 755 ]] || bad+=("$p")
done
check "the programs are installed 0755${bad[*]:+ (not: ${bad[*]})}" test ${#bad[@]} -eq 0
check "paycb-sim (a development tool) is not installed" test ! -e "$R/usr/local/bin/paycb-sim"
check "paycb-bench (a development tool) is not installed" test ! -e "$R/usr/local/bin/paycb-bench"
check "the schemas are installed where paycb-migrate.service looks" \
	test -f "$R/usr/local/share/paycb/schemas/001_callback_logs.sql" -a -f "$R/usr/local/share/paycb/schemas/topics.tsv"
out=$(systemd-sysusers --root="$R" --dry-run "$R/usr/local/lib/sysusers.d/paycb.conf" 2>&1)
check "the sysusers entry creates user and group paycb (systemd-sysusers --dry-run)" \
	contains "$out" "Creating user 'paycb'" || diag "$out"

# An existing configuration is kept; the new example lands next to it.
echo "# edited by the operator" >>"$E/paycb.conf"
out=$(make -s --no-print-directory install DESTDIR="$R" PREFIX=/usr/local 2>&1)
check "make install again keeps an edited paycb.conf" grep -q '^# edited by the operator' "$E/paycb.conf"
check "... and refreshes examples/paycb.conf" bash -c '! grep -q "^# edited" "$1"' _ "$E/examples/paycb.conf"

# Another PREFIX and SYSCONFDIR: every path in the units and the @include follows. A PREFIX
# outside /usr and /usr/local is not on systemd's unit path, so the units go to
# /etc/systemd/system (UNITDIR), as docs/operations.md says.
R2="$T/root2"
out=$(make -s --no-print-directory install DESTDIR="$R2" PREFIX=/opt/paycb SYSCONFDIR=/srv/etc \
	UNITDIR=/etc/systemd/system 2>&1)
check "make install PREFIX=/opt/paycb SYSCONFDIR=/srv/etc UNITDIR=/etc/systemd/system" test $? -eq 0 || diag "$out"
U2="$R2/etc/systemd/system"
check "ExecStart and -c follow PREFIX and SYSCONFDIR" grep -qxF \
	"ExecStart=/opt/paycb/bin/paycb-ingest -c /srv/etc/paycb/ingest-%i.conf" "$U2/paycb-ingest@.service"
check "paycb-migrate.service reads the schemas under the new PREFIX" grep -qF \
	-e "-s /opt/paycb/share/paycb/schemas" "$U2/paycb-migrate.service"
check "the instance configurations include the relocated paycb.conf" grep -qxF \
	'@include "/srv/etc/paycb/paycb.conf"' "$R2/srv/etc/paycb/ingest-1.conf"
left=$(grep -rnE '(^|[^a-z])(/usr/local/|/etc/paycb)' "$U2" "$R2/srv/etc/paycb")
check "no unit or configuration still names /usr/local or /etc/paycb" test -z "$left" || diag "$left"
mkdir -p "$R2/usr/lib/systemd" "$R2/bin" && cp -a /usr/lib/systemd/system "$R2/usr/lib/systemd/" &&
	cp /bin/kill "$R2/bin/kill"
out=$(cd "$U2" && systemd-analyze verify --root="$R2" paycb-ingest@1.service paycb-processor@1.service \
	paycb-retrier.service paycb-migrate.service 2>&1)
check "systemd-analyze verify of the relocated units: clean" test $? -eq 0 -a -z "$out" || diag "$out"
done_testing
