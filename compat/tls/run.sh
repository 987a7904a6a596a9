#!/usr/bin/env bash
# Compat suite (issue 15): real clients over TLS and SASL. Starts its own broker — highwater,
# or Apache Kafka 4.1.1 through compat/kafka-ref/start.sh — with five listeners configured
# with Kafka's own keys: PLAINTEXT, SSL (a PEM keystore, ssl.keystore.type=PEM), MTLS (SSL
# with listener.name.mtls.ssl.client.auth=required against a PEM truststore),
# SASL_PLAINTEXT and SASL_SSL (PLAIN users from the listeners' JAAS configs, SCRAM-SHA-256
# and SCRAM-SHA-512 users made with kafka-configs, OAUTHBEARER with Kafka's unsecured-JWT
# validator on SASL_PLAINTEXT and signed tokens checked against a JSON Web Key Set on
# SASL_SSL, where OAUTHBEARER sessions last 5 s, so clients re-authenticate). Certificates are made here with openssl
# (compat/lib/certs.sh): a CA, the broker's (SAN localhost and 127.0.0.1), a client's, and
# a stranger CA's. Then kcat (librdkafka 2.0.2), confluent-kafka (librdkafka 2.16, through
# compat/kcat/pykcat.py) and Kafka's console producer and consumer (Java, PEM stores,
# JAAS) produce and consume over SSL, MTLS, and SASL with each mechanism; a client that
# does not trust the CA, has no certificate on MTLS, or a wrong password, is refused; and
# kafka-python, kafkajs and franz-go each produce and consume over MTLS and over SASL_SSL
# with PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and a signed OAUTHBEARER token; a delegation
# token made with kafka-delegation-tokens logs in (Java, franz-go) until it is expired.
# Usage: compat/tls/run.sh highwater|kafka
# Environment: HIGHWATER_BIN (default ./target/release/highwater).
set -euo pipefail

broker="${1:?usage: compat/tls/run.sh highwater|kafka}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
test_suite_name="tls-$broker"
# shellcheck source=../lib/testlib.sh source-path=SCRIPTDIR
source "$root/compat/lib/testlib.sh"
# shellcheck source=../lib/secured_broker.sh source-path=SCRIPTDIR
source "$root/compat/lib/secured_broker.sh"
for ca in ca stranger-ca; do
    make_ca "$ca"
done
make_cert broker ca "/CN=broker" "DNS:localhost,IP:127.0.0.1"
make_cert client ca "/CN=client"
make_cert stranger stranger-ca "/CN=stranger"
# OAUTHBEARER tokens signed by the "idp" key, whose key set the broker trusts on SASL_SSL,
# and one signed by a key it does not know. Java reads files only from allowed URLs.
make_signed_token alice alice kafka idp
make_signed_token forged alice kafka stranger-idp
allowed="org.apache.kafka.sasl.oauthbearer.allowed.urls=file:$certs/idp.jwks.json"
allowed+=",file:$certs/alice.jwt,file:$certs/forged.jwt"
export KAFKA_REF_JAVA_OPTS="-D$allowed" KAFKA_TOOL_JAVA_OPTS="-D$allowed"

ssl_port="$(free_port)"
mtls_port="$(free_port)"
sasl_port="$(free_port)"
sasl_ssl_port="$(free_port)"
map="PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
map+=",CONTROLLER:PLAINTEXT"
plain_jaas='org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
scram_jaas='org.apache.kafka.common.security.scram.ScramLoginModule required;'
oauth_jaas='org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;'
keys=(
    "listener.security.protocol.map=$map"
    "inter.broker.listener.name=PLAINTEXT"
    "ssl.keystore.type=PEM"
    "ssl.keystore.location=$certs/broker.pem"
    "ssl.truststore.type=PEM"
    "ssl.truststore.location=$certs/ca.crt"
    "listener.name.mtls.ssl.client.auth=required"
    "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"
    "listener.name.sasl_ssl.oauthbearer.connections.max.reauth.ms=5000"
    "listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
    "sasl.oauthbearer.jwks.endpoint.url=file:$certs/idp.jwks.json"
    "sasl.oauthbearer.expected.audience=kafka"
    # Kafka 4.1's default validator does not check signatures; the broker's does.
    "sasl.oauthbearer.jwt.validator.class=org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator"
    # Delegation tokens (the secret every node shares).
    "delegation.token.secret.key=compat-token-secret"
)
for l in sasl_plaintext sasl_ssl; do
    keys+=("listener.name.$l.plain.sasl.jaas.config=$plain_jaas"
        "listener.name.$l.scram-sha-256.sasl.jaas.config=$scram_jaas"
        "listener.name.$l.scram-sha-512.sasl.jaas.config=$scram_jaas"
        "listener.name.$l.oauthbearer.sasl.jaas.config=$oauth_jaas")
