#!/usr/bin/env bash
# Compat suite (issue 15): ACLs with Kafka's StandardAuthorizer, managed with Kafka's
# kafka-acls and obeyed by real clients. Starts its own broker — highwater, or Apache Kafka
# 4.1.1 through compat/kafka-ref/start.sh — with authorizer.class.name set, three client
# listeners (PLAINTEXT, whose User:ANONYMOUS is the super user that administers, as the
# inter-broker and controller principal must be in Kafka; SASL_PLAINTEXT with PLAIN users
# alice and bob; MTLS, SSL requiring a client certificate whose subject is the principal),
# and no ACL at first. Then: kafka-acls --producer and --consumer bindings let alice
# produce and consume with confluent-kafka (librdkafka 2.16) and nothing else; a DENY
# binding wins over an ALLOW; a removed binding no longer grants; a certificate subject
# (User:CN=client) is granted by its own binding over mTLS with kcat, another subject is
# refused; on a second mTLS listener (MAPPED) ssl.principal.mapping.rules map the subject
# (User:cert-client) and a subject no rule maps is not served; kafka-acls --list shows what
# was added. Certificates come from compat/lib/certs.sh.
# Usage: compat/acl/run.sh highwater|kafka
# Environment: HIGHWATER_BIN (default ./target/release/highwater).
set -euo pipefail

broker="${1:?usage: compat/acl/run.sh highwater|kafka}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
test_suite_name="acl-$broker"
# shellcheck source=../lib/testlib.sh source-path=SCRIPTDIR
source "$root/compat/lib/testlib.sh"
# shellcheck source=../lib/secured_broker.sh source-path=SCRIPTDIR
source "$root/compat/lib/secured_broker.sh"
make_ca ca
make_cert broker ca "/CN=broker" "DNS:localhost,IP:127.0.0.1"
make_cert client ca "/CN=client"
make_cert other ca "/O=elsewhere/CN=other"

mtls_port="$(free_port)"
mapped_port="$(free_port)"
sasl_port="$(free_port)"
map="PLAINTEXT:PLAINTEXT,MTLS:SSL,MAPPED:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT"
jaas='org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" user_bob="bob-secret";'
keys=(
    "listener.security.protocol.map=$map"
    "inter.broker.listener.name=PLAINTEXT"
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    "super.users=User:ANONYMOUS"
    "ssl.keystore.type=PEM"
    "ssl.keystore.location=$certs/broker.pem"
    "ssl.truststore.type=PEM"
    "ssl.truststore.location=$certs/ca.crt"
    "listener.name.mtls.ssl.client.auth=required"
    "listener.name.mapped.ssl.client.auth=required"
    'listener.name.mapped.ssl.principal.mapping.rules=RULE:^CN=([^,]+)$/cert-$1/L'
    "sasl.enabled.mechanisms=PLAIN"
    "listener.name.sasl_plaintext.plain.sasl.jaas.config=$jaas"
)
secured="MTLS://127.0.0.1:$mtls_port,MAPPED://127.0.0.1:$mapped_port"
secured+=",SASL_PLAINTEXT://127.0.0.1:$sasl_port"
start_secured_broker "$broker" "$secured" "${keys[@]}"

acls() {
    kafka_tool org.apache.kafka.tools.AclCommand --bootstrap-server "$plain" "$@"
}

topics() {
    kafka_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$plain" "$@"
}

# as USER ARGS...: confluent-kafka (librdkafka 2.16, compat/kcat/pykcat.py) logged in as USER
# with PLAIN over SASL_PLAINTEXT, bounded to 20 s.
as() {
    local user="$1"
    shift
    timeout 20 "$py" "$root/compat/kcat/pykcat.py" -b "127.0.0.1:$sasl_port" \
        -X security.protocol=sasl_plaintext -X sasl.mechanisms=PLAIN \
        -X "sasl.username=$user" -X "sasl.password=$user-secret" "$@"
}

# with_cert NAME ARGS...: kcat over the MTLS listener with certificate NAME, bounded to 20 s
# (over the MAPPED listener when PORT=$mapped_port).
with_cert() {
    local name="$1"
    shift
    timeout 20 kcat -b "127.0.0.1:${PORT:-$mtls_port}" -X security.protocol=ssl \
        -X "ssl.ca.location=$certs/ca.crt" -X "ssl.certificate.location=$certs/$name.crt" \
        -X "ssl.key.location=$certs/$name.key" "$@"
}

# refused WHAT COMMAND...: COMMAND (reading the caller's stdin) fails, and says so with an
# authorization error.
refused() {
    local what="$1"
    shift
    if "$@" >"$test_tmp/out" 2>&1; then
        fail "$what was allowed: $(cat "$test_tmp/out")"
    fi
    grep -qiE "authoriz" "$test_tmp/out" || fail "$what: no authorization error: $(cat "$test_tmp/out")"
}

