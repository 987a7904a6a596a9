#!/usr/bin/env bash
# Compat suite: Apache Kafka's own command-line tools, run from the jars in .kafka-ref/libs
# (kafka-topics, kafka-console-producer, kafka-console-consumer, kafka-get-offsets).
# The console consumer reads one partition from an explicit offset: no consumer group.
# Usage: compat/java/cli-tools.sh HOST:PORT
set -euo pipefail

bootstrap="${1:?usage: compat/java/cli-tools.sh HOST:PORT}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
test_suite_name=cli-tools
# shellcheck source=../lib/testlib.sh source-path=SCRIPTDIR
source "$root/compat/lib/testlib.sh"

compgen -G "$root/.kafka-ref/libs/kafka-tools-*.jar" >/dev/null ||
    fail "no Kafka jars in .kafka-ref/libs; run compat/install-deps.sh"

# kafka_tool CLASS ARGS...: one tool in a small, quick-starting JVM, bounded in time.
kafka_tool() {
    timeout 120 java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
        "-Dlog4j2.configurationFile=$here/tools-log4j2.properties" \
        -cp "$root/.kafka-ref/libs/*" "$@"
}
topics() { kafka_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$bootstrap" "$@"; }
console_producer() {
    kafka_tool org.apache.kafka.tools.ConsoleProducer --bootstrap-server "$bootstrap" "$@"
}
console_consumer() {
    kafka_tool org.apache.kafka.tools.consumer.ConsoleConsumer --bootstrap-server "$bootstrap" \
        "$@"
}
get_offsets() {
    kafka_tool org.apache.kafka.tools.GetOffsetShell --bootstrap-server "$bootstrap" "$@"
}

topic_listed() { topics --list | grep -qxF "$1"; }
topic_not_listed() { ! topics --list | grep -qxF "$1"; }
partition_count_is() { topics --describe --topic "$1" | grep -q "PartitionCount: $2	"; }

test_topic_create_list_describe_alter_delete() {
    local t out
    t="$(unique_topic life)"
    out="$(topics --create --topic "$t" --partitions 2 --replication-factor 1 \
        --config retention.ms=7200000)"
    assert_eq "Created topic $t." "$out" "--create output"
    topic_listed "$t" || fail "--list lacks $t"

    out="$(topics --describe --topic "$t")"
    echo "$out"
    grep -q "Topic: $t	TopicId: [A-Za-z0-9_-]\{22\}	PartitionCount: 2	ReplicationFactor: 1" \
        <<<"$out" || fail "--describe header"
    grep -q "Configs: .*retention.ms=7200000" <<<"$out" || fail "--describe configs"
    for p in 0 1; do
        grep -qE "Topic: $t	Partition: $p	Leader: [0-9]+	Replicas: [0-9]+	Isr: [0-9]+" \
            <<<"$out" || fail "--describe partition $p"
    done

    topics --alter --topic "$t" --partitions 3
    wait_until 30 partition_count_is "$t" 3

    topics --delete --topic "$t"
    wait_until 30 topic_not_listed "$t"
}

test_console_producer_to_console_consumer_is_exact() {
    local t dir
    t="$(unique_topic console)"
    dir="$(mktemp -d)"
    topics --create --topic "$t" --partitions 1 --replication-factor 1 >/dev/null
    for i in $(seq 1 50); do
        printf 'key-%d:value %d with spaces, ünïcödé and a : colon\n' "$((i % 7))" "$i"
    done >"$dir/sent"
    console_producer --topic "$t" --compression-codec gzip \
        --property parse.key=true --property key.separator=: <"$dir/sent"
    console_consumer --topic "$t" --partition 0 --offset earliest --max-messages 50 \
        --timeout-ms 30000 --property print.key=true --property key.separator=: \
        >"$dir/got"
    assert_same_file "$dir/sent" "$dir/got" "console round trip"

    console_consumer --topic "$t" --partition 0 --offset 45 --max-messages 5 \
        --timeout-ms 30000 --property print.offset=true >"$dir/tail"
    # print.offset puts "Offset:N" before the value, tab-separated.
    assert_same_file <(tail -n 5 "$dir/sent" | cut -d: -f2- |
        awk '{ printf "Offset:%d\t%s\n", NR + 44, $0 }') "$dir/tail" "--offset 45"

    assert_eq "$t:0:50" "$(get_offsets --topic "$t" --time -1)" "kafka-get-offsets latest"
    assert_eq "$t:0:0" "$(get_offsets --topic "$t" --time -2)" "kafka-get-offsets earliest"
}

echo "cli-tools suite against $bootstrap (Kafka tools from .kafka-ref/libs)"
run_test "kafka-topics: create, list, describe, alter, delete" \
    test_topic_create_list_describe_alter_delete
run_test "console producer to console consumer, byte-exact" \
    test_console_producer_to_console_consumer_is_exact
suite_summary
