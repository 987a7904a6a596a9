#!/usr/bin/env bash
# Compat suite: Apache Kafka's kafka-reassign-partitions tool
# (org.apache.kafka.tools.reassign.ReassignPartitionsCommand, from the jars in .kafka-ref/libs)
# against any cluster of three brokers with ids 1, 2 and 3: a three-node Apache Kafka
# (compat/kafka-ref/cluster.sh) or a three-node highwater (compat/cluster/run.sh calls it).
#  - kafka-topics --replica-assignment puts each partition on the brokers it names, and
#    acks=all records from the console producer land there;
#  - --execute moves three partitions from {1,2} to {2,3} while a console producer (acks=all)
#    keeps writing, --verify until complete: every record sent is read back once, in order per
#    partition, from the new replicas, and broker 1 drops its logs;
#  - --execute --throttle 100000 sets leader/follower.replication.throttled.rate on the three
#    brokers and the topic's leader/follower.replication.throttled.replicas (kafka-configs
#    --describe), the throttled move of 3 MB is still under way at the first --verify (which
#    leaves the throttles), --execute --additional raises the throttle, and the --verify that
#    finds it complete removes every throttle;
#  - --list of a reassignment held back by a 1 B/s throttle (replicas, adding, removing), and
#    a second --execute refused while it is under way;
#  - --cancel of it: the partition is back on brokers 1 and 2, the throttles are gone, broker 3
#    drops its replica;
#  - kafka-configs --describe lists the throttle rates --execute set line for line as Kafka
#    4.1.1 does (the dynamic value its only synonym; the other tests ignore a default synonym).
# Every test makes its own topic; the tool's output is compared line for line where Kafka's
# tool prints it the same on every run. Small data and short waits (about 55 s on Kafka).
# Usage: compat/cluster/reassign.sh HOST:PORT[,HOST:PORT...]
set -euo pipefail

bootstrap="${1:?usage: compat/cluster/reassign.sh HOST:PORT[,HOST:PORT...] (brokers 1, 2, 3)}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
test_suite_name=reassign
# shellcheck source=../lib/testlib.sh source-path=SCRIPTDIR
source "$root/compat/lib/testlib.sh"

compgen -G "$root/.kafka-ref/libs/kafka-tools-*.jar" >/dev/null ||
    fail "no Kafka jars in .kafka-ref/libs; run compat/install-deps.sh"
command -v kcat >/dev/null || fail "kcat is not installed; run compat/install-deps.sh"

# kafka_tool CLASS ARGS...: one tool in a small, quick-starting JVM, bounded in time (as
# compat/java/cli-tools.sh runs them).
kafka_tool() {
    timeout 120 java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
        "-Dlog4j2.configurationFile=$root/compat/java/tools-log4j2.properties" \
        -cp "$root/.kafka-ref/libs/*" "$@"
}
reassign() {
    kafka_tool org.apache.kafka.tools.reassign.ReassignPartitionsCommand \
        --bootstrap-server "$bootstrap" "$@"
}
topics() { kafka_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$bootstrap" "$@"; }
configs() { kafka_tool kafka.admin.ConfigCommand --bootstrap-server "$bootstrap" "$@"; }
get_offsets() {
    kafka_tool org.apache.kafka.tools.GetOffsetShell --bootstrap-server "$bootstrap" "$@"
}
log_dirs() { kafka_tool org.apache.kafka.tools.LogDirsCommand --bootstrap-server "$bootstrap" "$@"; }
console_producer() {
    kafka_tool org.apache.kafka.tools.ConsoleProducer --bootstrap-server "$bootstrap" "$@"
}
console_consumer() {
    kafka_tool org.apache.kafka.tools.consumer.ConsoleConsumer --bootstrap-server "$bootstrap" \
        "$@"
}
# perf_produce TOPIC RECORDS: RECORDS of 1,000 bytes, acks=all, as fast as they go.
perf_produce() {
    local out
    out="$(kafka_tool org.apache.kafka.tools.ProducerPerformance --topic "$1" \
        --num-records "$2" --record-size 1000 --throughput -1 \
        --producer-props acks=all "bootstrap.servers=$bootstrap")"
    grep -q "^$2 records sent, " <<<"$out" || fail "kafka-producer-perf-test: $out"
}

# create_topic TOPIC ASSIGNMENT: kafka-topics --create --replica-assignment ASSIGNMENT.
create_topic() {
    assert_eq "Created topic $1." "$(topics --create --topic "$1" --replica-assignment "$2")" \
        "kafka-topics --create --replica-assignment $2"
}

# replicas_of TOPIC: "PARTITION REPLICAS ISR" lines of kafka-topics --describe, the ISR sorted.
replicas_of() {
    local p r i
    topics --describe --topic "$1" | awk -F'\t' '{
        for (f = 1; f <= NF; f++) {
            split($f, kv, ": ")
            if (kv[1] == "Partition") p = kv[2]
            if (kv[1] == "Replicas") r = kv[2]
            if (kv[1] == "Isr") i = kv[2]
        }
        if (p != "") print p, r, i
        p = "" }' | while read -r p r i; do
        echo "$p $r $(tr , '\n' <<<"$i" | sort -n | paste -sd,)"
    done
}

