#!/usr/bin/env bash
# Stops the reference Apache Kafka started by start.sh (only the process whose id start.sh
# recorded) and wipes its data, logs and bootstrap file. The jars in .kafka-ref/libs stay.
# Safe to run when nothing is running. Silent on success, so that the closing line of a
# `make compat-kafka-ref` run stays run-all.sh's "N passed, N failed".
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ref="$root/.kafka-ref"

if [[ -f "$ref/pid" ]]; then
    pid="$(cat "$ref/pid")"
    if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        # A controlled shutdown takes a few seconds; after 30 s it is killed outright.
        for _ in $(seq 1 60); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.5
        done
        if kill -0 "$pid" 2>/dev/null; then
            echo "kafka-ref: pid $pid ignored SIGTERM for 30s; sending SIGKILL" >&2
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    rm -f "$ref/pid"
fi
rm -rf "$ref/data" "$ref/logs" "$ref/bootstrap" "$ref/server.properties"