done
secured="SSL://127.0.0.1:$ssl_port,MTLS://127.0.0.1:$mtls_port"
secured+=",SASL_PLAINTEXT://127.0.0.1:$sasl_port,SASL_SSL://127.0.0.1:$sasl_ssl_port"
start_secured_broker "$broker" "$secured" "${keys[@]}"

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

configs() {
    kafka_tool kafka.admin.ConfigCommand --bootstrap-server "$plain" "$@"
}

# SCRAM users are made through the PLAINTEXT listener (AlterUserScramCredentials): bob has
# both mechanisms, one request each (Kafka refuses a user twice in one request).
for mechanism in SCRAM-SHA-256 SCRAM-SHA-512; do
    configs --alter --entity-type users --entity-name bob \
        --add-config "$mechanism=[iterations=4096,password=bob-secret]" \
        >"$test_tmp/scram.out" 2>&1 || fail "cannot make SCRAM user bob: $(cat "$test_tmp/scram.out")"
done

# sasl ADDRESS PROTOCOL MECHANISM USER PASSWORD: the client options of a SASL login.
sasl() {
    local protocol="$2"
    printf '%s\n' -X "security.protocol=$protocol" -X "sasl.mechanisms=$3" \
        -X "sasl.username=$4" -X "sasl.password=$5"
    [[ "$protocol" != sasl_ssl ]] || printf '%s\n' -X "ssl.ca.location=$certs/ca.crt"
}

# Produces three lines to a new topic and reads them back, logged in as USER with
# MECHANISM over the SASL listener at PORT; Metadata there names that port.
produce_and_consume_over_sasl() {
    local tool="$1" port="$2" protocol="$3" mechanism="$4" user="$5" password="$6"
    local topic="sasl-$1-$RANDOM" opts got meta
    mapfile -t opts < <(sasl "127.0.0.1:$port" "$protocol" "$mechanism" "$user" "$password")
    printf 'one\ntwo\nthree\n' | rdkafka "$tool" "127.0.0.1:$port" "${opts[@]}" -P -t "$topic"
    got="$(rdkafka "$tool" "127.0.0.1:$port" "${opts[@]}" -C -t "$topic" -o beginning -e -q)"
    assert_eq $'one\ntwo\nthree' "$got" "records read back over $protocol with $mechanism"
    meta="$(rdkafka "$tool" "127.0.0.1:$port" "${opts[@]}" -L -t "$topic")"
    grep -q "127.0.0.1:$port" <<<"$meta" || fail "metadata names the SASL port: $meta"
}

# Produces and reads back three lines over SASL_PLAINTEXT with OAUTHBEARER: librdkafka
# makes an unsecured JWT for User:alice, which the broker's unsecured validator (Kafka's
# default) accepts.
produce_and_consume_with_oauthbearer() {
    local tool="$1" topic="oauth-$1-$RANDOM" got
    local opts=(-X security.protocol=sasl_plaintext -X sasl.mechanisms=OAUTHBEARER
        -X enable.sasl.oauthbearer.unsecure.jwt=true -X sasl.oauthbearer.config=principal=alice)
    printf 'one\ntwo\nthree\n' | rdkafka "$tool" "127.0.0.1:$sasl_port" "${opts[@]}" -P -t "$topic"
    got="$(rdkafka "$tool" "127.0.0.1:$sasl_port" "${opts[@]}" -C -t "$topic" -o beginning -e -q)"
    assert_eq $'one\ntwo\nthree' "$got" "records read back with OAUTHBEARER"
}

