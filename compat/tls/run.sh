#!/usr/bin/env bash
# Compat suite (issue 15): real clients over TLS. Starts its own broker — highwater, or Apache
# Kafka 4.1.1 through compat/kafka-ref/start.sh — with three listeners configured with
# Kafka's own keys: PLAINTEXT, SSL (a PEM keystore, ssl.keystore.type=PEM) and MTLS (SSL with
# listener.name.mtls.ssl.client.auth=required against a PEM truststore). Certificates are
# made here with openssl: a CA, the broker's (SAN localhost and 127.0.0.1), a client's, and
# a stranger CA's. Then kcat (librdkafka 2.0.2), confluent-kafka (librdkafka 2.16, through
# compat/kcat/pykcat.py) and Kafka's console producer and consumer (Java, PEM stores)
# produce and consume over SSL and MTLS; a client that does not trust the CA, or has no
# certificate on MTLS, is refused.
# Usage: compat/tls/run.sh highwater|kafka
# Environment: HIGHWATER_BIN (default ./target/release/highwater).
set -euo pipefail

broker="${1:?usage: compat/tls/run.sh highwater|kafka}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
py="$root/compat/.venv/bin/python"
test_suite_name="tls-$broker"
# shellcheck source=../lib/testlib.sh source-path=SCRIPTDIR
source "$root/compat/lib/testlib.sh"
command -v kcat >/dev/null || fail "kcat is not installed; run compat/install-deps.sh"
[[ -x "$py" ]] || fail "no $py; run compat/install-deps.sh"

free_port() {
    "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

certs="$test_tmp/certs"
mkdir -p "$certs"
# make_cert NAME CA SUBJECT [SAN]: NAME.key (PKCS#8, unencrypted), NAME.crt signed by CA,
# and NAME.pem (key then certificate), which is what a PEM keystore file holds.
make_cert() {
    local name="$1" ca="$2" subject="$3" san="${4:-}"
    openssl req -new -newkey rsa:2048 -nodes -keyout "$certs/$name.key" -subj "$subject" \
        -out "$certs/$name.csr" 2>/dev/null
    # Extensions make it an X.509 v3 certificate (rustls, like browsers, refuses v1).
    printf 'basicConstraints=CA:FALSE\n' >"$certs/$name.ext"
    [[ -z "$san" ]] || printf 'subjectAltName=%s\n' "$san" >>"$certs/$name.ext"
    openssl x509 -req -in "$certs/$name.csr" -CA "$certs/$ca.crt" -CAkey "$certs/$ca.key" \
        -CAcreateserial -days 2 -out "$certs/$name.crt" -extfile "$certs/$name.ext" 2>/dev/null
    cat "$certs/$name.key" "$certs/$name.crt" >"$certs/$name.pem"
}
for ca in ca stranger-ca; do
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=highwater compat $ca" \
        -keyout "$certs/$ca.key" -out "$certs/$ca.crt" 2>/dev/null
done
make_cert broker ca "/CN=broker" "DNS:localhost,IP:127.0.0.1"
make_cert client ca "/CN=client"
make_cert stranger stranger-ca "/CN=stranger"

ssl_port="$(free_port)"
mtls_port="$(free_port)"
map="PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,CONTROLLER:PLAINTEXT"
keys=(
    "listener.security.protocol.map=$map"
    "inter.broker.listener.name=PLAINTEXT"
    "ssl.keystore.type=PEM"
    "ssl.keystore.location=$certs/broker.pem"
    "ssl.truststore.type=PEM"
    "ssl.truststore.location=$certs/ca.crt"
    "listener.name.mtls.ssl.client.auth=required"
)
case "$broker" in
    highwater)
        plain_port="$(free_port)"
        bin="${HIGHWATER_BIN:-$root/target/release/highwater}"
        sets=()
        for kv in "${keys[@]}"; do sets+=(--set "$kv"); done
        listeners="PLAINTEXT://127.0.0.1:$plain_port,SSL://127.0.0.1:$ssl_port"
        listeners+=",MTLS://127.0.0.1:$mtls_port"
        "$bin" serve --config "$root/config/server.toml" --listeners "$listeners" \
            --log-dirs "$test_tmp/data" --set http.listeners= "${sets[@]}" \
            >"$test_tmp/broker.log" 2>&1 </dev/null &
        broker_pid=$!
        trap 'kill -TERM $broker_pid 2>/dev/null; wait $broker_pid 2>/dev/null; rm -rf "$test_tmp"' EXIT
        ;;
    kafka)
        plain_port="${KAFKA_REF_PORT:-19092}"
        controller_port="${KAFKA_REF_CONTROLLER_PORT:-19093}"
        extra="listeners=PLAINTEXT://127.0.0.1:$plain_port,CONTROLLER://127.0.0.1:$controller_port"
        extra+=",SSL://127.0.0.1:$ssl_port,MTLS://127.0.0.1:$mtls_port"
        extra+=$'\n'"advertised.listeners=PLAINTEXT://127.0.0.1:$plain_port"
        extra+=",SSL://127.0.0.1:$ssl_port,MTLS://127.0.0.1:$mtls_port"
        for kv in "${keys[@]}"; do extra+=$'\n'"$kv"; done
        KAFKA_REF_EXTRA_CONFIG="$extra" "$root/compat/kafka-ref/start.sh"
        trap '"$root/compat/kafka-ref/stop.sh"; rm -rf "$test_tmp"' EXIT
        ;;
    *) fail "unknown broker $broker (highwater or kafka)" ;;
