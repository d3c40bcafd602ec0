#!/usr/bin/env bash
# tests/ops/test_nginx_tls.sh - deploy/nginx/paycb.conf in front of a real paycb-ingest.
#
# Debian's nginx runs in the foreground with its own prefix, config, pid and logs in a temp
# dir, on a free loopback port, with a CA and a server certificate made here by openssl; the
# shipped site file is used as it is, with only its ports, certificate and log paths
# replaced. Behind it: a paycb-ingest of this test's own (database paycb_test_nginx_<pid>,
# topic prefix t<pid>_nginx) and, as the second upstream, a port nobody listens on (an
# instance that is stopped). Through HTTPS (curl --cacert) it proves that notifications of all
# three channels signed with keys made here still verify and are stored (the bytes arrive
# untouched, over HTTP/2 and over chunked HTTP/1.1), that tampered ones are still rejected
# and store nothing, that the body limit is ingest's exactly (64 KiB passes, one byte more
# is refused by nginx), that the stopped upstream costs nothing, and that only the callback
# routes are served. Stripe and Alipay are signed here with openssl; WeChat Pay needs
# AES-256-GCM, which the openssl command cannot do, so tests/ops/ops_wxsign.c signs those
# through the channel library's signer (chan/). About 10 s.
# shellcheck disable=SC2015 # "a && b || bail": bail whichever failed
set -uo pipefail
# shellcheck source=tests/ops/lib.sh
. "$(dirname "$0")/lib.sh"

for tool in nginx openssl curl mariadb python3 cc; do
	command -v "$tool" >/dev/null || bail "$tool is installed (apt-get install nginx curl openssl mariadb-client)"
done
[[ -x bin/paycb-ingest && -x bin/paycb-migrate ]] || bail "bin/paycb-ingest and bin/paycb-migrate are built"
ops_services || bail "the local services' configuration $PAYCB_TEST_CONF is readable"

HTTPS=$(free_port) PORT=$(free_port) ADMIN=$(free_port) DEAD=$(free_port)
DB="paycb_test_nginx_$$"
PREFIX="t$$_nginx"
HOST=pay.example.com
mkdir -p "$T/keys" "$T/tls" "$T/log" "$T/tmp"

# ---- keys of the three channels, made now -----------------------------------------------
openssl genrsa -out "$T/keys/wx_platform.key" 2048 2>/dev/null &&
	openssl rsa -in "$T/keys/wx_platform.key" -pubout -out "$T/keys/wx_pub.pem" 2>/dev/null &&
	openssl genrsa -out "$T/keys/alipay.key" 2048 2>/dev/null &&
	openssl rsa -in "$T/keys/alipay.key" -pubout -out "$T/keys/alipay_pub.pem" 2>/dev/null ||
	bail "openssl makes the channel keys"
WX_SERIAL=PUB_KEY_ID_0114232134912410000000000000000001
printf '%s' "abcdefghijklmnopqrstuvwxyz012345" >"$T/keys/apiv3.key"
STRIPE_SECRET="whsec_ops_$(openssl rand -hex 16)"
printf '%s\n' "$STRIPE_SECRET" >"$T/keys/stripe_whsec"
chmod 600 "$T/keys/apiv3.key" "$T/keys/stripe_whsec" # ingest refuses shared secrets
ALI_APP=2021000000000001

# ---- the ingest behind nginx --------------------------------------------------------------
cat >"$T/paycb.conf" <<EOF
log_level = "info";
database = { host = "$DB_HOST"; port = $DB_PORT; user = "$DB_USER";
  password_file = "$DB_PASSWORD_FILE"; name = "$DB"; };
kafka = { brokers = "$KAFKA_BROKERS"; topic_prefix = "$PREFIX"; partitions = 1;
  delivery_timeout_ms = 5000; };
ingest = { listen_port = $PORT; admin_port = $ADMIN; max_body_bytes = 65536;
  connection_timeout_s = 10; publish_budget_ms = 1500; };
