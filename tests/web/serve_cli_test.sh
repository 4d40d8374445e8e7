#!/usr/bin/env bash
# `meshwork serve` as built, off loopback, against real clients: the TLS it speaks (openssl
# s_client's certificate has the fingerprint serve printed; curl -k gets answers), plain HTTP
# refused on that port, a rebinding Host refused, --insecure-http as the one way to plain HTTP,
# and the TLS flags' mistakes named.
#
#   tests/web/serve_cli_test.sh PATH/TO/meshwork
set -uo pipefail
MW="${1:?usage: serve_cli_test.sh MESHWORK_BINARY}"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/meshwork-serve-test.XXXXXX")"
SERVER=""
cleanup() { [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null; wait 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
failures=0
checks=0
check() {  # check WHAT COMMAND...: the command succeeds
  local what="$1"; shift
  checks=$((checks + 1))
  if ! "$@"; then echo "FAIL: $what"; failures=$((failures + 1)); fi
}
export XDG_CONFIG_HOME="$TMP/config" XDG_DATA_HOME="$TMP/data"  # never the user's own
DB="$TMP/runs.db"
"$MW" runs list --db "$DB" > /dev/null || { echo "FAIL: cannot make a store"; exit 1; }

# start ARGS...: meshwork serve in the background; waits (at most 20 s) for its link line.
start() {
  "$MW" serve --db "$DB" --token-file "$TMP/token" "$@" > "$TMP/out" 2> "$TMP/err" &
  SERVER=$!
  for _ in $(seq 200); do
    grep -q '^meshwork serve: ' "$TMP/out" 2>/dev/null && grep -q 'open once' "$TMP/out" && break
    kill -0 "$SERVER" 2>/dev/null || break
    sleep 0.1
  done
  URL="$(sed -n 's/^meshwork serve: \([^ ]*\)\/ .*/\1/p' "$TMP/out")"
  PORT="${URL##*:}"
}
stop() { kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null; SERVER=""; }

# --- off loopback: TLS with a self-signed certificate, its fingerprint printed ---------------------
start --listen 0.0.0.0:0
check "serve printed an https URL: $(cat "$TMP/out" "$TMP/err")" grep -q '^https://' <<< "$URL"
PRINTED="$(sed -n 's/.*SHA-256 fingerprint \([0-9A-F:]*\).*/\1/p' "$TMP/out")"
check "serve printed a fingerprint" test "${#PRINTED}" = 95
SEEN="$(openssl s_client -connect "127.0.0.1:$PORT" -servername localhost < /dev/null 2> /dev/null |
        openssl x509 -noout -fingerprint -sha256 | sed 's/.*=//')"
check "the certificate served ($SEEN) is the one printed ($PRINTED)" test "$SEEN" = "$PRINTED"
TOKEN="$(head -1 "$TMP/token")"
code="$(curl -sk -o "$TMP/body" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "https://127.0.0.1:$PORT/api/runs")"
check "curl -k with the token: 200 (got $code)" test "$code" = 200
check "the runs list came back" grep -q '"runs"' "$TMP/body"
code="$(curl -sk -o /dev/null -w '%{http_code}' "https://127.0.0.1:$PORT/api/runs")"
check "without the token: 401 (got $code)" test "$code" = 401
code="$(curl -sk -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
        -H "Host: rebind.attacker.example:$PORT" "https://127.0.0.1:$PORT/api/runs")"
check "a rebinding Host: 421 (got $code)" test "$code" = 421
curl -s -m 5 -o "$TMP/plain" -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT/api/runs"
rc=$?
check "plain HTTP to the TLS port is not answered (curl exit $rc)" test "$rc" != 0
check "plain HTTP read nothing" test ! -s "$TMP/plain"
stop

# --- plain HTTP off loopback only by name ----------------------------------------------------------
start --listen 0.0.0.0:0 --insecure-http
check "--insecure-http serves http" grep -q '^http://' <<< "$URL"
check "--insecure-http warns" grep -q 'plain HTTP off loopback' "$TMP/out"
code="$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT/api/runs")"
check "plain HTTP with --insecure-http: 200 (got $code)" test "$code" = 200
stop

