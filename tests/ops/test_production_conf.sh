#!/usr/bin/env bash
# tests/ops/test_production_conf.sh - the production example deploy/production/*.conf.
#
# The example keeps the real production paths (/etc/paycb/...), so it can be copied as it is.
# The test mirrors it into a temp dir (every "/etc/paycb/" rewritten to "<tmp>/etc/paycb/")
# and creates each file it names, of the kind the name says (secrets, a 32-byte APIv3 key,
# Stripe endpoint secrets, RSA public keys, certificates, a private key), made by openssl
# now. Then every daemon's -n must say "configuration OK" on its file, ingest must load every
# merchant key (it gets past the keys to the unreachable database), and a missing secret or
# a malformed key must be caught. The rest is the shape the
# issue asks for: TLS to the database, SASL_SSL to Kafka, several merchants with several
# keys, no secret inline, partitions >= the consumers, and ports agreeing with the nginx
# upstream and the Prometheus targets. About 3 s; no service is touched.
set -uo pipefail
# shellcheck source=tests/ops/lib.sh
. "$(dirname "$0")/lib.sh"

S=deploy/production
E="$T/etc/paycb"
mkdir -p "$E"
for f in "$S"/*.conf; do
	sed "s#/etc/paycb/#$E/#g" "$f" >"$E/${f##*/}"