merchants = (
  { id = "shop1";
    wxpay = { mchid = "1900000001"; apiv3_key_file = "$T/keys/apiv3.key";
      keys = ( { serial = "$WX_SERIAL"; file = "$T/keys/wx_pub.pem"; } ); };
    alipay = { app_id = "$ALI_APP"; public_key_files = [ "$T/keys/alipay_pub.pem" ]; };
    stripe = { secret_files = [ "$T/keys/stripe_whsec" ]; };
  }
);
EOF
ops_at_exit "sql '' 'DROP DATABASE IF EXISTS \`$DB\`'"
out=$(bin/paycb-migrate -c "$T/paycb.conf" -s schemas --create-db 2>&1)
check "paycb-migrate --create-db makes database $DB and the topics" test $? -eq 0 || diag "$out"

bin/paycb-ingest -c "$T/paycb.conf" 2>"$T/log/ingest.log" &
INGEST=$!
ops_track "$INGEST"
ingest_up() { curl -s -o /dev/null "http://127.0.0.1:$PORT/"; }
if ! wait_for 20000 ingest_up; then
	diag "$(tail -20 "$T/log/ingest.log")"
	bail "paycb-ingest listens on 127.0.0.1:$PORT"
fi
ok "paycb-ingest listens on 127.0.0.1:$PORT"

# ---- a CA, a server certificate for pay.example.com, and nginx ---------------------------
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=paycb test CA" \
	-keyout "$T/tls/ca.key" -out "$T/tls/ca.pem" 2>/dev/null &&
	openssl req -newkey rsa:2048 -nodes -subj "/CN=$HOST" -keyout "$T/tls/privkey.pem" \
		-out "$T/tls/server.csr" 2>/dev/null &&
	printf 'subjectAltName=DNS:%s\nextendedKeyUsage=serverAuth\n' "$HOST" >"$T/tls/ext.cnf" &&
	openssl x509 -req -in "$T/tls/server.csr" -CA "$T/tls/ca.pem" -CAkey "$T/tls/ca.key" \
		-CAcreateserial -days 1 -extfile "$T/tls/ext.cnf" -out "$T/tls/server.pem" 2>/dev/null &&
	cat "$T/tls/server.pem" "$T/tls/ca.pem" >"$T/tls/fullchain.pem" ||
	bail "openssl makes a CA and a server certificate"

# The shipped site, with only what differs on this machine replaced; each replacement must
# match, so an edit of the site file cannot silently leave the test checking something else.
site=deploy/nginx/paycb.conf
subst() { # PATTERN REPLACEMENT: sed on $T/site.conf, failing if PATTERN is not there
	grep -qF -- "$1" "$T/site.conf" || return 1
	local p r
	p=$(printf '%s' "$1" | sed 's/[][\\.*^$#]/\\&/g')
	r=$(printf '%s' "$2" | sed 's/[\\&#]/\\&/g')
	sed -i "s#$p#$r#g" "$T/site.conf"
}
cp "$site" "$T/site.conf"
if subst "listen 443 ssl http2;" "listen 127.0.0.1:$HTTPS ssl http2;" &&
	subst "listen [::]:443 ssl http2;" "" &&
	subst "server 127.0.0.1:8481 " "server 127.0.0.1:$PORT " &&
	subst "server 127.0.0.1:8482 " "server 127.0.0.1:$DEAD " &&
	subst "/etc/ssl/paycb/" "$T/tls/" &&
	subst "/var/log/nginx/" "$T/log/"; then
	ok "the shipped site file has the listen, upstream, certificate and log lines the test replaces"
else
	not_ok "the shipped site file has the listen, upstream, certificate and log lines the test replaces"