esac
plain="127.0.0.1:$plain_port"
for _ in $(seq 1 150); do
    kcat -L -b "$plain" -m 2 >/dev/null 2>&1 && break
    sleep 0.2
done
kcat -L -b "$plain" -m 5 >/dev/null 2>&1 || {
    [[ -f "$test_tmp/broker.log" ]] && tail -n 30 "$test_tmp/broker.log" >&2
    fail "the broker does not answer on $plain"
}

ssl=(-X security.protocol=ssl -X "ssl.ca.location=$certs/ca.crt")
client_cert=(-X "ssl.certificate.location=$certs/client.crt" -X "ssl.key.location=$certs/client.key")

# rdkafka TOOL ADDRESS ARGS...: kcat (librdkafka 2.0.2) or pykcat (2.16), bounded in time.
rdkafka() {
    local tool="$1" address="$2"
    shift 2
    case "$tool" in
        kcat) timeout "${RDKAFKA_TIMEOUT:-60}" kcat -b "$address" "$@" ;;
        rdkafka216)
            # pykcat has no -q (it is quiet) and no -m (its own timeout).
            local args=() skip=0 a
            for a in "$@"; do
                if ((skip)); then skip=0; continue; fi
                case "$a" in -q) ;; -m) skip=1 ;; *) args+=("$a") ;; esac
            done
            timeout "${RDKAFKA_TIMEOUT:-60}" "$py" "$root/compat/kcat/pykcat.py" -b "$address" \
                "${args[@]}"
            ;;
    esac
}

# Produces three lines to a new topic over SSL and reads them back over SSL; Metadata on
# the SSL listener names the SSL port.
produce_and_consume_over_ssl() {
    local tool="$1" topic="tls-$1-$RANDOM"
    printf 'one\ntwo\nthree\n' | rdkafka "$tool" "127.0.0.1:$ssl_port" "${ssl[@]}" -P -t "$topic"
    local got
    got="$(rdkafka "$tool" "127.0.0.1:$ssl_port" "${ssl[@]}" -C -t "$topic" -o beginning -e -q)"
    assert_eq $'one\ntwo\nthree' "$got" "records read back over TLS"
    local meta
    meta="$(rdkafka "$tool" "127.0.0.1:$ssl_port" "${ssl[@]}" -L -t "$topic")"
    grep -q "127.0.0.1:$ssl_port" <<<"$meta" || fail "metadata on SSL names the SSL port: $meta"
}

