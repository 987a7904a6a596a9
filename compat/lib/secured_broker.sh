# shellcheck shell=bash
# Sourced by the compat suites that start a broker of their own with secured listeners
# (compat/tls/run.sh, compat/acl/run.sh), after testlib.sh: highwater, or Apache Kafka 4.1.1
# through compat/kafka-ref/start.sh, configured with the same Kafka keys. Sets py (the
# compat venv's Python) and certs (a directory for compat/lib/certs.sh, sourced here).

command -v kcat >/dev/null || fail "kcat is not installed; run compat/install-deps.sh"
py="$root/compat/.venv/bin/python"
[[ -x "$py" ]] || fail "no $py; run compat/install-deps.sh"
certs="$test_tmp/certs"
mkdir -p "$certs"
# shellcheck source=certs.sh source-path=SCRIPTDIR
source "$root/compat/lib/certs.sh"

free_port() {
    "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_secured_broker BROKER SECURED KEY=VALUE...: starts BROKER (highwater or kafka) with
# a PLAINTEXT listener, the listeners SECURED (`NAME://127.0.0.1:PORT,...`) and the keys;
# sets plain_port and plain (its PLAINTEXT address), stops it on exit, and waits until it
# answers. HIGHWATER_BIN is the binary (default ./target/release/highwater).
start_secured_broker() {
    local which="$1" secured="$2" kv
    shift 2
    case "$which" in
        highwater)
            plain_port="$(free_port)"
            local bin="${HIGHWATER_BIN:-$root/target/release/highwater}" sets=()
            for kv in "$@"; do sets+=(--set "$kv"); done
            "$bin" serve --config "$root/config/server.toml" \
                --listeners "PLAINTEXT://127.0.0.1:$plain_port,$secured" \
                --log-dirs "$test_tmp/data" --set http.listeners= "${sets[@]}" \
                >"$test_tmp/broker.log" 2>&1 </dev/null &
            broker_pid=$!
            trap 'kill -TERM $broker_pid 2>/dev/null; wait $broker_pid 2>/dev/null; rm -rf "$test_tmp"' EXIT
            ;;
        kafka)
            plain_port="${KAFKA_REF_PORT:-19092}"
            local controller_port="${KAFKA_REF_CONTROLLER_PORT:-19093}" extra
            extra="listeners=PLAINTEXT://127.0.0.1:$plain_port,CONTROLLER://127.0.0.1:$controller_port"
            extra+=",$secured"
            extra+=$'\n'"advertised.listeners=PLAINTEXT://127.0.0.1:$plain_port,$secured"
            for kv in "$@"; do extra+=$'\n'"$kv"; done
            KAFKA_REF_EXTRA_CONFIG="$extra" "$root/compat/kafka-ref/start.sh"
            trap '"$root/compat/kafka-ref/stop.sh"; rm -rf "$test_tmp"' EXIT
            ;;
        *) fail "unknown broker $which (highwater or kafka)" ;;
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
}

# kafka_tool CLASS ARGS...: one of Kafka's command-line tools (Java), bounded to 120 s.
kafka_tool() {
    local opts
    read -r -a opts <<<"${KAFKA_TOOL_JAVA_OPTS:-}"
    timeout 120 java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 "${opts[@]}" \
        "-Dlog4j2.configurationFile=$root/compat/java/tools-log4j2.properties" \
        -cp "$root/.kafka-ref/libs/*" "$@"
}

# broker_log_tail: the end of highwater's log, after a failed test.
broker_log_tail() {
    if ((tests_failed > 0)) && [[ -f "$test_tmp/broker.log" ]]; then
        echo "---------- end of the highwater log ----------"
        tail -n 40 "$test_tmp/broker.log"
    fi
}
