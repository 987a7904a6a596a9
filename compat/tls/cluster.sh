#!/usr/bin/env bash
# Compat suite (issue 15): a three-node cluster whose traffic between nodes is secured.
# Starts three combined nodes — highwater (config/cluster/node-N.toml), or Apache Kafka
# 4.1.1 through compat/kafka-ref/cluster.sh — each with a third listener, INTERNAL, the
# inter-broker one, configured with Kafka's own keys: SASL_SSL with a PEM keystore and
# truststore, client certificates required, PLAIN (the brokers' own login from the
# listener's JAAS config, sasl.mechanism.inter.broker.protocol=PLAIN); the controller
# listener is SSL with client certificates required (the quorum, broker registrations and
# heartbeats); clients use the PLAINTEXT listener.
# Certificates are made here with openssl (compat/lib/certs.sh). Then kcat (librdkafka)
# produces with acks=all to an RF=3 topic, every partition keeps all three replicas in its
# ISR past replica.lag.time.max.ms, and after kill -9 of a leader the records are read back
# from the two survivors; and kafka-metadata-quorum describes the quorum over the SSL
# controller listener with a client certificate.
# Usage: compat/tls/cluster.sh highwater|kafka
# Environment: HIGHWATER_BIN (default ./target/release/highwater).
set -euo pipefail

broker="${1:?usage: compat/tls/cluster.sh highwater|kafka}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
test_suite_name="tls-cluster-$broker"
# shellcheck source=../lib/testlib.sh source-path=SCRIPTDIR
source "$root/compat/lib/testlib.sh"
# shellcheck source=../lib/secured_broker.sh source-path=SCRIPTDIR
source "$root/compat/lib/secured_broker.sh"
# shellcheck source=../lib/free_ports.sh source-path=SCRIPTDIR
source "$root/compat/lib/free_ports.sh"

make_ca ca
make_cert broker ca "/CN=broker" "DNS:localhost,IP:127.0.0.1"

keys=(
    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL,CONTROLLER:SSL"
    "inter.broker.listener.name=INTERNAL"
    "listener.name.controller.ssl.keystore.type=PEM"
    "listener.name.controller.ssl.keystore.location=$certs/broker.pem"
    "listener.name.controller.ssl.truststore.type=PEM"
    "listener.name.controller.ssl.truststore.location=$certs/ca.crt"
    "listener.name.controller.ssl.client.auth=required"
    "listener.name.internal.ssl.keystore.type=PEM"
    "listener.name.internal.ssl.keystore.location=$certs/broker.pem"
    "listener.name.internal.ssl.truststore.type=PEM"
    "listener.name.internal.ssl.truststore.location=$certs/ca.crt"
    "listener.name.internal.ssl.client.auth=required"
    "listener.name.internal.sasl.enabled.mechanisms=PLAIN"
    "sasl.mechanism.inter.broker.protocol=PLAIN"
    'listener.name.internal.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="broker-secret" user_broker="broker-secret";'
    "replica.lag.time.max.ms=4000"
)

mapfile -t ports < <(free_ports 9)
client_ports=("${ports[@]:0:3}")
controller_ports=("${ports[@]:3:3}")
internal_ports=("${ports[@]:6:3}")
bootstrap="127.0.0.1:${client_ports[0]},127.0.0.1:${client_ports[1]},127.0.0.1:${client_ports[2]}"
data="$test_tmp/cluster"
mkdir -p "$data"

# A node's pid: highwater's from its start, Kafka's from compat/kafka-ref/cluster.sh.
pid_of() {
    case "$broker" in
        highwater) cat "$data/node-$1.pid" ;;
        kafka) cat "$root/.kafka-ref/cluster/node-$1.pid" ;;
    esac
}

# shellcheck disable=SC2317 # run from the EXIT trap
stop_cluster() {
    case "$broker" in
        highwater)
            for node in 1 2 3; do
                kill -KILL "$(pid_of "$node")" 2>/dev/null || true
            done
            ;;
        kafka) "$root/compat/kafka-ref/cluster.sh" stop ;;
    esac
    rm -rf "$test_tmp"
}
trap stop_cluster EXIT

