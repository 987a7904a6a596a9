#!/usr/bin/env bash
# Starts (or stops) a three-node Apache Kafka cluster, the reference for what needs more than
# one broker (partition reassignment: compat/cluster/reassign.sh). Three combined KRaft nodes
# (broker and controller, node ids 1, 2, 3) with a static voter set
# (controller.quorum.voters), from the jars that install-deps.sh copied into .kafka-ref/libs,
# each storage formatted with one shared cluster id. Data and logs live in
# .kafka-ref/cluster/node-N/; the nodes' pids in .kafka-ref/cluster/node-N.pid. When all
# three brokers answer Metadata (kcat -L lists 3 brokers), the bootstrap list goes to
# .kafka-ref/cluster/bootstrap. It does not touch the single node of start.sh.
#
# Usage: compat/kafka-ref/cluster.sh start|stop|run COMMAND [ARGS...]
#   start  stops a cluster left from an earlier start, then starts one from empty data
#   stop   stops the three nodes (only the pids it recorded: SIGTERM, SIGKILL after 20 s)
#          and wipes .kafka-ref/cluster; silent on success, safe when nothing runs
#   run    start, then COMMAND ARGS... BOOTSTRAP, then stop (also when COMMAND fails or is
#          interrupted); exits with COMMAND's status, e.g.
#          compat/kafka-ref/cluster.sh run compat/cluster/reassign.sh
#
# Environment: KAFKA_REF_CLUSTER_PORTS and KAFKA_REF_CLUSTER_CONTROLLER_PORTS (three
# comma-separated ports each; default: free ports), KAFKA_REF_START_TIMEOUT seconds (default
# 120), KAFKA_REF_HEAP (default -Xmx384m), KAFKA_REF_EXTRA_CONFIG: lines appended to every
# node's server.properties (a key set again there wins), with @NODE@ replaced by the node's
# id (e.g. `broker.rack=RACK@NODE@`), @PORT@ and @CONTROLLER_PORT@ by its client and
# controller ports, and @EXTRA_PORT@ by its entry of KAFKA_REF_CLUSTER_EXTRA_PORTS (three
# comma-separated ports, for a listener of the test's own).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ref="$root/.kafka-ref"
dir="$ref/cluster"
here="$root/compat/kafka-ref"
timeout_s="${KAFKA_REF_START_TIMEOUT:-120}"
classpath="$ref/libs/*"
extra_config="${KAFKA_REF_EXTRA_CONFIG:-}"

stop() {
    local node pid pids=()
    # Once stopping, a second ctrl-c or SIGTERM does not leave the data behind.
    trap '' INT TERM
    for node in 1 2 3; do
        pid="$(cat "$dir/node-$node.pid" 2>/dev/null)" || continue
        if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null || true
            pids+=("$pid")
        fi
    done
    # The data is wiped next, so a node still in its controlled shutdown after 20 s (the
    # last one has no quorum left to answer it) is killed outright.
    for _ in $(seq 1 40); do
        local alive=0
        for pid in "${pids[@]}"; do
            kill -0 "$pid" 2>/dev/null && alive=1
        done
        ((alive)) || break
        sleep 0.5
    done
    for pid in "${pids[@]}"; do
        kill -KILL "$pid" 2>/dev/null || true
    done
    rm -rf "$dir"
}

# kill_tree PID: PID and every process below it.
kill_tree() {
    local c
    for c in $(pgrep -P "$1"); do
        kill_tree "$c"
    done
    kill "$1" 2>/dev/null || true
}

case "${1:-}" in
start) ;;
stop)
    stop
    exit 0
    ;;
run)
    shift
    (($#)) || { echo "usage: compat/kafka-ref/cluster.sh run COMMAND [ARGS...]" >&2; exit 2; }
    trap stop EXIT
    "$0" start
    # In the background, so that a SIGTERM or ctrl-c here ends COMMAND (and what it started)
    # and stops the cluster at once.
    "$@" "$(cat "$dir/bootstrap")" &
    child=$!
    trap 'kill_tree "$child"; exit 143' INT TERM
    wait "$child"
    exit
    ;;
*)
    echo "usage: compat/kafka-ref/cluster.sh start|stop|run COMMAND [ARGS...]" >&2
    exit 2
    ;;
esac

if ! compgen -G "$ref/libs/kafka_2.13-*.jar" >/dev/null; then
    echo "kafka-ref cluster: no Kafka jars in $ref/libs; run compat/install-deps.sh first" >&2
    exit 1
fi
command -v kcat >/dev/null || { echo "kafka-ref cluster: kcat is not installed" >&2; exit 1; }

if compgen -G "$dir/node-*.pid" >/dev/null; then
    echo "kafka-ref cluster: stopping the cluster left from an earlier start" >&2
    stop
fi

free_ports() {
    # Six distinct ports the kernel hands out, all bound at once so none repeats.
    python3 -c 'import socket
socks = [socket.socket() for _ in range(6)]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))'
}
read -r -a ports <<<"$(free_ports)"
IFS=, read -r -a client_ports <<<"${KAFKA_REF_CLUSTER_PORTS:-${ports[0]},${ports[1]},${ports[2]}}"
IFS=, read -r -a controller_ports \
    <<<"${KAFKA_REF_CLUSTER_CONTROLLER_PORTS:-${ports[3]},${ports[4]},${ports[5]}}"