# oauth_properties TOKEN: a Java client's config for OAUTHBEARER over SASL_SSL with the
# signed token $certs/TOKEN.jwt (Kafka's OAuthBearerLoginCallbackHandler reading a file:
# token endpoint).
oauth_properties() {
    printf 'security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\n'
    printf 'sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;\n'
    printf 'sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\n'
    printf 'sasl.oauthbearer.token.endpoint.url=file:%s\n' "$certs/$1.jwt"
    printf 'ssl.truststore.type=PEM\nssl.truststore.location=%s\n' "$certs/ca.crt"
}

# Kafka's console producer and consumer log in over SASL_SSL with an RS256 token the
# broker checks against its JSON Web Key Set (OAuthBearerValidatorCallbackHandler), where
# sessions last 5 s (listener.name.sasl_ssl.oauthbearer.connections.max.reauth.ms): the
# producer sends a line a second for 12 s and the consumer reads all 12, both
# re-authenticating as they go (KIP-368) instead of being cut off. A token signed by a key
# outside the set is refused with RFC 7628's error.
java_oauthbearer_re_authenticates() {
    local topic="oauth-java-$RANDOM" got
    oauth_properties alice >"$test_tmp/oauth.properties"
    for i in $(seq 1 12); do
        echo "line-$i"
        sleep 1
    done | kafka_tool org.apache.kafka.tools.ConsoleProducer \
        --bootstrap-server "127.0.0.1:$sasl_ssl_port" --topic "$topic" \
        --producer.config "$test_tmp/oauth.properties" >"$test_tmp/producer.out" 2>&1 ||
        fail "the producer failed: $(tail -5 "$test_tmp/producer.out")"
    got="$(kafka_tool org.apache.kafka.tools.consumer.ConsoleConsumer \
        --bootstrap-server "127.0.0.1:$sasl_ssl_port" --topic "$topic" --from-beginning \
        --max-messages 12 --timeout-ms 30000 --consumer.config "$test_tmp/oauth.properties" \
        2>"$test_tmp/consumer.err")" || fail "the consumer failed: $(tail -5 "$test_tmp/consumer.err")"
    assert_eq "$(seq -f 'line-%g' 1 12)" "$got" "all 12 lines across re-authentications"
    if grep -qiE "authentication failed|disconnected" "$test_tmp/producer.out"; then
        fail "the producer was cut off: $(grep -iE 'authentication|disconnect' "$test_tmp/producer.out" | head -3)"
    fi
    oauth_properties forged >"$test_tmp/forged.properties"
    if kafka_tool org.apache.kafka.tools.TopicCommand --bootstrap-server \
        "127.0.0.1:$sasl_ssl_port" --command-config "$test_tmp/forged.properties" --list \
        >"$test_tmp/forged.out" 2>&1; then
        fail "a token signed by an unknown key was accepted: $(cat "$test_tmp/forged.out")"
    fi
    grep -qF '{"status":"invalid_token"}' "$test_tmp/forged.out" ||
        fail "no authentication error for a forged token: $(tail -3 "$test_tmp/forged.out")"
}

# A wrong password gets no metadata (within 15 s), with PLAIN and with SCRAM.
wrong_passwords_are_refused() {
    local tool="$1" RDKAFKA_TIMEOUT=15 mechanism user opts
    for mechanism in PLAIN SCRAM-SHA-256; do
        user=alice
        [[ "$mechanism" == PLAIN ]] || user=bob
        mapfile -t opts < <(sasl "127.0.0.1:$sasl_port" sasl_plaintext "$mechanism" "$user" wrong)
        if rdkafka "$tool" "127.0.0.1:$sasl_port" "${opts[@]}" -L -m 5 >"$test_tmp/out" 2>&1; then
            fail "$mechanism with a wrong password got metadata: $(cat "$test_tmp/out")"
        fi
    done
}

# Java clients' configs (JAAS, as Java clients take them): bob with SCRAM-SHA-512 over
# SASL_SSL, alice with PLAIN over SASL_PLAINTEXT.
{
    printf 'security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n'
    printf 'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="bob" password="bob-secret";\n'
    printf 'ssl.truststore.type=PEM\nssl.truststore.location=%s\n' "$certs/ca.crt"
} >"$test_tmp/bob.properties"
{
    printf 'security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n'
    printf 'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";\n'
} >"$test_tmp/alice.properties"

