#!/usr/bin/env bash
# Starts Apache Kafka (the reference broker, version pinned in compat/kafka-ref/pom.xml) as a
# single KRaft node that is both broker and controller, from the jars that install-deps.sh
# copied into .kafka-ref/libs. Data lives in .kafka-ref/data; stop.sh stops it and wipes it.
# When the broker answers Metadata, its bootstrap address goes to .kafka-ref/bootstrap.
#
# With --restart (what restart.sh runs), the running broker is stopped with SIGTERM and started
# again on the same address and data, without formatting: for tests of what survives a
# restart (COMPAT_RESTART_BROKER, compat/README.md).
#
# Environment: KAFKA_REF_PORT (default 19092), KAFKA_REF_CONTROLLER_PORT (default 19093),
# KAFKA_REF_START_TIMEOUT seconds (default 90), KAFKA_REF_REQUEST_LOG=1 to log every request
# (API key, version, client) to .kafka-ref/logs/requests.log, KAFKA_REF_EXTRA_CONFIG: lines
# appended to server.properties (a later key wins), e.g.
# KAFKA_REF_EXTRA_CONFIG=transaction.state.log.replication.factor=3 for a broker whose
# transaction coordinator cannot start (what the transaction tests must fail against, bounded).
# KAFKA_REF_JAVA_OPTS: more JVM options for the broker.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ref="$root/.kafka-ref"
here="$root/compat/kafka-ref"
port="${KAFKA_REF_PORT:-19092}"
controller_port="${KAFKA_REF_CONTROLLER_PORT:-19093}"
timeout_s="${KAFKA_REF_START_TIMEOUT:-90}"
bootstrap="127.0.0.1:$port"

restart=0
[[ "${1:-}" == --restart ]] && restart=1

if ! compgen -G "$ref/libs/kafka_2.13-*.jar" >/dev/null; then
    echo "kafka-ref: no Kafka jars in $ref/libs; run compat/install-deps.sh first" >&2
    exit 1
fi

request_log_level=WARN
[[ "${KAFKA_REF_REQUEST_LOG:-0}" == 1 ]] && request_log_level=DEBUG
java_opts=(-Xms256m -Xmx512m -XX:+UseG1GC -XX:MaxGCPauseMillis=20
    -Djava.awt.headless=true
    "-Dkafka.logs.dir=$ref/logs"
    "-Dkafka.request.log.level=$request_log_level"
    "-Dlog4j2.configurationFile=$here/log4j2.properties")
# Extra JVM options (e.g. -Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=file:/…).
read -r -a extra_java_opts <<<"${KAFKA_REF_JAVA_OPTS:-}"
java_opts+=("${extra_java_opts[@]}")
classpath="$ref/libs/*"
props="$ref/server.properties"

# launch: starts the broker in the background (it outlives this script) and waits until it
# answers Metadata on $bootstrap.
launch() {
    # setsid: the broker outlives this script and the make recipe line that ran it.
    setsid nohup java "${java_opts[@]}" -cp "$classpath" kafka.Kafka "$props" \
        >>"$ref/logs/stdout.log" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$ref/pid"

    start_s=$SECONDS
    until kcat -L -b "$bootstrap" -m 2 >/dev/null 2>&1; do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "kafka-ref: the broker exited during start-up; end of its logs:" >&2
            tail -n 40 "$ref/logs/stdout.log" "$ref/logs/server.log" >&2 || true
            rm -f "$ref/pid"
            exit 1
        fi
        if ((SECONDS - start_s > timeout_s)); then
            echo "kafka-ref: no answer on $bootstrap after ${timeout_s}s; end of its log:" >&2
            tail -n 40 "$ref/logs/server.log" >&2 || true
            "$here/stop.sh"
            exit 1
        fi
        sleep 0.5
    done
    echo "$bootstrap" >"$ref/bootstrap"
}

if ((restart)); then
    [[ -f "$ref/pid" && -f "$props" ]] || { echo "kafka-ref: nothing to restart" >&2; exit 1; }
    old="$(cat "$ref/pid")"
    kill -TERM "$old" 2>/dev/null || true
    stop_s=$SECONDS
    while kill -0 "$old" 2>/dev/null; do
        if ((SECONDS - stop_s > 30)); then
            echo "kafka-ref: pid $old ignored SIGTERM for 30s; sending SIGKILL" >&2
            kill -KILL "$old" 2>/dev/null || true
        fi
        sleep 0.2
    done
    echo "kafka-ref: stopped pid $old after $((SECONDS - stop_s))s; starting it again"
    launch
    echo "kafka-ref: Apache Kafka (pid $pid) answers again on $bootstrap after" \
        "$((SECONDS - start_s))s"
    exit 0
fi

# A broker left over from an earlier run is stopped first, so every start is from empty data.
if [[ -f "$ref/pid" ]]; then
    echo "kafka-ref: stopping the broker left from an earlier start" >&2
    "$here/stop.sh"
fi

port_in_use() {
    # bash's /dev/tcp connects; success means something already listens there.
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}
for p in "$port" "$controller_port"; do
    if port_in_use "$p"; then
        echo "kafka-ref: port $p on 127.0.0.1 is already in use" >&2
        exit 1
    fi
done

mkdir -p "$ref/data" "$ref/logs"
rm -f "$ref/bootstrap"
cat >"$props" <<EOF
# Written by compat/kafka-ref/start.sh; a single combined KRaft node.
process.roles=broker,controller
node.id=1
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$controller_port
advertised.listeners=PLAINTEXT://127.0.0.1:$port
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
controller.quorum.bootstrap.servers=127.0.0.1:$controller_port
log.dirs=$ref/data
num.partitions=1
default.replication.factor=1
auto.create.topics.enable=true
delete.topic.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
${KAFKA_REF_EXTRA_CONFIG:-}
EOF


cluster_id="$(java -Xmx128m -cp "$classpath" kafka.tools.StorageTool random-uuid 2>/dev/null |
    tail -n1)"
if [[ -z "$cluster_id" ]]; then
    echo "kafka-ref: kafka.tools.StorageTool random-uuid printed nothing" >&2
    exit 1
fi
java "${java_opts[@]}" -cp "$classpath" kafka.tools.StorageTool format --standalone \
    -t "$cluster_id" -c "$props" >"$ref/logs/format.out" 2>&1 || {
    echo "kafka-ref: formatting the storage failed:" >&2
    cat "$ref/logs/format.out" >&2
    exit 1
}

launch
echo "kafka-ref: Apache Kafka (pid $pid) answers on $bootstrap after $((SECONDS - start_s))s"