if ((${#client_ports[@]} != 3 || ${#controller_ports[@]} != 3)); then
    echo "kafka-ref cluster: KAFKA_REF_CLUSTER_PORTS and _CONTROLLER_PORTS take three ports" >&2
    exit 1
fi
port_in_use() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}
for p in "${client_ports[@]}" "${controller_ports[@]}"; do
    if port_in_use "$p"; then
        echo "kafka-ref cluster: port $p on 127.0.0.1 is already in use" >&2
        exit 1
    fi
done

voters="1@127.0.0.1:${controller_ports[0]},2@127.0.0.1:${controller_ports[1]},3@127.0.0.1:${controller_ports[2]}"
bootstrap="127.0.0.1:${client_ports[0]},127.0.0.1:${client_ports[1]},127.0.0.1:${client_ports[2]}"

cluster_id="$(java -Xmx128m -cp "$classpath" kafka.tools.StorageTool random-uuid 2>/dev/null |
    tail -n1)"
[[ -n "$cluster_id" ]] || { echo "kafka-ref cluster: random-uuid printed nothing" >&2; exit 1; }

java_opts=(-Xms128m "${KAFKA_REF_HEAP:--Xmx384m}" -XX:+UseSerialGC -Djava.awt.headless=true
    -Dkafka.request.log.level=WARN "-Dlog4j2.configurationFile=$here/log4j2.properties")

IFS=, read -r -a extra_ports <<<"${KAFKA_REF_CLUSTER_EXTRA_PORTS:-}"

for node in 1 2 3; do
    n="$dir/node-$node"
    mkdir -p "$n/data" "$n/logs"
    port="${client_ports[node - 1]}"
    node_config="${extra_config//@NODE@/$node}"
    node_config="${node_config//@CONTROLLER_PORT@/${controller_ports[node - 1]}}"
    node_config="${node_config//@EXTRA_PORT@/${extra_ports[node - 1]:-}}"
    node_config="${node_config//@PORT@/$port}"
    cat >"$n/server.properties" <<EOF
# Written by compat/kafka-ref/cluster.sh; node $node of a three-node combined KRaft cluster.
process.roles=broker,controller
node.id=$node
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:${controller_ports[node - 1]}
advertised.listeners=PLAINTEXT://127.0.0.1:$port
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
controller.quorum.voters=$voters
log.dirs=$n/data
num.partitions=3
default.replication.factor=3
auto.create.topics.enable=true
delete.topic.enable=true
offsets.topic.replication.factor=3
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
transaction.state.log.num.partitions=4
group.initial.rebalance.delay.ms=0
$node_config
EOF
    java "${java_opts[@]}" "-Dkafka.logs.dir=$n/logs" -cp "$classpath" kafka.tools.StorageTool \
        format -t "$cluster_id" -c "$n/server.properties" >"$n/logs/format.out" 2>&1 || {
        echo "kafka-ref cluster: formatting node $node's storage failed:" >&2
        cat "$n/logs/format.out" >&2
        stop
        exit 1
    }
done

for node in 1 2 3; do
    n="$dir/node-$node"
    # setsid: the nodes outlive this script and the make recipe line that ran it.
    setsid nohup java "${java_opts[@]}" "-Dkafka.logs.dir=$n/logs" -cp "$classpath" \
        kafka.Kafka "$n/server.properties" >>"$n/logs/stdout.log" 2>&1 </dev/null &
    echo $! >"$dir/node-$node.pid"
done

start_s=$SECONDS
until kcat -L -b "$bootstrap" -m 2 2>/dev/null | grep -q "^ 3 brokers:"; do
    for node in 1 2 3; do
        if ! kill -0 "$(cat "$dir/node-$node.pid")" 2>/dev/null; then
            echo "kafka-ref cluster: node $node exited during start-up; end of its logs:" >&2
            tail -n 40 "$dir/node-$node/logs/stdout.log" "$dir/node-$node/logs/server.log" >&2 ||
                true
            stop
            exit 1
        fi
    done
    if ((SECONDS - start_s > timeout_s)); then
        echo "kafka-ref cluster: not 3 brokers on $bootstrap after ${timeout_s}s; logs:" >&2
        for node in 1 2 3; do
            tail -n 20 "$dir/node-$node/logs/server.log" >&2 || true
        done
        stop
        exit 1
    fi
    sleep 0.5
done
echo "$bootstrap" >"$dir/bootstrap"
echo "kafka-ref cluster: Apache Kafka nodes 1, 2, 3 (pids $(cat "$dir"/node-{1,2,3}.pid |
    paste -sd,)) answer on $bootstrap after $((SECONDS - start_s))s"