# total_end_offset TOPIC: the sum of the partitions' end offsets (kafka-get-offsets).
total_end_offset() {
    get_offsets --topic "$1" --time -1 | awk -F: '{ sum += $3 } END { print sum + 0 }'
}

# reassignment_json TOPIC PARTITION:R,R ...: the tool's JSON moving each partition to R,R.
reassignment_json() {
    local topic="$1" sep="" spec
    shift
    printf '{"version":1,"partitions":['
    for spec in "$@"; do
        printf '%s{"topic":"%s","partition":%s,"replicas":[%s]}' "$sep" "$topic" "${spec%%:*}" \
            "${spec#*:}"
        sep=,
    done
    printf ']}\n'
}

# current_json TOPIC PARTITION:R,R ...: the "current partition replica assignment" --execute
# prints (Kafka's formatAsReassignmentJson).
current_json() {
    local topic="$1" sep="" spec dirs
    shift
    printf '{"version":1,"partitions":['
    for spec in "$@"; do
        dirs="$(tr -cd , <<<"${spec#*:}" | sed 's/,/,"any"/g')"
        printf '%s{"topic":"%s","partition":%s,"replicas":[%s],"log_dirs":["any"%s]}' "$sep" \
            "$topic" "${spec%%:*}" "${spec#*:}" "$dirs"
        sep=,
    done
    printf ']}'
}

# execute_output TOPIC PARTITIONS_JSON THROTTLE(or "") PARTITION...: what --execute prints.
execute_output() {
    local topic="$1" current="$2" throttle="$3" parts
    shift 3
    parts="$(printf "%s\n" "$@" | sed "s/^/$topic-/" | paste -sd,)"
    printf 'Current partition replica assignment\n\n%s\n\n' "$current"
    printf 'Save this to use as the --reassignment-json-file option during rollback\n'
    if [[ -n "$throttle" ]]; then
        printf 'Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle is removed.\n'
        printf 'The inter-broker throttle limit was set to %s B/s\n' "$throttle"
    fi
    if (($# == 1)); then
        printf 'Successfully started partition reassignment for %s\n' "$parts"
    else
        printf 'Successfully started partition reassignments for %s\n' "$parts"
    fi
}

# verify_until_complete JSON_FILE TOPIC PARTITIONS: runs --verify until it reports each
# partition completed (at most 60 s), then checks that last output whole: the status lines,
# then the throttles cleared on brokers 1, 2, 3 and on the topic.
verify_until_complete() {
    local file="$1" topic="$2" partitions="$3" out start=$SECONDS p want
    while :; do
        out="$(reassign --verify --reassignment-json-file "$file")"
        (($(grep -c '^Reassignment of partition .* is completed\.$' <<<"$out") == partitions)) &&
            break
        if grep -q 'There is no active reassignment' <<<"$out"; then
            fail "the reassignment ended elsewhere: $out"
        fi
        timeout 30 kcat -b "$bootstrap" -L -m 10 2>/dev/null | grep -q '^ 3 brokers:$' ||
            fail "a broker is gone during the reassignment: $out"
        ((SECONDS - start < 60)) || fail "not complete after 60 s: $out"
        sleep 1
    done
    want="Status of partition reassignment:"
    for ((p = 0; p < partitions; p++)); do
        want+=$'\n'"Reassignment of partition $topic-$p is completed."
    done
    want+=$'\n\n'"Clearing broker-level throttles on brokers 1,2,3"
    want+=$'\n'"Clearing topic-level throttles on topic $topic"
    assert_eq "$want" "$out" "the last --verify"
}

# on_failure COMMAND: when the test (a subshell of run_test) fails, run COMMAND (after those
# registered before it), quietly.
on_failure() {
    cleanups+=("$1")
    trap 'rc=$?; if ((rc != 0)); then for c in "${cleanups[@]}"; do
        eval "$c" >/dev/null 2>&1 || true; done; fi; exit $rc' EXIT
}
cleanups=()

# cancel_on_failure JSON_FILE: on failure, --cancel the test's reassignment and clear the
# throttles, so that the next test's --execute is not refused.
cancel_on_failure() {
    on_failure "reassign --cancel --reassignment-json-file '$1'"
}

# kill_tree PID: PID and every process below it (a tool's subshell, timeout and JVM).
kill_tree() {
    local child
    for child in $(pgrep -P "$1"); do
        kill_tree "$child"
    done
    kill "$1" 2>/dev/null || true
}

# broker_configs: kafka-configs --describe --entity-type brokers, whole.
broker_configs() { configs --describe --entity-type brokers; }

# broker_block ID: from broker_configs' output on stdin, the lines under
# "Dynamic configs for broker ID are:".
broker_block() {
    awk -v head="Dynamic configs for broker $1 are:" '
        $0 == head { on = 1; next } /^[^ ]/ { on = 0 } on'
}

# throttle_rates RATE: what each broker's block holds while the tool's throttle is set.
throttle_rates() {
    printf '  follower.replication.throttled.rate=%s sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:follower.replication.throttled.rate=%s}\n' "$1" "$1"
    printf '  leader.replication.throttled.rate=%s sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:leader.replication.throttled.rate=%s}' "$1" "$1"
}

# assert_throttle_rates BROKER_BLOCK RATE WHAT: the block holds the two throttle rates at
# RATE, set on the broker itself. A default synonym after the dynamic one is left out here:
# the exact lines are the last test's.
assert_throttle_rates() {
    assert_eq "$(throttle_rates "$2")" "$(grep 'replication.throttled' <<<"$1" |
        sed 's/, DEFAULT_CONFIG:[^}]*}$/}/')" "$3"
}

# topic_throttles TOPIC: the topic's *.replication.throttled.replicas lines of kafka-configs.
topic_throttles() {
    configs --describe --entity-type topics --entity-name "$1" |
        grep 'replication.throttled.replicas=' || true
}

# assert_no_throttles TOPIC: no broker and not the topic has a replication throttle left.
assert_no_throttles() {
    local out b
    out="$(broker_configs)"
    for b in 1 2 3; do
        assert_eq "" "$(broker_block "$b" <<<"$out" | grep 'replication.throttled' || true)" \
            "broker $b's throttles after the reassignment"
    done
    assert_eq "" "$(topic_throttles "$1")" "$1's throttled replicas after the reassignment"
}

# broker_holds TOPIC-PARTITION BROKER: kafka-log-dirs lists that replica on that broker.
broker_holds() {
    log_dirs --describe --broker-list "$2" --topic-list "${1%-*}" | tail -n 1 |
        python3 -c 'import json, sys
replica, broker = sys.argv[1], int(sys.argv[2])
doc = json.load(sys.stdin)
sys.exit(0 if any(p["partition"] == replica for b in doc["brokers"] if b["broker"] == broker
                  for d in b["logDirs"] for p in d["partitions"]) else 1)' "$1" "$2"
}
broker_dropped() { ! broker_holds "$1" "$2"; }

# has_a_record TOPIC: partition 0 of TOPIC holds a record (kcat).
has_a_record() {
    [[ -n "$(kcat -b "$bootstrap" -C -t "$1" -p 0 -o beginning -c 1 -e -q)" ]]
}

test_replica_assignment_places_partitions_and_records_land() {
    local t out
    t="$(unique_topic placed)"
    create_topic "$t" 1:2,2:1,1:2
    out="$(replicas_of "$t")"
    echo "$out"
    assert_eq $'0 1,2 1,2\n1 2,1 1,2\n2 1,2 1,2' "$out" "partitions, replicas and ISRs"
    for i in $(seq 1 300); do printf 'key-%d:value %d\n' "$i" "$i"; done |
        console_producer --topic "$t" --producer-property acks=all \
            --property parse.key=true --property key.separator=:
    out="$(get_offsets --topic "$t" --time -1)"
    echo "$out"
    assert_eq 300 "$(awk -F: '{ sum += $3 } END { print sum }' <<<"$out")" "records written"
    # The keys spread them over all three partitions.
    assert_eq 0 "$(grep -c ':0$' <<<"$out" || true)" "partitions without records"
}

test_execute_under_load_moves_every_acknowledged_record() {
    local t dir n=4000 out want producer rc=0 got
    t="$(unique_topic moved)"
    dir="$test_tmp/moved"
    mkdir -p "$dir"
    create_topic "$t" 1:2,2:1,1:2
    reassignment_json "$t" 0:2,3 1:3,2 2:2,3 >"$dir/move.json"
    cancel_on_failure "$dir/move.json"

    # 4,000 keyed records, 50 every 0.1 s (8 s), acks=all: the console producer is still
    # writing when the reassignment starts and, on a quick broker, when it ends.
    python3 -c 'import sys, time
for i in range(1, int(sys.argv[1]) + 1):
    print(f"key-{i}:{i}", flush=(i % 50 == 0))
    if i % 50 == 0: time.sleep(0.1)' "$n" |
        console_producer --topic "$t" --producer-property acks=all \
            --property parse.key=true --property key.separator=: \
            >"$dir/producer.out" 2>"$dir/producer.err" &
    producer=$!
    on_failure "kill_tree $producer"
    wait_until 30 has_a_record "$t"

    out="$(reassign --execute --reassignment-json-file "$dir/move.json")"
    echo "$out"
    want="$(execute_output "$t" "$(current_json "$t" 0:1,2 1:2,1 2:1,2)" "" 0 1 2)"
    assert_eq "$want" "$out" "--execute"
    kill -0 "$producer" 2>/dev/null || fail "the producer finished before the reassignment began"

    verify_until_complete "$dir/move.json" "$t" 3
    kill -0 "$producer" 2>/dev/null && echo "the producer was still writing when --verify found the reassignment complete"

    wait "$producer" || rc=$?
    cat "$dir/producer.err"
    ((rc == 0)) || fail "the console producer exited with $rc"
    ! grep -q ' ERROR ' "$dir/producer.err" || fail "the producer logged errors (records not acknowledged)"

    assert_eq $'0 2,3 2,3\n1 3,2 2,3\n2 2,3 2,3' "$(replicas_of "$t")" \
        "partitions, replicas and ISRs after the move"
    assert_eq "$n" "$(total_end_offset "$t")" "end offsets after the move"
    console_consumer --topic "$t" --from-beginning --max-messages "$n" --timeout-ms 30000 \
        --property print.partition=true >"$dir/consumed" 2>"$dir/consumer.err" || true
    got="$(wc -l <"$dir/consumed")"
    assert_eq "$n" "$got" "records consumed"
    # Each value once, and in each partition in the order sent.
    assert_same_file <(seq 1 "$n") <(cut -f2 "$dir/consumed" | sort -n) "values consumed"
    awk -F'\t' '{ if ($2 + 0 <= last[$1]) { print "out of order in " $1 ": " $2; bad = 1 }
        last[$1] = $2 + 0 } END { exit bad }' "$dir/consumed"
    wait_until 30 broker_dropped "$t-0" 1
}

test_execute_with_a_throttle_sets_it_and_verify_removes_it() {
    local t dir out b
    t="$(unique_topic throttled)"
    dir="$test_tmp/throttled"
    mkdir -p "$dir"
    create_topic "$t" 1:2
    perf_produce "$t" 3000
    reassignment_json "$t" 0:2,3 >"$dir/move.json"
    cancel_on_failure "$dir/move.json"

    out="$(reassign --execute --reassignment-json-file "$dir/move.json" --throttle 100000)"
    echo "$out"
    assert_eq "$(execute_output "$t" "$(current_json "$t" 0:1,2)" 100000 0)" "$out" \
        "--execute --throttle 100000"

    # 3 MB at 100,000 B/s takes half a minute: the first --verify finds it under way and
    # leaves every throttle in place.
    out="$(reassign --verify --reassignment-json-file "$dir/move.json")"
    assert_eq $'Status of partition reassignment:\n'"Reassignment of partition $t-0 is still in progress." \
        "$out" "--verify while the throttled move is under way"
    out="$(broker_configs)"
    echo "$out"
    for b in 1 2 3; do
        assert_throttle_rates "$(broker_block "$b" <<<"$out")" 100000 "broker $b's throttle rates"
    done
    out="$(topic_throttles "$t")"
    echo "$out"
    assert_eq "  follower.replication.throttled.replicas=0:3 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:follower.replication.throttled.replicas=0:3}
  leader.replication.throttled.replicas=0:1,0:2 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:leader.replication.throttled.replicas=0:1,0:2}" \
        "$out" "the topic's throttled replicas (leader: the old replicas, follower: the new one)"

    # --additional resubmits the same move with a higher throttle (Kafka's way to change it);
    # the partition's replicas are now the target's and the one leaving, 2,3,1.
    out="$(reassign --execute --additional --reassignment-json-file "$dir/move.json" \
        --throttle 100000000)"
    echo "$out"
    assert_eq "$(execute_output "$t" "$(current_json "$t" 0:2,3,1)" 100000000 0)" "$out" \
        "--execute --additional --throttle 100000000"
    assert_throttle_rates "$(broker_configs | broker_block 3)" 100000000 \
        "broker 3's raised throttle"

    verify_until_complete "$dir/move.json" "$t" 1
    assert_no_throttles "$t"
    assert_eq "0 2,3 2,3" "$(replicas_of "$t")" "partition 0 after the move"
    assert_eq 3000 "$(total_end_offset "$t")" "end offset after the move"
}