# java_console_roundtrip WHAT PRODUCER_PORT PRODUCER_CONFIG CONSUMER_PORT CONSUMER_CONFIG:
# Kafka's console producer sends two lines to a new topic, its console consumer reads them.
java_console_roundtrip() {
    local topic="java-$RANDOM" got
    printf 'a\nb\n' | kafka_tool org.apache.kafka.tools.ConsoleProducer \
        --bootstrap-server "127.0.0.1:$2" --topic "$topic" --producer.config "$3"
    got="$(kafka_tool org.apache.kafka.tools.consumer.ConsoleConsumer \
        --bootstrap-server "127.0.0.1:$4" --topic "$topic" --from-beginning \
        --max-messages 2 --timeout-ms 30000 --consumer.config "$5")"
    assert_eq $'a\nb' "$got" "$1"
}

# Kafka's console producer with SCRAM-SHA-512 over SASL_SSL, the console consumer with
# PLAIN over SASL_PLAINTEXT.
java_console_tools_over_sasl() {
    java_console_roundtrip "the console consumer reads the console producer's records" \
        "$sasl_ssl_port" "$test_tmp/bob.properties" "$sasl_port" "$test_tmp/alice.properties"
}

# kafka-configs lists bob's SCRAM mechanisms; once SCRAM-SHA-256 is deleted, a login with
# it is refused and one with SCRAM-SHA-512 still works.
scram_users_are_described_and_deleted() {
    local out opts RDKAFKA_TIMEOUT=15
    configs --alter --entity-type users --entity-name carol \
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=carol-secret]' >/dev/null
    configs --alter --entity-type users --entity-name carol \
        --add-config 'SCRAM-SHA-512=[password=carol-secret]' >/dev/null
    out="$(configs --describe --entity-type users --entity-name carol)"
    echo "$out"
    grep -qF "SCRAM credential configs for user-principal 'carol' are " <<<"$out" ||
        fail "describe: $out"
    for info in SCRAM-SHA-256=iterations=8192 SCRAM-SHA-512=iterations=4096; do
        grep -qF "$info" <<<"$out" || fail "describe lacks $info: $out"
    done
    configs --alter --entity-type users --entity-name carol --delete-config SCRAM-SHA-256 >/dev/null
    mapfile -t opts < <(sasl x sasl_plaintext SCRAM-SHA-256 carol carol-secret)
    if rdkafka rdkafka216 "127.0.0.1:$sasl_port" "${opts[@]}" -L >"$test_tmp/out" 2>&1; then
        fail "a deleted SCRAM-SHA-256 credential still logs in: $(cat "$test_tmp/out")"
    fi
    mapfile -t opts < <(sasl x sasl_plaintext SCRAM-SHA-512 carol carol-secret)
    rdkafka rdkafka216 "127.0.0.1:$sasl_port" "${opts[@]}" -L >/dev/null ||
        fail "SCRAM-SHA-512 no longer logs in"
}

# tokens ARGS...: kafka-delegation-tokens (Kafka's DelegationTokenCommand) on the SASL_SSL
# listener, logged in as bob with SCRAM-SHA-512.
tokens() {
    kafka_tool org.apache.kafka.tools.DelegationTokenCommand \
        --bootstrap-server "127.0.0.1:$sasl_ssl_port" --command-config "$test_tmp/bob.properties" "$@"
}

# token_properties ID HMAC: a Java client's config logging in with a delegation token.
token_properties() {
    printf 'security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n'
    printf 'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="%s" password="%s" tokenauth="true";\n' "$1" "$2"
    printf 'ssl.truststore.type=PEM\nssl.truststore.location=%s\n' "$certs/ca.crt"
}