fi
user_line=""
((EUID == 0)) && user_line="user root;"
cat >"$T/nginx.conf" <<EOF
daemon off;
master_process on;
worker_processes 1;
$user_line
pid $T/nginx.pid;
error_log $T/log/error.log info;
events { worker_connections 256; }
http {
	include /etc/nginx/mime.types;
	default_type application/octet-stream;
	client_body_temp_path $T/tmp/body;
	proxy_temp_path $T/tmp/proxy;
	fastcgi_temp_path $T/tmp/fastcgi;
	uwsgi_temp_path $T/tmp/uwsgi;
	scgi_temp_path $T/tmp/scgi;
	include $T/site.conf;
}
EOF
out=$(nginx -t -p "$T" -c "$T/nginx.conf" -e "$T/log/startup.log" 2>&1)
check "nginx -t accepts deploy/nginx/paycb.conf" test $? -eq 0 || diag "$out"
nginx -p "$T" -c "$T/nginx.conf" -e "$T/log/startup.log" 2>"$T/log/nginx.stderr" &
NGINX=$!
ops_track "$NGINX"

# https URL PATH, with the test CA and pay.example.com resolved to the loopback port.
https() {
	local path=$1
	shift
	curl -sS --cacert "$T/tls/ca.pem" --resolve "$HOST:$HTTPS:127.0.0.1" \
		--max-time 15 "$@" "https://$HOST:$HTTPS$path"
}
nginx_up() { https / -o /dev/null 2>/dev/null; }
if ! wait_for 10000 nginx_up; then
	diag "$(cat "$T/log/nginx.stderr" "$T/log/startup.log" "$T/log/error.log" 2>/dev/null | tail -20)"
	bail "nginx answers TLS on 127.0.0.1:$HTTPS"
fi
ok "nginx answers TLS on 127.0.0.1:$HTTPS with a certificate the test CA verifies"

# post CHANNEL BODYFILE HEADERFILE [curl args] - prints "<status> <http version> <body>".
post() {
	local ch=$1 body=$2 hdrs=$3
	shift 3
	https "/pay/callback/$ch/shop1" -X POST -H @"$hdrs" --data-binary @"$body" \
		-w '\n%{http_code} %{http_version}' "$@" 2>&1 |
		awk '{ l[NR] = $0 } END { printf "%s %s", l[NR], l[NR - 1] }'
}
rows() { sql "$DB" "SELECT COUNT(*) FROM $1"; }

# ---- WeChat Pay -------------------------------------------------------------------------
if ops_build_helper ops_wxsign 2>"$T/log/cc.log"; then
	ok "tests/ops/ops_wxsign.c builds against the daemons' libraries"
else
	not_ok "tests/ops/ops_wxsign.c builds against the daemons' libraries"
	diag "$(tail -20 "$T/log/cc.log")"
fi
wx_sign() { # ORDER TXN FEN BODY_OUT HEADERS_OUT
	local plain
	plain=$(printf '{"mchid":"1900000001","appid":"wx0000000000000001","out_trade_no":"%s","transaction_id":"%s","trade_type":"JSAPI","trade_state":"SUCCESS","trade_state_desc":"ok","bank_type":"OTHERS","success_time":"2026-12-02T10:34:56+08:00","payer":{"openid":"o1"},"amount":{"total":%s,"payer_total":%s,"currency":"CNY","payer_currency":"CNY"}}' "$1" "$2" "$3" "$3")
	"$T/ops_wxsign" "$T/keys/wx_platform.key" "$WX_SERIAL" "$T/keys/apiv3.key" \
		TRANSACTION.SUCCESS "$plain" "$4" >"$5"
}
WX_TXN="4200$$0001"
wx_sign "WX$$-1" "$WX_TXN" 8888 "$T/wx.body" "$T/wx.hdr"
r=$(post wxpay "$T/wx.body" "$T/wx.hdr")
check "signed wxpay notification through nginx (HTTP/2): 204 (got '$r')" test "${r%% *}" = 204
check "the TLS side spoke HTTP/2" test "$(cut -d' ' -f2 <<<"$r")" = 2
check "the wxpay row is stored" test "$(rows "pay_callback_log WHERE channel_trade_no = '$WX_TXN' AND amount = 88.88")" = 1
r=$(post wxpay "$T/wx.body" "$T/wx.hdr")
check "the same notification again: 204, still one row" \
	test "${r%% *}" = 204 -a "$(rows "pay_callback_log WHERE channel_trade_no = '$WX_TXN'")" = 1