# The topic and JSON of the reassignment the --list test starts and the --cancel test ends.
held_state="$test_tmp/held"

test_list_shows_a_reassignment_under_way() {
    local t out rc=0
    t="$(unique_topic held)"
    mkdir -p "$held_state"
    create_topic "$t" 1:2
    perf_produce "$t" 3000
    reassignment_json "$t" 0:2,3 >"$held_state/move.json"
    cancel_on_failure "$held_state/move.json"
    # 1 B/s: after a first fetch (at most replica.fetch.max.bytes, 1 MB) the new replica gets
    # nothing more for as long as the test lasts.
    # The --cancel test cancels whatever this one started.
    echo "$t" >"$held_state/topic"
    out="$(reassign --execute --reassignment-json-file "$held_state/move.json" --throttle 1)"
    echo "$out"
    assert_eq "$(execute_output "$t" "$(current_json "$t" 0:1,2)" 1 0)" "$out" "--execute --throttle 1"

    out="$(reassign --list)"
    assert_eq "Current partition reassignments:
$t-0: replicas: 2,3,1. adding: 3. removing: 1." "$out" "--list"

    out="$(reassign --execute --reassignment-json-file "$held_state/move.json")" || rc=$?
    assert_eq 1 "$rc" "exit status of a second --execute"
    assert_eq "Cannot execute because there is an existing partition assignment.  Use --additional to override this and create a new partition assignment in addition to the existing one. The --additional flag can also be used to change the throttle by resubmitting the current reassignment." \
        "$out" "a second --execute without --additional"
}