# bob (SCRAM) makes a delegation token with kafka-delegation-tokens, renewable by alice;
# Kafka's console producer and franz-go log in with it (SCRAM, tokenauth) and produce and
# consume as bob; it may not make tokens itself; it is described, renewed by alice (PLAIN),
# expired by bob, and then no longer logs in.
delegation_tokens_log_in_until_expired() {
    local out id hmac
    out="$(tokens --create --max-life-time-period -1 --renewer-principal User:alice 2>&1)" ||
        fail "kafka-delegation-tokens --create failed: $out"
    echo "$out"
    read -r id hmac _ < <(grep -E '^[A-Za-z0-9_-]{22} ' <<<"$out")
    [[ -n "$id" && -n "$hmac" ]] || fail "no token in: $out"
    grep -qE "User:bob +User:bob +\[User:alice\]" <<<"$out" || fail "owner, requester, renewers: $out"
    token_properties "$id" "$hmac" >"$test_tmp/token.properties"
    java_console_roundtrip "the console tools logged in with the token" \
        "$sasl_ssl_port" "$test_tmp/token.properties" "$sasl_ssl_port" "$test_tmp/token.properties"
    roundtrip franz-go "$sasl_ssl_port" --mechanism SCRAM-SHA-512 --user "$id" \
        --password "$hmac" --delegation-token
    if kafka_tool org.apache.kafka.tools.DelegationTokenCommand \
        --bootstrap-server "127.0.0.1:$sasl_ssl_port" --command-config "$test_tmp/token.properties" \
        --create --max-life-time-period -1 >"$test_tmp/nested.out" 2>&1; then
        fail "a token-authenticated client made a token: $(cat "$test_tmp/nested.out")"
    fi
    grep -q "DelegationTokenRequestNotAllowed\|not allowed" "$test_tmp/nested.out" ||
        fail "no DELEGATION_TOKEN_REQUEST_NOT_ALLOWED: $(tail -3 "$test_tmp/nested.out")"
    # Without --owner-principal the tool sends an empty owner list, which both brokers
    # answer with no token (Kafka's ownersListEmpty); alice sees bob's token as a renewer.
    out="$(tokens --describe --owner-principal User:alice 2>&1)"
    grep -qF "$id" <<<"$out" || fail "describe does not list the token: $out"
    out="$(tokens --describe 2>&1)"
    grep -qF "Total number of tokens : 0" <<<"$out" || fail "describe for no owner: $out"
    out="$(kafka_tool org.apache.kafka.tools.DelegationTokenCommand \
        --bootstrap-server "127.0.0.1:$sasl_port" --command-config "$test_tmp/alice.properties" \
        --renew --renew-time-period 60000 --hmac "$hmac" 2>&1)" || fail "alice cannot renew: $out"
    grep -q "Completed renew operation" <<<"$out" || fail "renew: $out"
    out="$(tokens --expire --expiry-time-period -1 --hmac "$hmac" 2>&1)" || fail "expire: $out"
    grep -q "Completed expire operation" <<<"$out" || fail "expire: $out"
    local ROUNDTRIP_ERR_LINES=2
    if (roundtrip franz-go "$sasl_ssl_port" --mechanism SCRAM-SHA-512 --user "$id" \
        --password "$hmac" --delegation-token) >"$test_tmp/expired.out" 2>&1; then
        fail "an expired token still logs in: $(cat "$test_tmp/expired.out")"
    fi
}

# librdkafka before 2.6.1 sends its client nonce twice in the SCRAM client-final message
# (librdkafka#4895); Kafka 4 refuses it (the strict check of CVE-2024-56128), and so does
# highwater. SCRAM is therefore tried with confluent-kafka's librdkafka 2.16 and Java, and
# Debian's kcat (librdkafka 2.0.2) is checked to be refused, as by Kafka.
old_librdkafka_scram_is_refused() {
    local opts RDKAFKA_TIMEOUT=15
    mapfile -t opts < <(sasl x sasl_plaintext SCRAM-SHA-256 bob bob-secret)
    if kcat -b "127.0.0.1:$sasl_port" "${opts[@]}" -L -m 5 >"$test_tmp/out" 2>&1; then
        fail "librdkafka 2.0.2's SCRAM nonce was accepted: $(cat "$test_tmp/out")"
    fi
}

for tool in kcat rdkafka216; do
    run_test "$tool: produce and consume over SASL_PLAINTEXT with PLAIN" \
        produce_and_consume_over_sasl "$tool" "$sasl_port" sasl_plaintext PLAIN alice alice-secret