wx_sign "WX$$-2" "4200$$0002" 100 "$T/wx2.body" "$T/wx2.hdr"
# One byte of the ciphertext changed after signing (A <-> B).
sed -i 's/"ciphertext":"\(.\)/"ciphertext":"\1X/' "$T/wx2.body"
r=$(post wxpay "$T/wx2.body" "$T/wx2.hdr")
check "tampered wxpay notification through nginx: 401 (got '$r')" test "${r%% *}" = 401
check "the tampered wxpay notification stored nothing" test "$(rows "pay_callback_log WHERE channel_trade_no = '4200$$0002'")" = 0

# ---- Alipay (RSA2 over the sorted, decoded parameters; openssl signs) ---------------------
urlencode() {
	local LC_ALL=C s=$1 i c out=""
	for ((i = 0; i < ${#s}; i++)); do
		c=${s:i:1}
		case $c in
		[A-Za-z0-9._~-]) out+=$c ;;
		*) out+=$(printf '%%%02X' "'$c") ;;
		esac
	done
	printf '%s' "$out"
}
ali_sign() { # TRADE ORDER AMOUNT BODY_OUT
	local -a k=(notify_time notify_type notify_id app_id charset version trade_no out_trade_no trade_status total_amount subject)
	local -a v=("2026-12-02 10:00:00" trade_status_sync "N$1" "$ALI_APP" utf-8 1.0 "$1" "$2" TRADE_SUCCESS "$3" "ops test & = + %")
	local content sig body i
	content=$(for i in "${!k[@]}"; do printf '%s=%s\n' "${k[i]}" "${v[i]}"; done | LC_ALL=C sort | paste -sd '&')
	sig=$(printf '%s' "$content" | openssl dgst -sha256 -sign "$T/keys/alipay.key" | openssl base64 -A)
	body=""
	for i in "${!k[@]}"; do body+="${k[i]}=$(urlencode "${v[i]}")&"; done
	printf '%ssign_type=RSA2&sign=%s' "$body" "$(urlencode "$sig")" >"$4"
}
printf 'Content-Type: application/x-www-form-urlencoded; charset=utf-8\n' >"$T/ali.hdr"
ALI_TRADE="2026120222001$$01"
ali_sign "$ALI_TRADE" "AL$$-1" 12.34 "$T/ali.body"
r=$(post alipay "$T/ali.body" "$T/ali.hdr")
check "signed alipay notification through nginx: 200 success (got '$r')" test "$r" = "200 2 success" -o "$r" = "200 2.0 success"
check "the alipay row is stored" test "$(rows "pay_callback_log WHERE channel_trade_no = '$ALI_TRADE' AND amount = 12.34")" = 1
ali_sign "2026120222001$$02" "AL$$-2" 12.34 "$T/ali2.body"
sed -i 's/total_amount=12.34/total_amount=1234.00/' "$T/ali2.body"
r=$(post alipay "$T/ali2.body" "$T/ali.hdr")
check "alipay notification with the amount changed after signing: 400 fail (got '$r')" test "${r%% *}" = 400
check "the tampered alipay notification stored nothing" test "$(rows "pay_callback_log WHERE channel_trade_no = '2026120222001$$02'")" = 0

# ---- Stripe (HMAC-SHA256 over "t.body"; openssl signs) ------------------------------------
stripe_sign() { # PI ORDER CENTS BODY_OUT HEADERS_OUT
	local t mac
	t=$(date +%s)
	printf '{"id":"evt_%s","object":"event","api_version":"2024-06-20","created":%s,"type":"payment_intent.succeeded","data":{"object":{"id":"%s","object":"payment_intent","amount":%s,"amount_received":%s,"currency":"usd","metadata":{"order_id":"%s"},"status":"succeeded"}}}' \
		"$1" "$t" "$1" "$3" "$3" "$2" >"$4"
	mac=$({ printf '%s.' "$t"; cat "$4"; } | openssl dgst -sha256 -hmac "$STRIPE_SECRET" -r | cut -d' ' -f1)
	printf 'Content-Type: application/json\nStripe-Signature: t=%s,v1=%s\n' "$t" "$mac" >"$5"
}
stripe_sign "pi_ops$$a" "ST$$-1" 4200 "$T/st.body" "$T/st.hdr"
r=$(post stripe "$T/st.body" "$T/st.hdr")
check "signed stripe notification through nginx: 200 (got '$r')" test "${r%% *}" = 200
check "the stripe row is stored" test "$(rows "pay_callback_log WHERE channel_trade_no = 'pi_ops$$a' AND amount = 42.00")" = 1
stripe_sign "pi_ops$$b" "ST$$-2" 4200 "$T/st2.body" "$T/st2.hdr"
r=$(post stripe "$T/st2.body" "$T/st2.hdr" --http1.1 -H 'Transfer-Encoding: chunked')
check "signed stripe notification sent chunked over HTTP/1.1: 200 (nginx re-frames, bytes unchanged) (got '$r')" \
	test "${r%% *}" = 200 -a "$(rows "pay_callback_log WHERE channel_trade_no = 'pi_ops$$b'")" = 1
stripe_sign "pi_ops$$c" "ST$$-3" 4200 "$T/st3.body" "$T/st3.hdr"
sed -i 's/"amount":4200/"amount":9900/' "$T/st3.body"
r=$(post stripe "$T/st3.body" "$T/st3.hdr")
check "stripe notification changed after signing: 400 (got '$r')" test "${r%% *}" = 400
check "the tampered stripe notification stored nothing" test "$(rows "pay_callback_log WHERE channel_trade_no = 'pi_ops$$c'")" = 0

# ---- limits and routes ----------------------------------------------------------------------
metric() { curl -s "http://127.0.0.1:$ADMIN/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
head -c 65536 /dev/zero | tr '\0' 'a' >"$T/64k.body"
head -c 65537 /dev/zero | tr '\0' 'a' >"$T/64k1.body"
r=$(post stripe "$T/64k.body" "$T/st.hdr")
check "a 64 KiB body passes nginx and is judged by ingest (400, not 413) (got '$r')" test "${r%% *}" = 400
before=$(metric 'paycb_ingest_http_errors_total{kind="too_large"}')
r=$(post stripe "$T/64k1.body" "$T/st.hdr")
check "64 KiB + 1 byte: 413 from nginx (got '$r')" test "${r%% *}" = 413
check "... and ingest never saw it" test "$(metric 'paycb_ingest_http_errors_total{kind="too_large"}')" = "$before"
r=$(https /healthz -o /dev/null -w '%{http_code}')
check "the admin routes are not served through nginx (/healthz: 404, got $r)" test "$r" = 404
r=$(https /pay/callback/stripe/shop1 -o /dev/null -w '%{http_code}')
check "GET on a callback route reaches ingest: 405 (got $r)" test "$r" = 405
check "the stopped second upstream was tried and skipped (connection refused in nginx's log)" \
	grep -q "connect() failed (111: Connection refused) while connecting to upstream.*127.0.0.1:$DEAD" "$T/log/paycb-error.log"
check "ingest counted the stored notifications (wxpay 1, alipay 1, stripe 2)" test \
	"$(metric 'paycb_ingest_requests_total{channel="wxpay",outcome="stored"}')$(metric 'paycb_ingest_requests_total{channel="alipay",outcome="stored"}')$(metric 'paycb_ingest_requests_total{channel="stripe",outcome="stored"}')" = 112
check "nginx's access log names the client address" grep -q '^127\.0\.0\.1 .*"POST /pay/callback/wxpay/shop1 HTTP/2.0" 204' "$T/log/paycb-access.log"

kill -TERM "$INGEST"
wait "$INGEST"
check "paycb-ingest drains and exits 0 on SIGTERM" test $? -eq 0
done_testing