done
mapfile -t files < <(grep -ho "\"$E/[^\"]*\"" "$E"/*.conf | tr -d '"' | grep -v '\.conf$' | sort -u)
check "the example names secret and key files (${#files[@]})" test "${#files[@]}" -gt 10

# make_file PATH - a file of the kind its name says (private: ingest refuses shared secrets).
make_file() {
	local p=$1 b=${1##*/}
	mkdir -p "$(dirname "$p")"
	case $b in
	*apiv3_key) openssl rand -hex 16 | tr -d '\n' >"$p" ;;
	*whsec*) printf 'whsec_%s\n' "$(openssl rand -hex 24)" >"$p" ;;
	*password) openssl rand -base64 24 >"$p" ;;
	*token) openssl rand -hex 32 >"$p" ;;
	*.key) openssl genrsa -out "$p" 2048 2>/dev/null ;;
	*pub_key.pem | *public_key*.pem)
		openssl genrsa 2048 2>/dev/null | openssl rsa -pubout -out "$p" 2>/dev/null ;;
	*.pem)
		openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=${b%.pem}" \
			-set_serial "0x$(openssl rand -hex 16)" -keyout /dev/null -out "$p" 2>/dev/null ;;
	*) return 1 ;;
	esac
	chmod 600 "$p"
}
bad=()
for p in "${files[@]}"; do make_file "$p" || bad+=("${p#"$E"/}"); done
check "every named file could be made${bad[*]:+ (unknown kind: ${bad[*]})}" test ${#bad[@]} -eq 0
chmod 0700 "$E/secrets"
find "$E/secrets" -type d -exec chmod 0700 {} + && find "$E/secrets" -type f -exec chmod 0400 {} +

# checkn PROG FILE - PROG -n on FILE prints "<file>: configuration OK" and exits 0.
checkn() {
	local out rc
	out=$("bin/$1" -n -c "$2" 2>&1)
	rc=$?
	[[ $rc -eq 0 && $out == "$2: configuration OK" ]] && return 0
	diag "$out"
	return 1
}
for f in "$E"/ingest-*.conf; do
	check "paycb-ingest -n -c ${f##*/}: configuration OK" checkn paycb-ingest "$f"
done
for f in "$E"/processor-*.conf; do
	if [[ -x bin/paycb-processor ]]; then
		check "paycb-processor -n -c ${f##*/}: configuration OK" checkn paycb-processor "$f"
	else
		skip "paycb-processor -n -c ${f##*/}: configuration OK" "bin/paycb-processor is not built"
	fi
done
check "paycb-retrier -n -c paycb.conf: configuration OK" checkn paycb-retrier "$E/paycb.conf"
# paycbctl and paycb-migrate have no -n; they load the same file with the same table.

# Every key is of the right kind: ingest loads them all (init, before any connection) and
# then finds the database down (a port nobody listens on): it logs event=db_unavailable and
# would go on to listen. It runs on free loopback ports and is stopped there.
DEAD=$(free_port)
sed -i -e "s/host = \"db.paycb.internal\";/host = \"127.0.0.1\";/" -e "s/^  port = 3306;/  port = $DEAD;/" "$E/paycb.conf"
sed -i -e "s/^  listen_port = .*/  listen_port = $(free_port);/" -e "s/^  admin_port = .*/  admin_port = $(free_port);/" \
	-e 's/^  admin_addr = .*/  admin_addr = "127.0.0.1";/' "$E/ingest-1.conf"
bin/paycb-ingest -c "$E/ingest-1.conf" 2>"$T/ingest.log" >/dev/null &
pid=$!
ops_track "$pid"
past_keys() { grep -qE 'event=(db_unavailable|listening|config_error)' "$T/ingest.log" || ! kill -0 "$pid" 2>/dev/null; }
wait_for 20000 past_keys
check "paycb-ingest loads every merchant key of the example and goes on to the database" \
	grep -q 'event=db_unavailable' "$T/ingest.log" || diag "$(tail -5 "$T/ingest.log")"
check "... and it logged no configuration error" bash -c '! grep -q "event=config_error" "$1"' _ "$T/ingest.log"
kill -TERM "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
# run_ingest FILE - exit status of paycb-ingest -c FILE (killed after 20 s).
run_ingest() {
	timeout -k 2 20 bin/paycb-ingest -c "$1" 2>"$T/ingest.log" >/dev/null
}
cp "$E/keys/shop-cn/alipay_public_key.pem" "$T/alipay.good"
echo "not a key" >"$E/keys/shop-cn/alipay_public_key.pem"
run_ingest "$E/ingest-1.conf"
rc=$?
check "a malformed Alipay public key stops ingest with 78 (got $rc)" test $rc -eq 78
cp "$T/alipay.good" "$E/keys/shop-cn/alipay_public_key.pem"

chmod 0700 "$E/secrets" && mv "$E/secrets/kafka_password" "$T/kafka_password"
out=$(bin/paycb-retrier -n -c "$E/paycb.conf" 2>&1)
rc=$?
check "a missing secret file fails -n with 78, naming it" test $rc -eq 78 -a -n "$(grep -F "kafka_password" <<<"$out")"
mv "$T/kafka_password" "$E/secrets/kafka_password"

# ---- the shape of the example ---------------------------------------------------------------
open=$(grep -nE '^ *admin_addr *= *"0\.0\.0\.0"' "$S"/*.conf)
check "no admin listener binds 0.0.0.0" test -z "$open" || diag "$open"
check "the admin listeners ask for a bearer token" grep -qE '^admin_token_file = "/etc/paycb/secrets/' "$S/paycb.conf"

P="$S/paycb.conf"
cv() { conf_value "$1" "$2" "$P"; }
check "database over TLS with the server verified (ssl_ca set, ssl_verify_server_cert true)" \
	test -n "$(cv database ssl_ca)" -a "$(cv database ssl_verify_server_cert)" = true
check "Kafka over SASL_SSL with SCRAM and a CA" test "$(cv kafka security_protocol)" = sasl_ssl -a \
	-n "$(cv kafka ssl_ca_file)" -a "$(cv kafka sasl_mechanism)" != "" -a "$(cv kafka sasl_mechanism)" != PLAIN
nm=$(grep -c '^ *id = "' "$P")
check "several merchants ($nm)" test "$nm" -ge 2
check "several keys at once for rotation: WeChat Pay, Alipay and Stripe" \
	bash -c 'grep -q "alipay_public_key.old.pem" "$1" && grep -q "stripe_whsec.old" "$1" && test "$(grep -c "file = \"/etc/paycb/keys/shop-cn/wxpay_" "$1")" -ge 2' _ "$P"
inline=$(grep -nE 'password *=|whsec_[A-Za-z0-9]|BEGIN |secret *= *"' "$S"/*.conf | grep -v '^[^:]*:[0-9]*: *#')
check "no secret is written inline" test -z "$inline" || diag "$inline"
secret_keys='password_file|sasl_password_file|apiv3_key_file|ssl_key'
outside=$(grep -nE "^ *($secret_keys) *= *\"" "$S"/*.conf | grep -v '"/etc/paycb/secrets/')
outside+=$(sed -n '/secret_files/,/\]/p' "$P" | grep -o '"[^"]*"' | grep -v '^"/etc/paycb/secrets/')
check "every secret lives in its own file under /etc/paycb/secrets" test -z "$outside" || diag "$outside"
dups=$(grep -ho '"/etc/paycb/secrets/[^"]*"' "$S"/*.conf | sort | uniq -d)
check "no two settings share a secret file" test -z "$dups" || diag "$dups"

parts=$(cv kafka partitions)
threads=0
for f in "$S"/processor-*.conf; do threads=$((threads + $(conf_value processor threads "$f"))); done
check "kafka.partitions ($parts) >= the consumers of two hosts like this one (2 x $threads threads)" \
	test "$parts" -ge $((2 * threads))

# Ports: unique on the host, and what nginx and Prometheus are told.
listen=() admin=()
for f in "$S"/ingest-*.conf; do
	listen+=("$(conf_value ingest listen_port "$f")")
	admin+=("$(conf_value ingest admin_port "$f")")
done
for f in "$S"/processor-*.conf; do admin+=("$(conf_value processor admin_port "$f")"); done
admin+=("$(cv retrier admin_port)")
admin+=("$(cv reconciler admin_port)")
all=$(printf '%s\n' "${listen[@]}" "${admin[@]}" | sort)
check "every listener of the host has a port of its own (${listen[*]} ${admin[*]})" \
	test "$(uniq <<<"$all" | wc -l)" -eq "$(wc -l <<<"$all")"
up=$(sed -n 's/^[[:space:]]*server 127\.0\.0\.1:\([0-9]*\) .*/\1/p' deploy/nginx/paycb.conf | sort | paste -sd' ')
check "nginx's upstream lists exactly the ingest instances' ports ($up)" \
	test "$up" = "$(printf '%s\n' "${listen[@]}" | sort | paste -sd' ')"
prom=$(grep -o 'paycb-1\.internal:[0-9]*' deploy/prometheus/prometheus.yml | cut -d: -f2 | sort | paste -sd' ')
check "Prometheus scrapes exactly the admin ports of a host ($prom)" \
	test "$prom" = "$(printf '%s\n' "${admin[@]}" | sort | paste -sd' ')"
done_testing