case "$broker" in
    highwater)
        bin="${HIGHWATER_BIN:-$root/target/release/highwater}"
        [[ -x "$bin" ]] || fail "no broker binary at $bin (make build)"
        voters="1@127.0.0.1:${controller_ports[0]},2@127.0.0.1:${controller_ports[1]}"
        voters+=",3@127.0.0.1:${controller_ports[2]}"
        sets=()
        for kv in "${keys[@]}"; do sets+=(--set "$kv"); done
        for node in 1 2 3; do
            i=$((node - 1))
            listeners="PLAINTEXT://127.0.0.1:${client_ports[i]},INTERNAL://127.0.0.1:${internal_ports[i]}"
            listeners+=",CONTROLLER://127.0.0.1:${controller_ports[i]}"
            (cd "$root" && exec "$bin" serve --config "config/cluster/node-$node.toml" \
                --listeners "$listeners" --log-dirs "$data/node-$node" --set http.listeners= \
                --set "controller.quorum.voters=$voters" "${sets[@]}") \
                >>"$data/node-$node.log" 2>&1 </dev/null &
            echo $! >"$data/node-$node.pid"
            disown $!
        done
        ;;
    kafka)
        extra="listeners=PLAINTEXT://127.0.0.1:@PORT@,INTERNAL://127.0.0.1:@EXTRA_PORT@"
        extra+=",CONTROLLER://127.0.0.1:@CONTROLLER_PORT@"
        extra+=$'\n'"advertised.listeners=PLAINTEXT://127.0.0.1:@PORT@,INTERNAL://127.0.0.1:@EXTRA_PORT@"
        for kv in "${keys[@]}"; do extra+=$'\n'"$kv"; done
        KAFKA_REF_EXTRA_CONFIG="$extra" \
            KAFKA_REF_CLUSTER_PORTS="$(IFS=,; echo "${client_ports[*]}")" \
            KAFKA_REF_CLUSTER_CONTROLLER_PORTS="$(IFS=,; echo "${controller_ports[*]}")" \
            KAFKA_REF_CLUSTER_EXTRA_PORTS="$(IFS=,; echo "${internal_ports[*]}")" \
            "$root/compat/kafka-ref/cluster.sh" start
        ;;
    *) fail "usage: compat/tls/cluster.sh highwater|kafka" ;;
esac

topic="secured-$RANDOM$RANDOM"

metadata() {
    timeout 30 kcat -b "$bootstrap" -L -t "$topic" -m 10
}

three_brokers_up() {
    for _ in $(seq 1 300); do
        timeout 30 kcat -b "$bootstrap" -L -m 10 2>/dev/null | grep -q " 3 brokers:" && return 0
        sleep 0.2
    done
    fail "the cluster never showed three brokers"
}

acks_all_records_stay_in_sync_and_survive_their_leader() {
    three_brokers_up
    # Auto-created: three partitions of three replicas (num.partitions, RF=3 defaults).
    seq 1 300 | timeout 60 kcat -b "$bootstrap" -P -t "$topic" -X acks=all
    sleep 6 # beyond replica.lag.time.max.ms: a follower that cannot fetch is out by now
    local out
    out="$(metadata)"
    echo "$out"
    [[ "$(grep -c 'replicas: [123],[123],[123],' <<<"$out")" == 3 ]] ||
        fail "three partitions of three replicas"
    [[ "$(grep -c 'isrs: [123],[123],[123]' <<<"$out")" == 3 ]] ||
        fail "every follower in every ISR (they replicate over SASL_SSL)"
    local leader
    leader="$(sed -n 's/.*partition 0, leader \([0-9]\),.*/\1/p' <<<"$out")"
    [[ -n "$leader" ]] || fail "partition 0 has a leader"
    kill -KILL "$(pid_of "$leader")"
    local got=""
    for _ in $(seq 1 60); do
        got="$(timeout 30 kcat -b "$bootstrap" -C -t "$topic" -o beginning -e -q 2>/dev/null |
            sort -n | uniq | wc -l)" || true
        [[ "$got" == 300 ]] && return 0
        sleep 1
    done
    fail "read $got of the 300 acknowledged records after node $leader was killed"
}

# kafka-metadata-quorum over the SSL controller listener with a client certificate (the
# broker's, issued by the trusted CA): three voters, a leader.
metadata_quorum_over_the_ssl_controller_listener() {
    three_brokers_up
    printf 'security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location=%s\n' \
        "$certs/ca.crt" >"$test_tmp/controller.properties"
    printf 'ssl.keystore.type=PEM\nssl.keystore.location=%s\n' "$certs/broker.pem" \
        >>"$test_tmp/controller.properties"
    local out
    out="$(kafka_tool org.apache.kafka.tools.MetadataQuorumCommand \
        --bootstrap-controller "127.0.0.1:${controller_ports[0]}" \
        --command-config "$test_tmp/controller.properties" describe --status)"
    echo "$out"
    grep -q "^LeaderId:" <<<"$out" || fail "a leader"
    grep -q "^CurrentVoters:.*\"id\": *1.*\"id\": *2.*\"id\": *3" <<<"$out" ||
        fail "three voters"
}

run_test "kafka-metadata-quorum over the SSL controller listener" \
    metadata_quorum_over_the_ssl_controller_listener
run_test "acks=all records stay in sync over SASL_SSL and survive their leader" \
    acks_all_records_stay_in_sync_and_survive_their_leader
suite_summary
