#!/usr/bin/env bash
# Compat suite (issue 15): client quotas as Kafka's tools set them and Kafka's Java producer
# feels them. kafka-configs --alter / --describe / --delete-config on --entity-type clients
# (named and --entity-default) and users with clients; then kafka-producer-perf-test, its
# client id given a producer_byte_rate, sends as fast as it can and is held to that rate;
# kafka-topics, its client id given a controller_mutation_rate, is refused until its tokens
# are back.
# Usage: compat/quota/run.sh HOST:PORT
set -euo pipefail

bootstrap="${1:?usage: compat/quota/run.sh HOST:PORT}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
test_suite_name=quota
# shellcheck source=../lib/testlib.sh source-path=SCRIPTDIR
source "$root/compat/lib/testlib.sh"

# java_tool CLASS ARGS...: one of Kafka's tools from .kafka-ref/libs, bounded to 180 s.
java_tool() {
    timeout 180 java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
        "-Dlog4j2.configurationFile=$root/compat/java/tools-log4j2.properties" \
        -cp "$root/.kafka-ref/libs/*" "$@"
}

configs() {
    java_tool kafka.admin.ConfigCommand --bootstrap-server "$bootstrap" "$@"
}

# KEY=VALUE pairs of a --describe line, sorted, one per line.
described() {
    configs --describe "$@" | sed -n 's/.* are //p' | tr ',' '\n' | sed 's/^ *//' | sort
}

# Named, default and user-with-client quotas are set, described and deleted.
configs_set_describe_and_delete_quotas() {
    local client="quota-client-$RANDOM" user="quota-user-$RANDOM" got
    configs --alter --add-config 'producer_byte_rate=102400,consumer_byte_rate=204800' \
        --entity-type clients --entity-name "$client" >/dev/null
    got="$(described --entity-type clients --entity-name "$client")"
    assert_eq $'consumer_byte_rate=204800.0\nproducer_byte_rate=102400.0' "$got" \
        "the client's quotas"
    configs --alter --add-config 'request_percentage=25.5' \
        --entity-type users --entity-name "$user" --entity-type clients --entity-default >/dev/null
    got="$(described --entity-type users --entity-name "$user" --entity-type clients \
        --entity-default)"
    assert_eq "request_percentage=25.5" "$got" "the user's quota for every client id"
    configs --alter --delete-config producer_byte_rate \
        --entity-type clients --entity-name "$client" >/dev/null
    got="$(described --entity-type clients --entity-name "$client")"
    assert_eq "consumer_byte_rate=204800.0" "$got" "what is left once one key is deleted"
    configs --alter --delete-config consumer_byte_rate \
        --entity-type clients --entity-name "$client" >/dev/null
    configs --alter --delete-config request_percentage \
        --entity-type users --entity-name "$user" --entity-type clients --entity-default >/dev/null
    got="$(described --entity-type clients --entity-name "$client")"
    assert_eq "" "$got" "no quota once all are deleted"
    if configs --alter --add-config 'producer_byte_rate=1.5' --entity-type clients \
        --entity-name "$client" >"$test_tmp/out" 2>&1; then
        fail "a fractional byte rate was accepted"
    fi
    grep -q "cannot be a fractional value" "$test_tmp/out" ||
        fail "no reason for the refusal: $(cat "$test_tmp/out")"
}

# A producer given 500 KiB/s sends 25 MB as fast as it may. After its first burst (Kafka
# counts a rate over at least 10 s, so about 5 MB go at once) it is held to the quota: over
# the 30 s from ProducerPerformance's first 5-second report to its seventh, it sends within
# 10 % of 512,000 B/s.
a_producer_is_held_to_its_byte_rate() {
    local client="quota-perf-$RANDOM" topic rate=512000 records=25000 size=1000 counts
    topic="$(unique_topic quota)"
    java_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$bootstrap" --create \
        --topic "$topic" --partitions 1 >/dev/null
    configs --alter --add-config "producer_byte_rate=$rate" \
        --entity-type clients --entity-name "$client" >/dev/null
    sleep 1
    java_tool org.apache.kafka.tools.ProducerPerformance --topic "$topic" \
        --num-records "$records" --record-size "$size" --throughput -1 \
        --producer-props "bootstrap.servers=$bootstrap" "client.id=$client" acks=1 \
        >"$test_tmp/perf" 2>&1 || fail "perf test failed: $(tail -5 "$test_tmp/perf")"
    configs --alter --delete-config producer_byte_rate \
        --entity-type clients --entity-name "$client" >/dev/null
    # The 5-second reports (not the final line, which has percentiles).
    counts="$(grep 'records sent' "$test_tmp/perf" | grep -v '50th' | awk '{print $1}' | tr '\n' ' ')"
    python3 - "$rate" "$size" $counts <<'PY' || fail "not held to the quota: $(cat "$test_tmp/perf")"
import sys
rate, size, *counts = map(int, sys.argv[1:])
assert len(counts) >= 7, f"fewer than 7 reports: {counts}"
sent = sum(counts[1:7]) * size / 30
print(f"    held to {sent:.0f} B/s over 30 s, {sent / rate:.3f}x the quota")
assert 0.9 <= sent / rate <= 1.1, sent / rate
PY
}

# A client given controller_mutation_rate=2 (a bucket of 22 partitions) creates a topic of
# 30 partitions at once, which leaves it 8 in debt (4 s at 2/s): its next kafka-topics
# --create and --alter --partitions are refused with THROTTLING_QUOTA_EXCEEDED (kafka-topics
# asks its admin client not to retry), and once the debt is paid back it may create again
# (KIP-599).
topic_changes_are_held_to_the_controller_mutation_rate() {
    local client="quota-admin-$RANDOM" first second
    first="$(unique_topic mutations)" second="$(unique_topic mutations)"
    printf 'client.id=%s\n' "$client" >"$test_tmp/admin.properties"
    configs --alter --add-config 'controller_mutation_rate=2' \
        --entity-type clients --entity-name "$client" >/dev/null
    sleep 1
    topics() {
        java_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$bootstrap" \
            --command-config "$test_tmp/admin.properties" "$@"
    }
    topics --create --topic "$first" --partitions 30 >/dev/null
    if topics --create --topic "$second" --partitions 1 >"$test_tmp/second" 2>&1; then
        fail "a client 8 partitions in debt created a topic"
    fi
    grep -q "The throttling quota has been exceeded" "$test_tmp/second" ||
        fail "not refused for the quota: $(cat "$test_tmp/second")"
    if topics --alter --topic "$first" --partitions 31 >"$test_tmp/grow" 2>&1; then
        fail "a client in debt added a partition"
    fi
    grep -q "The throttling quota has been exceeded" "$test_tmp/grow" ||
        fail "not refused for the quota: $(cat "$test_tmp/grow")"
    sleep 5
    topics --create --topic "$second" --partitions 1 >"$test_tmp/second" 2>&1 ||
        fail "still refused once the debt is paid: $(cat "$test_tmp/second")"
    configs --alter --delete-config controller_mutation_rate \
        --entity-type clients --entity-name "$client" >/dev/null
}

run_test "kafka-configs: client and user quotas set, described, deleted" \
    configs_set_describe_and_delete_quotas
run_test "kafka-producer-perf-test: held to producer_byte_rate within 10 % over 30 s" \
    a_producer_is_held_to_its_byte_rate
run_test "kafka-topics: refused over controller_mutation_rate, served once paid back" \
    topic_changes_are_held_to_the_controller_mutation_rate
suite_summary