# --- limits from the command line (on loopback: no token) ------------------------------------------
start_local() {
  "$MW" serve --db "$DB" --token-file "$TMP/token" --listen 127.0.0.1:0 "$@" > "$TMP/out" 2> "$TMP/err" &
  SERVER=$!
  for _ in $(seq 200); do
    grep -q '^meshwork serve: ' "$TMP/out" 2>/dev/null && break
    kill -0 "$SERVER" 2>/dev/null || break
    sleep 0.1
  done
  URL="$(sed -n 's/^meshwork serve: \([^ ]*\)\/ .*/\1/p' "$TMP/out")"
  PORT="${URL##*:}"
}
# clients PORT N: N keep-alive connections from this address, each asks /api/runs once and
# reads the answer; then prints whether the first one is still open (the server closes the
# longest-idle connection of a client at its cap).
clients() {
  python3 - "$1" "$2" <<'PY'
import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
def ask(s):
    s.sendall(b"GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = [l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
    while length and len(body) < int(length[0]):
        body += s.recv(65536)
    return head.split(b"\r\n")[0].decode()
conns = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    print("connection", i, ask(s))
    conns.append(s)
conns[0].settimeout(4)
try:
    print("first: closed by the server" if conns[0].recv(1) == b"" else "first: open")
except (socket.timeout, ConnectionResetError) as e:
    print("first: open" if isinstance(e, socket.timeout) else "first: closed by the server")
PY
}
start_local --max-connections-per-client 2
clients "$PORT" 3 > "$TMP/limits" 2>&1
check "the third connection was answered: $(cat "$TMP/limits")" grep -q '^connection 2 HTTP/1.1 200' "$TMP/limits"
check "--max-connections-per-client 2: the longest-idle of three gave way" grep -q 'first: closed by the server' "$TMP/limits"
stop
start_local --idle-timeout 1
clients "$PORT" 1 > "$TMP/limits" 2>&1
check "--idle-timeout 1: an idle connection is closed: $(cat "$TMP/limits")" grep -q 'first: closed by the server' "$TMP/limits"
stop
start_local
clients "$PORT" 3 > "$TMP/limits" 2>&1
check "by default three connections of one client stay open: $(cat "$TMP/limits")" grep -q 'first: open' "$TMP/limits"
stop

# --- flag mistakes ---------------------------------------------------------------------------------
"$MW" serve --db "$DB" --token-file "$TMP/token" --listen 0.0.0.0:0 --tls-cert "$TMP/nope.pem" > "$TMP/out" 2> "$TMP/err"
check "--tls-cert without --tls-key is refused (exit $?)" grep -q -- '--tls-key: missing: --tls-cert FILE and --tls-key FILE go together' "$TMP/err"
"$MW" serve --db "$DB" --public-name 'bad name:80' > "$TMP/out" 2> "$TMP/err"
check "a bad --public-name is refused" grep -q -- '--public-name: bad name:80' "$TMP/err"

"$MW" serve --db "$DB" --max-connections 0 > "$TMP/out" 2> "$TMP/err"
check "--max-connections 0 is refused" grep -q -- '--max-connections: 0: a whole number of connections, at least 8' "$TMP/err"
"$MW" serve --db "$DB" --max-connections 16 --max-connections-per-client 32 > "$TMP/out" 2> "$TMP/err"
check "more per client than in all is refused" grep -q -- '--max-connections-per-client: 32: at most --max-connections (16)' "$TMP/err"
"$MW" serve --db "$DB" --idle-timeout 1.5 > "$TMP/out" 2> "$TMP/err"
check "--idle-timeout 1.5 is refused" grep -q -- '--idle-timeout: 1.5: whole seconds' "$TMP/err"

echo "$checks checks, $failures failed"
[ "$failures" = 0 ]