test_cancel_puts_the_partition_back() {
    local t out
    [[ -f "$held_state/topic" ]] || fail "no reassignment under way (the --list test failed)"
    t="$(cat "$held_state/topic")"
    cancel_on_failure "$held_state/move.json"
    out="$(reassign --verify --reassignment-json-file "$held_state/move.json")"
    assert_eq $'Status of partition reassignment:\n'"Reassignment of partition $t-0 is still in progress." \
        "$out" "--verify before the cancel"

    out="$(reassign --cancel --reassignment-json-file "$held_state/move.json")"
    echo "$out"
    # Kafka's tool prints "None of the specified partition moves are active." without a
    # newline.
    assert_eq "Successfully cancelled partition reassignment for: $t-0
None of the specified partition moves are active.Clearing broker-level throttles on brokers 1,2,3
Clearing topic-level throttles on topic $t" "$out" "--cancel"

    assert_eq "No partition reassignments found." "$(reassign --list)" "--list after the cancel"
    # Back on brokers 1 and 2: the replicas during the move (2,3,1) without the one being
    # added, as Kafka reverts it.
    assert_eq "0 2,1 1,2" "$(replicas_of "$t")" "partition 0 after the cancel"
    assert_no_throttles "$t"
    wait_until 30 broker_dropped "$t-0" 3
    assert_eq 3000 "$(total_end_offset "$t")" "end offset after the cancel"
}

