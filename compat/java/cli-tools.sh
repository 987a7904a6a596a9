#!/usr/bin/env bash
# Compat suite: Apache Kafka's own command-line tools, run from the jars in .kafka-ref/libs
# (kafka-topics, kafka-console-producer, kafka-console-consumer, kafka-get-offsets,
# kafka-consumer-groups). The first tests read one partition from an explicit offset, with no
# consumer group; the kafka-consumer-groups tests consume in groups with the console consumer.
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
consumer_groups() {
    kafka_tool org.apache.kafka.tools.consumer.group.ConsumerGroupCommand \
        --bootstrap-server "$bootstrap" "$@"
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

# group_offsets GROUP: "PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG" lines of --describe,
# sorted by partition. kafka-consumer-groups exits 0 even when it prints "Error: ...", so
# callers check what it printed.
group_offsets() {
    consumer_groups --describe --group "$1" 2>&1 |
        awk -v g="$1" '$1 == g { print $3, $4, $5, $6 }' | sort -n
}

# end_offsets TOPIC: "PARTITION END" lines from kafka-get-offsets.
end_offsets() {
    get_offsets --topic "$1" --time -1 | awk -F: '{ print $2, $3 }' | sort -n
}

# keyed_values FROM TO: "key-N:value N" lines; the keys spread them over the partitions.
keyed_values() {
    local i
    for ((i = $1; i <= $2; i++)); do printf 'key-%d:value %d\n' "$i" "$i"; done
}

test_consumer_groups_describe_reset_list_delete() {
    local t g dir ends ends2 want
    t="$(unique_topic groups)"
    g="$t-group"
    dir="$(mktemp -d)"
    topics --create --topic "$t" --partitions 2 --replication-factor 1 >/dev/null
    keyed_values 1 20 | console_producer --topic "$t" --property parse.key=true \
        --property key.separator=:
    # The console consumer in a group commits its position when it stops.
    console_consumer --topic "$t" --group "$g" --from-beginning --max-messages 20 \
        --timeout-ms 30000 >"$dir/first"
    assert_eq 20 "$(wc -l <"$dir/first")" "records read in the group"
    ends="$(end_offsets "$t")"
    echo "end offsets: $ends"
    if ! grep -q '^0 [1-9]' <<<"$ends" || ! grep -q '^1 [1-9]' <<<"$ends"; then
        fail "records on both partitions: $ends"
    fi

    keyed_values 21 25 | console_producer --topic "$t" --property parse.key=true \
        --property key.separator=:
    # CURRENT-OFFSET is the commit (the old end), LOG-END-OFFSET the new end, LAG the gap.
    ends2="$(end_offsets "$t")"
    want="$(join <(echo "$ends") <(echo "$ends2") | awk '{ print $1, $2, $3, $3 - $2 }')"
    assert_eq "$want" "$(group_offsets "$g")" "--describe after 5 more records"
    assert_eq 5 "$(awk '{ s += $4 } END { print s }' <<<"$want")" "total lag"
    consumer_groups --describe --group "$g" 2>&1 | grep -q "Consumer group '$g' has no active members" ||
        fail "--describe of an inactive group"
    consumer_groups --describe --group "$g" --state | grep -qE "^$g +.* +Empty +0 *$" ||
        fail "--describe --state: Empty with 0 members"

    consumer_groups --list | grep -qxF "$g" || fail "--list lacks $g"

    consumer_groups --reset-offsets --group "$g" --topic "$t" --to-earliest --execute \
        >"$dir/reset"
    cat "$dir/reset"
    assert_eq "$(printf '%s 0\n%s 0' "$t" "$t")" \
        "$(awk -v g="$g" '$1 == g { print $2, $4 }' "$dir/reset")" "--reset-offsets output"
    want="$(awk '{ print $1, 0, $2, $2 }' <<<"$ends2")"
    assert_eq "$want" "$(group_offsets "$g")" "--describe after the reset"

    # Back in the group, the consumer starts again from 0: all 25 records, each once.
    console_consumer --topic "$t" --group "$g" --max-messages 25 --timeout-ms 30000 \
        --property print.key=true --property key.separator=: >"$dir/again"
    assert_same_file <(keyed_values 1 25 | sort) <(sort "$dir/again") "re-read after reset"
    want="$(awk '{ print $1, $2, $2, 0 }' <<<"$ends2")"
    assert_eq "$want" "$(group_offsets "$g")" "--describe after re-reading"

    consumer_groups --delete --group "$g" >"$dir/delete" 2>&1
    cat "$dir/delete"
    grep -qF "Deletion of requested consumer groups ('$g') was successful." "$dir/delete" ||
        fail "--delete output"
    if consumer_groups --list | grep -qxF "$g"; then fail "--list still has $g"; fi
    consumer_groups --describe --group "$g" 2>&1 | grep -qF "GroupIdNotFoundException: Group $g not found." ||
        fail "--describe of a deleted group"
}

# one_member_listed GROUP: --describe --members shows one member, cli-member, with 2
# partitions.
one_member_listed() {
    consumer_groups --describe --group "$1" --members |
        grep -qE "^$1 +[^ ]+ +/?127\.0\.0\.1 +cli-member +2 *$"
}

test_consumer_groups_with_an_active_member() {
    local t g dir bg
    t="$(unique_topic groups-active)"
    g="$t-group"
    dir="$(mktemp -d)"
    topics --create --topic "$t" --partitions 2 --replication-factor 1 >/dev/null
    keyed_values 1 10 | console_producer --topic "$t" --property parse.key=true \
        --property key.separator=:
    # A console consumer stays in the group until it is sent SIGTERM (timeout forwards it).
    (exec timeout 90 java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
        "-Dlog4j2.configurationFile=$here/tools-log4j2.properties" -cp "$root/.kafka-ref/libs/*" \
        org.apache.kafka.tools.consumer.ConsoleConsumer --bootstrap-server "$bootstrap" \
        --topic "$t" --group "$g" --from-beginning --consumer-property client.id=cli-member \
        >"$dir/bg.out" 2>&1) &
    bg=$!
    wait_until 60 one_member_listed "$g"
    wait_until 30 grep -c 'value 10$' "$dir/bg.out"
    consumer_groups --describe --group "$g" --state | tee "$dir/state"
    grep -qE "^$g +.* +range +Stable +1 *$" "$dir/state" || fail "--describe --state: Stable"
    # The tools refuse to change or delete an active group (and still exit 0).
    consumer_groups --reset-offsets --group "$g" --topic "$t" --to-earliest --execute \
        >"$dir/reset" 2>&1 || true
    grep -qF "Assignments can only be reset if the group '$g' is inactive, but the current state is Stable." \
        "$dir/reset" || { cat "$dir/reset"; fail "--reset-offsets of an active group"; }
    consumer_groups --delete --group "$g" >"$dir/delete" 2>&1 || true
    grep -qF "GroupNotEmptyException" "$dir/delete" || { cat "$dir/delete"; fail "--delete"; }
    kill -TERM "$bg"
    wait "$bg" || true
    consumer_groups --list | grep -qxF "$g" || fail "--list lacks $g"
}

echo "cli-tools suite against $bootstrap (Kafka tools from .kafka-ref/libs)"
run_test "kafka-topics: create, list, describe, alter, delete" \
    test_topic_create_list_describe_alter_delete
run_test "console producer to console consumer, byte-exact" \
    test_console_producer_to_console_consumer_is_exact
run_test "kafka-consumer-groups: describe offsets and lag, reset, list, delete" \
    test_consumer_groups_describe_reset_list_delete
run_test "kafka-consumer-groups: an active group is described and refuses reset and delete" \
    test_consumer_groups_with_an_active_member
suite_summary