# Until an ACL names her, alice may not produce; kafka-acls --producer lets her produce to
# that topic only, and --list shows the bindings it made.
producer_acls_grant_one_topic() {
    local topic="acl-orders-$RANDOM" other="acl-other-$RANDOM" listed
    topics --create --topic "$topic" --partitions 1 >/dev/null
    topics --create --topic "$other" --partitions 1 >/dev/null
    refused "alice producing without an ACL" as alice -P -t "$topic" <<<"one"
    acls --add --allow-principal User:alice --producer --topic "$topic" >/dev/null
    listed="$(acls --list --topic "$topic")"
    for operation in WRITE DESCRIBE CREATE; do
        grep -q "principal=User:alice, host=\*, operation=$operation, permissionType=ALLOW" \
            <<<"$listed" || fail "--list lacks alice's $operation: $listed"
    done
    printf 'one\ntwo\n' | as alice -P -t "$topic"
    refused "alice producing to another topic" as alice -P -t "$other" <<<"three"
    refused "bob producing" as bob -P -t "$topic" <<<"four"
}

# kafka-acls --consumer grants a topic and a group: alice reads in that group, not another.
consumer_acls_grant_a_topic_and_a_group() {
    local topic="acl-read-$RANDOM" got
    topics --create --topic "$topic" --partitions 1 >/dev/null
    printf 'a\nb\n' | kcat -b "$plain" -P -t "$topic"
    acls --add --allow-principal User:alice --consumer --topic "$topic" --group readers >/dev/null
    got="$(as alice -G readers "$topic" -X auto.offset.reset=earliest -e)"
    assert_eq $'a\nb' "$got" "alice reads in group readers"
    refused "alice reading in group strangers" \
        as alice -G strangers "$topic" -X auto.offset.reset=earliest -e </dev/null
}

# A DENY binding wins over an ALLOW one; removing it gives the access back.
deny_wins_and_removal_restores() {
    local topic="acl-deny-$RANDOM"
    topics --create --topic "$topic" --partitions 1 >/dev/null
    acls --add --allow-principal User:bob --operation All --topic "$topic" >/dev/null
    printf 'x\n' | as bob -P -t "$topic"
    acls --add --deny-principal User:bob --operation Write --topic "$topic" >/dev/null
    refused "bob writing against a DENY" as bob -P -t "$topic" <<<"y"
    acls --remove --force --deny-principal User:bob --operation Write --topic "$topic" >/dev/null
    printf 'z\n' | as bob -P -t "$topic"
}

# Over mTLS the principal is the certificate's subject: User:CN=client reads what its
# binding allows; the certificate O=elsewhere/CN=other (User:CN=other,O=elsewhere) does not.
certificate_subjects_are_principals() {
    local topic="acl-cert-$RANDOM" got
    topics --create --topic "$topic" --partitions 1 >/dev/null
    printf 'c\n' | kcat -b "$plain" -P -t "$topic"
    acls --add --allow-principal "User:CN=client" --operation Read --topic "$topic" >/dev/null
    got="$(with_cert client -C -t "$topic" -o beginning -e -q)"
    assert_eq "c" "$got" "User:CN=client reads"
    refused "User:CN=other,O=elsewhere reading" \
        with_cert other -C -t "$topic" -o beginning -e </dev/null
    acls --add --allow-principal "User:CN=other,O=elsewhere" --operation Read \
        --topic "$topic" >/dev/null
    got="$(with_cert other -C -t "$topic" -o beginning -e -q)"
    assert_eq "c" "$got" "User:CN=other,O=elsewhere reads once named"
}

# On the MAPPED listener, ssl.principal.mapping.rules name the principal: CN=client is
# User:cert-client, granted by that name; CN=other,O=elsewhere matches no rule, so Kafka
# fails its authentication and kcat gets no metadata at all.
mapping_rules_name_certificate_principals() {
    local topic="acl-mapped-$RANDOM" got
    topics --create --topic "$topic" --partitions 1 >/dev/null
    printf 'm\n' | kcat -b "$plain" -P -t "$topic"
    acls --add --allow-principal "User:cert-client" --operation Read --topic "$topic" >/dev/null
    got="$(PORT=$mapped_port with_cert client -C -t "$topic" -o beginning -e -q)"
    assert_eq "m" "$got" "User:cert-client reads"
    if PORT=$mapped_port with_cert other -L -m 5 >"$test_tmp/out" 2>&1; then
        fail "a subject no rule maps was served: $(cat "$test_tmp/out")"
    fi
}

run_test "kafka-acls --producer: alice produces to that topic only" producer_acls_grant_one_topic
run_test "kafka-acls --consumer: alice consumes in that group only" \
    consumer_acls_grant_a_topic_and_a_group
run_test "kafka-acls: a DENY wins over an ALLOW, and --remove restores" \
    deny_wins_and_removal_restores
run_test "kcat over mTLS: the certificate subject is the principal" \
    certificate_subjects_are_principals
run_test "kcat over mTLS: ssl.principal.mapping.rules name the principal" \
    mapping_rules_name_certificate_principals
broker_log_tail
suite_summary