test_throttle_rates_are_described_as_kafka_describes_them() {
    local t dir out b
    t="$(unique_topic described)"
    dir="$test_tmp/described"
    mkdir -p "$dir"
    create_topic "$t" 1:2
    reassignment_json "$t" 0:2,3 >"$dir/move.json"
    cancel_on_failure "$dir/move.json"
    # An empty partition moves at once; the throttles stay until --verify.
    reassign --execute --reassignment-json-file "$dir/move.json" --throttle 100000 >/dev/null
    out="$(broker_configs)"
    echo "$out"
    for b in 1 2 3; do
        # Kafka 4.1.1: the dynamic value is the only synonym (the rates have no static key).
        assert_eq "$(throttle_rates 100000)" "$(broker_block "$b" <<<"$out" |
            grep 'replication.throttled' || true)" "broker $b's throttle rates, whole lines"
    done
    verify_until_complete "$dir/move.json" "$t" 1
    assert_no_throttles "$t"
}

# reassign_test NAME FUNCTION: run_test, failing at once when the cluster does not list three
# brokers (a broker died in an earlier test: its tools would only wait out their timeouts).
reassign_test() {
    run_test "$1" with_three_brokers "$2"
}
with_three_brokers() {
    local brokers
    brokers="$(timeout 30 kcat -b "$bootstrap" -L -m 10 2>&1 | grep ' brokers:$' || true)"
    [[ "$brokers" == " 3 brokers:" ]] || fail "the cluster lists '$brokers', not 3 brokers"
    "$@"
}

echo "reassign suite against $bootstrap (kafka-reassign-partitions from .kafka-ref/libs)"
reassign_test "kafka-topics --replica-assignment places partitions on brokers 1,2; acks=all records land" \
    test_replica_assignment_places_partitions_and_records_land
reassign_test "--execute moves {1,2} to {2,3} under acks=all load; --verify; no acknowledged record lost" \
    test_execute_under_load_moves_every_acknowledged_record
reassign_test "--execute --throttle sets broker rates and topic replicas; --verify removes them when done" \
    test_execute_with_a_throttle_sets_it_and_verify_removes_it
reassign_test "--list shows a throttled reassignment under way; a second --execute is refused" \
    test_list_shows_a_reassignment_under_way
reassign_test "--cancel of a reassignment held back by a 1 B/s throttle puts the partition back" \
    test_cancel_puts_the_partition_back
reassign_test "kafka-configs --describe lists the throttle rates the tool set with their dynamic synonym only" \
    test_throttle_rates_are_described_as_kafka_describes_them
summary_rc=0
suite_summary || summary_rc=$?
# The closing line .ci/run adds up.
echo "$tests_passed passed, $tests_failed failed"
exit "$summary_rc"
