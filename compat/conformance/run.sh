#!/usr/bin/env bash
# `make conformance`: the clients' own integration suites — franz-go's pkg/kgo tests
# (kgo.sh) and librdkafka's tests/ (compat/librdkafka/run.sh, every broker test) — first
# against Apache Kafka 4.1.1 (compat/kafka-ref/start.sh, stopped after), then against a
# throwaway highwater (compat/with-highwater.sh), one broker at a time; then a table of
# test | Kafka | highwater, and the tests whose results differ with the reasons the logs give.
# Both brokers run with num.partitions=4, as librdkafka's test scenario "default" assumes.
# Then librdkafka's tests that need three brokers (CONFORMANCE_CLUSTER_TESTS, default 0098
# 0101 0103: transactions with RF=3 topics, fetch from follower) against a three-node Kafka
# (compat/kafka-ref/cluster.sh) and a three-node highwater
# (compat/with-highwater-cluster.sh), each node in rack RACK<id> with Kafka's
# RackAwareReplicaSelector, as librdkafka's trivup clusters run; suite `librdkafka-cluster`.
#
# Usage: compat/conformance/run.sh
#        compat/conformance/run.sh --suites LABEL BOOTSTRAP   (the suites against one broker)
#        compat/conformance/run.sh --table      (the table again, from CONFORMANCE_OUT)
# Environment: CONFORMANCE_BROKERS (default "kafka highwater"), CONFORMANCE_SUITES (default
# "kgo librdkafka"), CONFORMANCE_OUT (default target/conformance/results; results and every
# log, kept), KGO_TESTS (names; default all), LIBRDKAFKA_TESTS (default all), and what
# kgo.sh and compat/librdkafka/run.sh read (KGO_TEST_RECORDS, KGO_TEST_TIMEOUT,
# LIBRDKAFKA_TEST_TIMEOUT). LIBRDKAFKA_SRC defaults to target/conformance/librdkafka-2.0.2,
# fetched by compat/librdkafka/fetch-source.sh (Debian's 2.0.2) when missing.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
here="$root/compat/conformance"
export CONFORMANCE_OUT="${CONFORMANCE_OUT:-$root/target/conformance/results}"
out="$CONFORMANCE_OUT"
suites="${CONFORMANCE_SUITES:-kgo librdkafka}"
export LIBRDKAFKA_SRC="${LIBRDKAFKA_SRC:-$root/target/conformance/librdkafka-2.0.2}"

# --suites LABEL BOOTSTRAP: every suite against one running broker; results in $out/LABEL.tsv
# as `suite<TAB>test<TAB>state<TAB>seconds<TAB>reason`.
if [[ "${1:-}" == --suites ]]; then
    label="$2" bootstrap="$3"
    mkdir -p "$out/$label"
    rc=0
    for suite in $suites; do
        start=$SECONDS
        echo "== conformance: $suite against $label ($bootstrap)"
        case "$suite" in
        kgo)
            # shellcheck disable=SC2086 # KGO_TESTS is a list of names
            KGO_RESULTS="$out/$label/kgo.tsv" KGO_LOG_DIR="$out/$label/kgo" \
                nice "$here/kgo.sh" "$bootstrap" ${KGO_TESTS:-} || rc=1
            ;;
        librdkafka)
            LIBRDKAFKA_TESTS="${LIBRDKAFKA_TESTS:-all}" LIBRDKAFKA_SINGLE_NODE=1 \
                LIBRDKAFKA_TEST_TIMEOUT="${LIBRDKAFKA_TEST_TIMEOUT:-600}" \
                LIBRDKAFKA_RESULTS="$out/$label/librdkafka.tsv" \
                LIBRDKAFKA_LOG_DIR="$out/$label/librdkafka" \
                nice "$root/compat/librdkafka/run.sh" "$bootstrap" || rc=1
            ;;
        *) echo "conformance: unknown suite $suite" >&2; exit 2 ;;
        esac
        echo "== conformance: $suite against $label took $((SECONDS - start))s"
    done
    exit "$rc"
fi

# --cluster-suite LABEL BOOTSTRAP: librdkafka's three-broker tests against a running
# three-node cluster; results in $out/LABEL/librdkafka-cluster.tsv.
if [[ "${1:-}" == --cluster-suite ]]; then
    label="$2" bootstrap="$3"
    mkdir -p "$out/$label"
    echo "== conformance: librdkafka's three-broker tests against $label ($bootstrap)"
    LIBRDKAFKA_TESTS="${CONFORMANCE_CLUSTER_TESTS:-0098 0101 0103}" \
        LIBRDKAFKA_TEST_TIMEOUT="${LIBRDKAFKA_TEST_TIMEOUT:-600}" \
        LIBRDKAFKA_RESULTS="$out/$label/librdkafka-cluster.tsv" \
        LIBRDKAFKA_LOG_DIR="$out/$label/librdkafka-cluster" \
        nice "$root/compat/librdkafka/run.sh" "$bootstrap"
    exit $?