# A client trusting another CA gets no metadata (within 15 s).
untrusted_is_refused() {
    local tool="$1" RDKAFKA_TIMEOUT=15
    if rdkafka "$tool" "127.0.0.1:$ssl_port" -X security.protocol=ssl \
        -X "ssl.ca.location=$certs/stranger-ca.crt" -L -m 5 >"$test_tmp/out" 2>&1; then
        fail "a client that does not trust the broker's CA got metadata: $(cat "$test_tmp/out")"
    fi
}

# On MTLS a client with a certificate of the CA is served; one without, or with a
# stranger's certificate, is not (within 15 s).
mtls_admits_only_trusted_certificates() {
    local tool="$1" topic="mtls-$1-$RANDOM"
    echo hello | rdkafka "$tool" "127.0.0.1:$mtls_port" "${ssl[@]}" "${client_cert[@]}" -P -t "$topic"
    local got
    got="$(rdkafka "$tool" "127.0.0.1:$mtls_port" "${ssl[@]}" "${client_cert[@]}" -C -t "$topic" \
        -o beginning -e -q)"
    assert_eq hello "$got" "record read back over mTLS"
    local RDKAFKA_TIMEOUT=15
    if rdkafka "$tool" "127.0.0.1:$mtls_port" "${ssl[@]}" -L -m 5 >"$test_tmp/out" 2>&1; then
        fail "a client without a certificate got metadata: $(cat "$test_tmp/out")"
    fi
    if rdkafka "$tool" "127.0.0.1:$mtls_port" "${ssl[@]}" \
        -X "ssl.certificate.location=$certs/stranger.crt" \
        -X "ssl.key.location=$certs/stranger.key" -L -m 5 >"$test_tmp/out" 2>&1; then
        fail "a client with an untrusted certificate got metadata: $(cat "$test_tmp/out")"
    fi
}

kafka_tool() {
    timeout 120 java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
        "-Dlog4j2.configurationFile=$root/compat/java/tools-log4j2.properties" \
        -cp "$root/.kafka-ref/libs/*" "$@"
}

# Kafka's console producer over SSL (PEM truststore) and console consumer over MTLS (PEM
# keystore holding the client's key and certificate).
java_console_tools_over_ssl_and_mtls() {
    local topic="tls-java-$RANDOM"
    printf 'security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location=%s\n' \
        "$certs/ca.crt" >"$test_tmp/ssl.properties"
    cp "$test_tmp/ssl.properties" "$test_tmp/mtls.properties"
    printf 'ssl.keystore.type=PEM\nssl.keystore.location=%s\n' "$certs/client.pem" \
        >>"$test_tmp/mtls.properties"
    printf 'a\nb\n' | kafka_tool org.apache.kafka.tools.ConsoleProducer \
        --bootstrap-server "127.0.0.1:$ssl_port" --topic "$topic" \
        --producer.config "$test_tmp/ssl.properties"
    local got
    got="$(kafka_tool org.apache.kafka.tools.consumer.ConsoleConsumer \
        --bootstrap-server "127.0.0.1:$mtls_port" --topic "$topic" --from-beginning \
        --max-messages 2 --timeout-ms 30000 --consumer.config "$test_tmp/mtls.properties")"
    assert_eq $'a\nb' "$got" "the console consumer reads the console producer's records"
}

for tool in kcat rdkafka216; do
    run_test "$tool: produce and consume over SSL" produce_and_consume_over_ssl "$tool"
    run_test "$tool: a client that does not trust the CA is refused" untrusted_is_refused "$tool"
    run_test "$tool: mTLS admits only trusted client certificates" \
        mtls_admits_only_trusted_certificates "$tool"
done
run_test "java: console producer over SSL, console consumer over mTLS" \
    java_console_tools_over_ssl_and_mtls
if ((tests_failed > 0)) && [[ -f "$test_tmp/broker.log" ]]; then
    echo "---------- end of the highwater log ----------"
    tail -n 40 "$test_tmp/broker.log"
fi
suite_summary