done
run_test "rdkafka216: produce and consume over SASL_PLAINTEXT with SCRAM-SHA-256" \
    produce_and_consume_over_sasl rdkafka216 "$sasl_port" sasl_plaintext SCRAM-SHA-256 bob bob-secret
run_test "rdkafka216: produce and consume over SASL_SSL with SCRAM-SHA-512" \
    produce_and_consume_over_sasl rdkafka216 "$sasl_ssl_port" sasl_ssl SCRAM-SHA-512 bob bob-secret
run_test "rdkafka216: wrong passwords are refused (PLAIN, SCRAM)" wrong_passwords_are_refused rdkafka216
for tool in kcat rdkafka216; do
    run_test "$tool: produce and consume with OAUTHBEARER (unsecured JWT)" \
        produce_and_consume_with_oauthbearer "$tool"
done
run_test "java: console tools with a signed OAUTHBEARER token re-authenticate every 5 s" \
    java_oauthbearer_re_authenticates
run_test "kcat: librdkafka 2.0.2's repeated SCRAM nonce is refused, as by Kafka 4" \
    old_librdkafka_scram_is_refused
run_test "java: console producer with SCRAM over SASL_SSL, console consumer with PLAIN" \
    java_console_tools_over_sasl
run_test "kafka-configs: SCRAM users described; a deleted mechanism no longer logs in" \
    scram_users_are_described_and_deleted
for tool in kcat rdkafka216; do
    run_test "$tool: produce and consume over SSL" produce_and_consume_over_ssl "$tool"
    run_test "$tool: a client that does not trust the CA is refused" untrusted_is_refused "$tool"
    run_test "$tool: mTLS admits only trusted client certificates" \
        mtls_admits_only_trusted_certificates "$tool"
done
run_test "java: console producer over SSL, console consumer over mTLS" \
    java_console_tools_over_ssl_and_mtls

# roundtrip CLIENT PORT ARGS...: kafka-python, kafkajs or franz-go (compat/tls/clients/,
# compat/go/cmd/secure-roundtrip) produce three lines to a new topic over the TLS listener
# at PORT, trusting the CA, and read them back; ARGS add a client certificate or a login.
roundtrip() {
    local client="$1" port="$2" topic="roundtrip-$1-$RANDOM" cmd got
    shift 2
    case "$client" in
        kafka-python) cmd=("$py" "$here/clients/kafka_python.py") ;;
        kafkajs) cmd=(node "$here/clients/kafkajs.js") ;;
        franz-go) cmd=("$test_tmp/secure-roundtrip") ;;
    esac
    got="$(timeout 90 "${cmd[@]}" --bootstrap "127.0.0.1:$port" --topic "$topic" \
        --ca "$certs/ca.crt" "$@" 2>"$test_tmp/roundtrip.err")" ||
        fail "$client failed: $(tail -${ROUNDTRIP_ERR_LINES:-5} "$test_tmp/roundtrip.err")"
    assert_eq $'one\ntwo\nthree' "$got" "$client read its records back"
}

(cd "$root/compat/go" && go build -o "$test_tmp/secure-roundtrip" ./cmd/secure-roundtrip) ||
    fail "cannot build compat/go/cmd/secure-roundtrip"
for client in kafka-python kafkajs franz-go; do
    run_test "$client: produce and consume over mTLS with a client certificate" \
        roundtrip "$client" "$mtls_port" --cert "$certs/client.crt" --key "$certs/client.key"
    run_test "$client: produce and consume over SASL_SSL with PLAIN" \
        roundtrip "$client" "$sasl_ssl_port" --mechanism PLAIN --user alice --password alice-secret
    for mechanism in SCRAM-SHA-256 SCRAM-SHA-512; do
        run_test "$client: produce and consume over SASL_SSL with $mechanism" \
            roundtrip "$client" "$sasl_ssl_port" --mechanism "$mechanism" --user bob \
            --password bob-secret
    done
    run_test "$client: produce and consume over SASL_SSL with a signed OAUTHBEARER token" \
        roundtrip "$client" "$sasl_ssl_port" --mechanism OAUTHBEARER --token-file "$certs/alice.jwt"
done
run_test "kafka-delegation-tokens: a token made by bob logs in (Java, franz-go) until expired" \
    delegation_tokens_log_in_until_expired
broker_log_tail
suite_summary