fi

# table: one row per test with each broker's result and seconds, then the reasons of the
# tests that did not pass everywhere; also written to $out/table.md.
table() {
    python3 - "$out" <<'EOF'
import csv, os, sys
out = sys.argv[1]
brokers = [b for b in ("kafka", "highwater") if os.path.isdir(os.path.join(out, b))]
rows, order = {}, []
for b in brokers:
    for suite in ("kgo", "librdkafka", "librdkafka-cluster"):
        path = os.path.join(out, b, suite + ".tsv")
        if not os.path.exists(path):
            continue
        for name, state, secs, note in csv.reader(open(path), delimiter="\t", quoting=csv.QUOTE_NONE):
            key = (suite, name)
            if key not in rows:
                rows[key] = {}
                order.append(key)
            rows[key][b] = (state, secs, note)
def cell(r):
    if not r:
        return "-"
    state, secs, _ = r
    return state if state == "SKIPPED" else f"{state} ({float(secs):.0f} s)"
lines = ["| suite | test | " + " | ".join({"kafka": "Kafka 4.1.1", "highwater": "highwater"}[b] for b in brokers) + " |",
         "|---|---|" + "---|" * len(brokers)]
for key in order:
    lines.append(f"| {key[0]} | {key[1]} | " + " | ".join(cell(rows[key].get(b)) for b in brokers) + " |")
counts = []
for b in brokers:
    states = [rows[k][b][0] for k in order if b in rows[k]]
    counts.append(f"{b}: " + ", ".join(f"{states.count(s)} {s.lower()}" for s in ("PASSED", "FAILED", "TIMEOUT", "SKIPPED")))
notes = []
for key in order:
    r = rows[key]
    states = {b: r.get(b, ("-",))[0] for b in brokers}
    if any(s in ("FAILED", "TIMEOUT") for s in states.values()) or len(set(states.values())) > 1:
        for b in brokers:
            if b in r and r[b][0] != "PASSED" and r[b][2]:
                notes.append(f"- {key[0]} {key[1]} on {b}: {r[b][0]}: {r[b][2]}")
text = "\n".join(lines + ["", "; ".join(counts)] + ([""] + notes if notes else [])) + "\n"
open(os.path.join(out, "table.md"), "w").write(text)
print(text)
EOF
}

if [[ "${1:-}" == --table ]]; then
    table
    exit 0
fi

if [[ " $suites " == *" librdkafka "* ]]; then
    "$root/compat/librdkafka/fetch-source.sh"
fi

mkdir -p "$out"
started=$SECONDS
for broker in ${CONFORMANCE_BROKERS:-kafka highwater}; do
    start=$SECONDS
    rm -rf "${out:?}/$broker"
    case "$broker" in
    kafka)
        trap '"$root/compat/kafka-ref/stop.sh"' EXIT
        trap 'exit 130' INT TERM
        KAFKA_REF_EXTRA_CONFIG="num.partitions=4" "$root/compat/kafka-ref/start.sh"
        "$0" --suites kafka "$(cat "$root/.kafka-ref/bootstrap")" || true
        cp "$root/.kafka-ref/logs/server.log" "$out/kafka/broker.log" 2>/dev/null || true
        "$root/compat/kafka-ref/stop.sh"
        trap - EXIT
        if [[ " $suites " == *" librdkafka "* ]]; then
            KAFKA_REF_EXTRA_CONFIG="num.partitions=4
broker.rack=RACK@NODE@
replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector" \
                "$root/compat/kafka-ref/cluster.sh" run "$0" --cluster-suite kafka || true
        fi
        ;;
    highwater)
        mkdir -p "$out/highwater"
        config="$out/highwater/server.toml"
        sed 's/^"num.partitions" = .*/"num.partitions" = 4/' "$root/config/server.toml" >"$config"
        HIGHWATER_CONFIG="$config" COMPAT_BROKER_LOG="$out/highwater/broker.log" \
            "$root/compat/with-highwater.sh" "$0" --suites highwater || true
        if [[ " $suites " == *" librdkafka "* ]]; then
            HIGHWATER_CLUSTER_SET="num.partitions=4" \
                COMPAT_BROKER_LOG="$out/highwater/cluster-logs" \
                "$root/compat/with-highwater-cluster.sh" "$0" --cluster-suite highwater || true
        fi
        ;;
    *) echo "conformance: unknown broker $broker" >&2; exit 2 ;;
    esac
    echo "== conformance: $broker took $((SECONDS - start))s"
done
table

echo "conformance: $((SECONDS - started))s in all; table and logs in $out"
