#!/usr/bin/env bash
# Starts a throwaway three-node highwater cluster (config/cluster/node-N.toml: combined
# broker and controller nodes, on free loopback ports, each with an empty temporary log dir
# and broker.rack=RACK<N> — the rack names librdkafka's tests expect — with Kafka's
# RackAwareReplicaSelector), waits until Metadata lists three brokers, runs
# `CMD... BOOTSTRAP` (the three client addresses, comma-separated), then stops the nodes
# (SIGTERM, SIGKILL after 10 s), removes the temporary dir and exits with CMD's status.
# Usage: compat/with-highwater-cluster.sh CMD [ARGS...]
# Environment: HIGHWATER_BIN (default ./target/release/highwater), HIGHWATER_CLUSTER_SET
# (more `key=value` settings for every node, space-separated), HIGHWATER_START_TIMEOUT
# seconds (default 30), COMPAT_BROKER_LOG (a directory to keep the nodes' logs in).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${HIGHWATER_BIN:-./target/release/highwater}"
timeout_s="${HIGHWATER_START_TIMEOUT:-30}"
(($# > 0)) || { echo "usage: compat/with-highwater-cluster.sh CMD [ARGS...]" >&2; exit 2; }
[[ -x "$bin" || -x "$root/$bin" ]] || { echo "with-highwater-cluster: no broker binary at $bin (make build)" >&2; exit 1; }

# shellcheck source=lib/free_ports.sh source-path=SCRIPTDIR
source "$root/compat/lib/free_ports.sh"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/highwater-cluster.XXXXXX")"
declare -a client_ports controller_ports pids
mapfile -t ports < <(free_ports 6)
for node in 1 2 3; do
    client_ports[node]="${ports[node - 1]}"
    controller_ports[node]="${ports[node + 2]}"
done
voters="1@127.0.0.1:${controller_ports[1]},2@127.0.0.1:${controller_ports[2]},3@127.0.0.1:${controller_ports[3]}"
bootstrap="127.0.0.1:${client_ports[1]},127.0.0.1:${client_ports[2]},127.0.0.1:${client_ports[3]}"

# shellcheck disable=SC2317 # the EXIT trap
cleanup() {
    local pid
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for _ in $(seq 1 100); do
        local alive=0
        for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
        ((alive)) || break
        sleep 0.1
    done
    for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [[ -n "${COMPAT_BROKER_LOG:-}" ]]; then
        mkdir -p "$COMPAT_BROKER_LOG" && cp "$tmp"/node-*.log "$COMPAT_BROKER_LOG"/ || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for node in 1 2 3; do
    settings=(--set "controller.quorum.voters=$voters" --set "broker.rack=RACK$node"
        --set replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector
        --set http.listeners=)
    for setting in ${HIGHWATER_CLUSTER_SET:-}; do settings+=(--set "$setting"); done
    (cd "$root" && exec "$bin" serve --config "config/cluster/node-$node.toml" \
        --listeners "PLAINTEXT://127.0.0.1:${client_ports[node]},CONTROLLER://127.0.0.1:${controller_ports[node]}" \
        --log-dirs "$tmp/node-$node" "${settings[@]}") >"$tmp/node-$node.log" 2>&1 </dev/null &
    pids[node]=$!
done

start=$SECONDS
until timeout 10 kcat -b "$bootstrap" -L -m 5 2>/dev/null | grep -q " 3 brokers:"; do
    if ((SECONDS - start >= timeout_s)); then
        echo "with-highwater-cluster: three brokers never answered on $bootstrap within ${timeout_s}s" >&2
        tail -n 20 "$tmp"/node-*.log >&2 || true
        exit 1
    fi
    sleep 0.2
done
echo "with-highwater-cluster: three nodes answer on $bootstrap after $((SECONDS - start))s"
rc=0
"$@" "$bootstrap" || rc=$?
exit "$rc"
