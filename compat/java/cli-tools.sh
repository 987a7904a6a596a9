#!/usr/bin/env bash
# Compat suite: Apache Kafka's own command-line tools, run from the jars in .kafka-ref/libs
# (kafka-topics, kafka-console-producer, kafka-console-consumer, kafka-get-offsets,
# kafka-consumer-groups, kafka-transactions, kafka-features, kafka-metadata-quorum,
# kafka-log-dirs, kafka-acls, kafka-configs). The
# first tests read one partition from an explicit offset, with no consumer group; the
# kafka-consumer-groups tests consume in groups with the console consumer; the
# kafka-transactions tests look at a transaction that cli/OpenTransaction.java (a Java
# producer, run by Java's source launcher) holds open; the kafka-features test moves
# transaction.version down and back; the kafka-metadata-quorum test describes the
# (one-voter) metadata quorum; the kafka-log-dirs test reads the sizes of a topic's replicas;
# the kafka-acls test expects every ACL command refused at once without an authorizer; the
# kafka-configs tests set a broker logger's level live and reset it, describe a group's
# configs, set dynamic broker configs (the cluster default and one broker's) and a group's.
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

transactions() {
    kafka_tool org.apache.kafka.tools.TransactionsCommand --bootstrap-server "$bootstrap" "$@"
}

features() { kafka_tool org.apache.kafka.tools.FeatureCommand --bootstrap-server "$bootstrap" "$@"; }
quorum() { kafka_tool org.apache.kafka.tools.MetadataQuorumCommand --bootstrap-server "$bootstrap" "$@"; }
log_dirs() { kafka_tool org.apache.kafka.tools.LogDirsCommand --bootstrap-server "$bootstrap" "$@"; }
acls() { kafka_tool org.apache.kafka.tools.AclCommand --bootstrap-server "$bootstrap" "$@"; }
configs() { kafka_tool kafka.admin.ConfigCommand --bootstrap-server "$bootstrap" "$@"; }

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

# --- kafka-transactions ------------------------------------------------------------------
# Its tables are padded columns, each followed by a tab; awk's default splitting reads them
# (an empty last column, e.g. TopicPartitions of a finished transaction, is one field less).

# open_transaction DIR TRANSACTIONAL_ID TOPIC PARTITION...: starts cli/OpenTransaction.java in
# the background (its output in DIR/txn.out, its stdin the fifo DIR/txn.ctl, held open on fd 3
# of the caller) and waits until its transaction holds one record on each partition. Fails
# if the producer exits first (a broker without transactions: initTransactions() times out
# after 30 s) or is not ready within 90 s. `end_transaction DIR commit|abort` ends it.
open_transaction() {
    local dir="$1" start=$SECONDS
    shift
    mkfifo "$dir/txn.ctl"
    (exec timeout 300 java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
        "-Dlog4j2.configurationFile=$here/tools-log4j2.properties" \
        -cp "$root/.kafka-ref/libs/*" "$here/cli/OpenTransaction.java" "$bootstrap" "$@" \
        <"$dir/txn.ctl" >"$dir/txn.out" 2>"$dir/txn.err") &
    echo $! >"$dir/txn.pid"
    exec 3>"$dir/txn.ctl"
    until grep -qx ready "$dir/txn.out"; do
        if ! kill -0 "$(cat "$dir/txn.pid")" 2>/dev/null; then
            cat "$dir/txn.out" "$dir/txn.err" >&2
            fail "the transactional producer exited before its transaction was open"
        fi
        ((SECONDS - start < 90)) || fail "no open transaction after 90s"
        sleep 0.2
    done
    cat "$dir/txn.out"
}

end_transaction() {
    echo "$2" >&3
    exec 3>&-
    local rc=0
    wait "$(cat "$1/txn.pid")" || rc=$?
    cat "$1/txn.out"
    ((rc == 0)) || { cat "$1/txn.err" >&2; fail "the transactional producer exited with $rc"; }
    local done=committed
    [[ "$2" == abort ]] && done=aborted
    grep -qx "$done" "$1/txn.out" || fail "the producer did not $2 its transaction"
}

# open_offset DIR PARTITION: the offset of the open transaction's record on PARTITION.
open_offset() { awk -v p="$2" '$1 == "open" && $3 == p { print $4 }' "$1/txn.out"; }

# leader_of TOPIC: the broker id leading partition 0 (find-hanging's --broker-id).
leader_of() {
    topics --describe --topic "$1" | grep -o 'Partition: 0	Leader: [0-9]*' | grep -o '[0-9]*$'
}

# row WHAT COLUMN VALUE: the first row of stdin whose COLUMN-th field is VALUE, or fail.
row() {
    local out
    out="$(cat)"
    echo "$out" >&2
    awk -v c="$2" -v v="$3" '$c == v { print; exit }' <<<"$out" | grep . || fail "$1: no row with $3"
}

# read_partition TOPIC PARTITION ISOLATION: the values of PARTITION from the start, read
# until 5 s pass without a record.
read_partition() {
    console_consumer --topic "$1" --partition "$2" --offset earliest --isolation-level "$3" \
        --timeout-ms 5000 2>/dev/null
}

find_hanging_header='Topic	Partition	ProducerId	ProducerEpoch	CoordinatorEpoch	StartOffset	LastTimestamp	Duration(min)	'

test_transactions_list_describe_and_producers_of_an_open_transaction() {
    local t txn dir broker list desc prod coordinator pid state epoch o0 o1 out f
    t="$(unique_topic txn-tools)"
    txn="$t-txn"
    dir="$(mktemp -d)"
    topics --create --topic "$t" --partitions 2 --replication-factor 1 >/dev/null
    broker="$(leader_of "$t")"
    open_transaction "$dir" "$txn" "$t" 0 1
    o0="$(open_offset "$dir" 0)"
    o1="$(open_offset "$dir" 1)"
    assert_eq "0 0" "$o0 $o1" "offsets of the open transaction's records"

    # list: TransactionalId Coordinator ProducerId TransactionState
    list="$(transactions list | row list 1 "$txn")"
    read -r _ coordinator pid state <<<"$list"
    assert_eq "$broker Ongoing" "$coordinator $state" "list: coordinator and state"

    # describe: CoordinatorId TransactionalId ProducerId ProducerEpoch TransactionState
    # TransactionTimeoutMs CurrentTransactionStartTimeMs TransactionDurationMs TopicPartitions
    desc="$(transactions describe --transactional-id "$txn" | row describe 2 "$txn")"
    read -r -a f <<<"$desc"
    epoch="${f[3]}"
    assert_eq "$broker $pid Ongoing 300000" "${f[0]} ${f[2]} ${f[4]} ${f[5]}" \
        "describe: coordinator, producer id, state, timeout"
    [[ "${f[6]}" =~ ^[0-9]{13}$ && "${f[7]}" =~ ^[0-9]+$ ]] ||
        fail "describe: start time and duration in ms: ${f[6]} ${f[7]}"
    assert_eq "$t-0,$t-1" "$(tr , '\n' <<<"${f[8]}" | sort | paste -sd,)" "describe: partitions"

    # describe-producers: ProducerId ProducerEpoch LatestCoordinatorEpoch LastSequence
    # LastTimestamp CurrentTransactionStartOffset; no marker yet: coordinator epoch -1.
    for p in 0 1; do
        prod="$(transactions describe-producers --topic "$t" --partition "$p" |
            row describe-producers 1 "$pid")"
        read -r -a f <<<"$prod"
        assert_eq "$epoch -1 0 0" "${f[1]} ${f[2]} ${f[3]} ${f[5]}" \
            "describe-producers partition $p: epoch, coordinator epoch, sequence, start offset"
        [[ "${f[4]}" =~ ^[0-9]{13}$ ]] || fail "describe-producers: last timestamp ${f[4]}"
    done

    # Not hanging: Ongoing with these partitions at its coordinator. With the default
    # --max-transaction-timeout (15 min) it is too young to be a candidate; with 0 it is one,
    # looked up by producer id (ListTransactions) and described, and still not hanging.
    out="$(transactions find-hanging --broker-id "$broker")"
    assert_eq "$find_hanging_header" "$out" "find-hanging prints only its header"
    out="$(transactions find-hanging --broker-id "$broker" --max-transaction-timeout 0)"
    assert_eq "$find_hanging_header" "$out" "find-hanging --max-transaction-timeout 0"
    out="$(transactions find-hanging --topic "$t" --max-transaction-timeout 0)"
    assert_eq "$find_hanging_header" "$out" "find-hanging --topic"

    end_transaction "$dir" commit
    desc="$(transactions describe --transactional-id "$txn" | row describe 2 "$txn")"
    read -r -a f <<<"$desc"
    assert_eq "$pid CompleteCommit 8" "${f[2]} ${f[4]} ${#f[@]}" \
        "describe after the commit: state, no partitions"
    list="$(transactions list | row list 1 "$txn")"
    assert_eq CompleteCommit "$(awk '{ print $4 }' <<<"$list")" "list after the commit"
    for p in 0 1; do
        prod="$(transactions describe-producers --topic "$t" --partition "$p" |
            row describe-producers 1 "$pid")"
        read -r -a f <<<"$prod"
        # The commit marker carries the coordinator's epoch (>= 0); no open transaction.
        [[ "${f[2]}" =~ ^[0-9]+$ ]] || fail "describe-producers: coordinator epoch ${f[2]}"
        assert_eq None "${f[5]}" "describe-producers partition $p after the commit"
    done
    assert_eq "open-0" "$(read_partition "$t" 0 read_committed)" "read_committed partition 0"

    out="$(transactions describe --transactional-id "$t-unknown" 2>&1)" &&
        fail "describe of an unknown transactional id exited 0: $out"
    grep -qF "Failed to describe transaction state of transactional-id \`$t-unknown\`: DescribeTransactions request for transactionalId \`$t-unknown\` failed because the ID could not be found." \
        <<<"$out" || fail "describe of an unknown id: $out"
}

test_transactions_abort_an_open_transaction_by_its_start_offset() {
    local t txn dir o0 out prod
    t="$(unique_topic txn-abort)"
    txn="$t-txn"
    dir="$(mktemp -d)"
    topics --create --topic "$t" --partitions 2 --replication-factor 1 >/dev/null
    # A committed transaction first (records at 0, markers at 1), then the open one at 2.
    open_transaction "$dir" "$txn" "$t" --committed-first 0 1
    o0="$(open_offset "$dir" 0)"
    assert_eq "2 2" "$o0 $(open_offset "$dir" 1)" "offsets of the open transaction's records"

    out="$(transactions abort --topic "$t" --partition 0 --start-offset 0 2>&1)" &&
        fail "abort at the committed transaction's offset exited 0: $out"
    grep -qF "Could not find any open transactions starting at offset 0 on partition $t-0" \
        <<<"$out" || fail "abort at a wrong start offset: $out"

    # The tool finds the producer whose open transaction starts there (DescribeProducers) and
    # sends WriteTxnMarkers (ABORT) with its producer id and epoch: partition 0 no longer holds
    # an open transaction, while the coordinator still has it Ongoing on both partitions.
    transactions abort --topic "$t" --partition 0 --start-offset "$o0"
    prod="$(transactions describe-producers --topic "$t" --partition 0 |
        row describe-producers 6 None)"
    [[ "$(awk '{ print $3 }' <<<"$prod")" =~ ^[0-9]+$ ]] ||
        fail "describe-producers after the abort: a coordinator epoch: $prod"
    out="$(transactions describe --transactional-id "$txn" | row describe 2 "$txn")"
    assert_eq "Ongoing $t-0,$t-1" \
        "$(awk '{ print $5 }' <<<"$out") $(awk '{ print $9 }' <<<"$out" | tr , '\n' | sort | paste -sd,)" \
        "describe after the abort tool"
    assert_eq "$t:0:4" "$(get_offsets --topic "$t" --time -1 | grep "^$t:0:")" \
        "partition 0 after the abort marker"
    # Partition 0's last stable offset is its end again; partition 1's is still 2.
    assert_eq "committed-0" "$(read_partition "$t" 0 read_committed)" \
        "read_committed partition 0 after the abort"
    assert_eq "committed-1" "$(read_partition "$t" 1 read_committed)" \
        "read_committed partition 1, its transaction open"
    out="$(transactions find-hanging --topic "$t" --max-transaction-timeout 0)"
    assert_eq "$find_hanging_header" "$out" "find-hanging after the abort tool"

    # The producer commits: the coordinator's COMMIT marker also reaches partition 0, whose
    # transaction is already aborted there. The aborted record stays aborted.
    end_transaction "$dir" commit
    assert_eq "$(printf '%s:0:5\n%s:1:4' "$t" "$t")" "$(get_offsets --topic "$t" --time -1 | sort)" \
        "end offsets after the commit"
    assert_eq "committed-0" "$(read_partition "$t" 0 read_committed)" "read_committed partition 0"
    assert_eq "$(printf 'committed-0\nopen-0')" "$(read_partition "$t" 0 read_uncommitted)" \
        "read_uncommitted partition 0"
    assert_eq "$(printf 'committed-1\nopen-1')" "$(read_partition "$t" 1 read_committed)" \
        "read_committed partition 1"
}

# A hanging transaction: compat/lib/hanging_txn.py writes a transactional record to partition
# 0 without AddPartitionsToTxn (its timestamp 20 minutes old, so that find-hanging's default
# --max-transaction-timeout of 15 minutes does not skip it). By default both brokers verify
# transactional writes and refuse it with INVALID_TXN_STATE (48), and nothing hangs. With
# verification off (Kafka: KAFKA_REF_EXTRA_CONFIG=transaction.partition.verification.enable=false
# compat/kafka-ref/start.sh; highwater: HIGHWATER_CONFIG=a config with
# "transaction.partition.verification.enable" = false) the record is appended and the
# transaction hangs: find-hanging lists it and abort ends it.
test_transactions_find_hanging_and_abort_a_hanging_transaction() {
    local t txn dir broker out row err base args prod
    t="$(unique_topic txn-hanging)"
    txn="$t-txn"
    dir="$(mktemp -d)"
    topics --create --topic "$t" --partitions 2 --replication-factor 1 >/dev/null
    broker="$(leader_of "$t")"
    timeout 120 "$root/compat/.venv/bin/python" "$root/compat/lib/hanging_txn.py" "$bootstrap" \
        "$txn" "$t" 0 1200000 | tee "$dir/probe"
    read -r _ err base < <(grep '^produce ' "$dir/probe")
    if [[ "$err" == 48 ]]; then
        echo "the broker verifies transactional writes: INVALID_TXN_STATE, nothing hangs"
        assert_eq "$t:0:0" "$(get_offsets --topic "$t" --time -1 | grep "^$t:0:")" \
            "partition 0 after the refused write"
        out="$(transactions find-hanging --broker-id "$broker")"
        assert_eq "$find_hanging_header" "$out" "find-hanging"
        return 0
    fi
    assert_eq "0 0" "$err $base" "the unverified transactional write (error, offset)"
    # The coordinator has the producer, Empty, without partitions: partition 0 hangs.
    out="$(transactions describe --transactional-id "$txn" | row describe 2 "$txn")"
    assert_eq "Empty 8" "$(awk '{ print $5, NF }' <<<"$out")" "describe: Empty, no partitions"
    for args in "--broker-id $broker" "--topic $t"; do
        # shellcheck disable=SC2086 # two words
        out="$(transactions find-hanging $args)"
        echo "$out"
        assert_eq 2 "$(wc -l <<<"$out")" "find-hanging $args: the header and one row"
        row="$(tail -n 1 <<<"$out")"
        # Topic Partition ProducerId ProducerEpoch CoordinatorEpoch StartOffset LastTimestamp
        # Duration(min)
        assert_eq "$t 0 $(awk '$1 == "init" { print $3, $4 }' "$dir/probe") -1 0 20" \
            "$(awk '{ print $1, $2, $3, $4, $5, $6, $8 }' <<<"$row")" "find-hanging $args"
    done
    assert_eq "" "$(read_partition "$t" 0 read_committed)" "read_committed while it hangs"

    transactions abort --topic "$t" --partition 0 --start-offset 0
    out="$(transactions find-hanging --broker-id "$broker")"
    assert_eq "$find_hanging_header" "$out" "find-hanging after the abort"
    assert_eq "$t:0:2" "$(get_offsets --topic "$t" --time -1 | grep "^$t:0:")" \
        "partition 0: the record and the abort marker"
    prod="$(transactions describe-producers --topic "$t" --partition 0 |
        row describe-producers 6 None)"
    assert_eq 0 "$(awk '{ print $3 }' <<<"$prod")" "describe-producers: coordinator epoch 0"
    assert_eq "" "$(read_partition "$t" 0 read_committed)" "read_committed after the abort"
    assert_eq "hanging-0" "$(read_partition "$t" 0 read_uncommitted)" "read_uncommitted"
}

# feature_field NAME FIELD: FIELD (e.g. FinalizedVersionLevel) of feature NAME in
# kafka-features describe.
feature_field() {
    features describe | awk -v n="$1" -v f="$2" '$2 == n {
        for (i = 3; i < NF; i++) if ($i == f ":") print $(i + 1) }'
}

test_features_describe_downgrade_and_upgrade() {
    local out max epoch
    out="$(features describe)"
    echo "$out"
    for f in metadata.version transaction.version group.version; do
        grep -qE "^Feature: $f	SupportedMinVersion: [^	]+	SupportedMaxVersion: [^	]+	FinalizedVersionLevel: [^	]+	Epoch: [0-9]+$" \
            <<<"$out" || fail "describe lacks $f with a finalized level and an epoch"
    done
    assert_eq 1 "$(feature_field group.version FinalizedVersionLevel)" "group.version"
    max="$(feature_field transaction.version SupportedMaxVersion)"
    assert_eq "$max" "$(feature_field transaction.version FinalizedVersionLevel)" \
        "transaction.version starts at the highest level supported"
    epoch="$(feature_field transaction.version Epoch)"

    out="$(features downgrade --feature transaction.version=0)"
    assert_eq "transaction.version was downgraded to 0." "$out" "downgrade output"
    assert_eq 0 "$(feature_field transaction.version FinalizedVersionLevel)" "after the downgrade"
    (($(feature_field transaction.version Epoch) > epoch)) || fail "the epoch did not move"

    if out="$(features upgrade --feature transaction.version=$((max + 1)) 2>&1)"; then
        fail "an upgrade past the supported level succeeded: $out"
    fi
    grep -q "Invalid update version $((max + 1)) for feature transaction.version. .* only supports versions 0-$max" \
        <<<"$out" || fail "refusal message: $out"
    if out="$(features upgrade --feature group.version=0 2>&1)"; then
        fail "an upgrade to a lower level succeeded: $out"
    fi

    out="$(features upgrade --feature transaction.version="$max")"
    assert_eq "transaction.version was upgraded to $max." "$out" "upgrade output"
    assert_eq "$max" "$(feature_field transaction.version FinalizedVersionLevel)" "after the upgrade"
}

test_metadata_quorum_describe_status_and_replication() {
    local out leader end
    out="$(quorum describe --status)"
    echo "$out"
    grep -qE '^ClusterId: +[A-Za-z0-9_-]{22}$' <<<"$out" || fail "--status: ClusterId"
    leader="$(awk '$1 == "LeaderId:" { print $2 }' <<<"$out")"
    [[ "$leader" =~ ^[0-9]+$ ]] || fail "--status: LeaderId '$leader'"
    grep -qE '^LeaderEpoch: +[0-9]+$' <<<"$out" || fail "--status: LeaderEpoch"
    grep -qE '^HighWatermark: +[1-9][0-9]*$' <<<"$out" || fail "--status: HighWatermark"
    grep -qE '^MaxFollowerLag: +0$' <<<"$out" || fail "--status: one voter, no lag"
    grep -qE "^CurrentVoters: +\[\{\"id\": $leader[,}]" <<<"$out" || fail "--status: CurrentVoters"

    out="$(quorum describe --replication)"
    echo "$out"
    grep -qE '^NodeId\s+DirectoryId\s+LogEndOffset\s+Lag\s+LastFetchTimestamp\s+LastCaughtUpTimestamp\s+Status' \
        <<<"$out" || fail "--replication: header"
    end="$(awk -v id="$leader" '$1 == id && $NF == "Leader" { print $3, $4 }' <<<"$out")"
    [[ "$end" =~ ^[1-9][0-9]*\ 0$ ]] || fail "--replication: the leader's row (LEO, lag): '$end'"
}

# kafka-log-dirs prints its answer as one JSON line; this checks it for topic $2 of which
# partition 0 holds records and partition 1 none, on every broker and directory listed.
check_log_dirs_json() {
    python3 - "$1" "$2" <<'PY'
import json, sys
answer, topic = json.loads(sys.argv[1]), sys.argv[2]
brokers = answer["brokers"]
assert answer["version"] == 1 and brokers, answer
sizes = {}
for broker in brokers:
    assert broker["logDirs"], broker
    for d in broker["logDirs"]:
        assert d["error"] is None and d["logDir"].startswith("/"), d
        for p in d["partitions"]:
            assert p["partition"].startswith(topic + "-"), ("only the topic asked for", p)
            assert p["offsetLag"] == 0 and p["isFuture"] is False, p
            sizes[p["partition"]] = p["size"]
assert set(sizes) == {topic + "-0", topic + "-1"}, sizes
assert sizes[topic + "-0"] > 0 and sizes[topic + "-1"] == 0, sizes
print("sizes", sizes)
PY
}

test_log_dirs_describe_sizes_of_a_topic() {
    local t out
    t="$(unique_topic dirs)"
    # Records in partition 0, then an empty partition 1 added.
    topics --create --topic "$t" --partitions 1 --replication-factor 1 >/dev/null
    seq 1 200 | console_producer --topic "$t"
    topics --alter --topic "$t" --partitions 2
    out="$(log_dirs --describe --topic-list "$t")"
    echo "$out"
    grep -q '^Querying brokers for log directories information$' <<<"$out" ||
        fail "kafka-log-dirs: header"
    check_log_dirs_json "$(tail -n 1 <<<"$out")" "$t" || fail "kafka-log-dirs: JSON"
}

# Without an authorizer every ACL command fails at once (exit 1) with Kafka's
# SecurityDisabledException, instead of retrying until a timeout.
test_acls_are_refused_without_an_authorizer() {
    local out rc started=$SECONDS
    for command in "--list" \
        "--add --allow-principal User:alice --operation Read --topic t" \
        "--remove --force --allow-principal User:alice --operation Read --topic t"; do
        # shellcheck disable=SC2086 # the command's words
        out="$(acls $command 2>&1)" && rc=0 || rc=$?
        assert_eq 1 "$rc" "kafka-acls $command: exit status"
        grep -q 'SecurityDisabledException: No Authorizer is configured.' <<<"$out" ||
            fail "kafka-acls $command: $out"
    done
    ((SECONDS - started < 60)) || fail "kafka-acls took $((SECONDS - started)) s"
}

# logger_level NAME: the level kafka-configs lists for logger NAME of broker 1.
logger_level() {
    configs --describe --entity-type broker-loggers --entity-name 1 |
        awk -v name="$1" '{ split($1, kv, "="); if (kv[1] == name) print kv[2] }'
}

test_configs_broker_loggers_set_and_reset_a_level_live() {
    local out logger root_level
    out="$(configs --describe --entity-type broker-loggers --entity-name 1)"
    grep -q '^Dynamic configs for broker-logger 1 are:$' <<<"$out" || fail "header: $out"
    root_level="$(awk '{ split($1, kv, "="); if (kv[1] == "root") print kv[2] }' <<<"$out")"
    [[ -n "$root_level" ]] || fail "no root logger in: $out"
    # The broker's first logger other than root, whatever the broker names its loggers.
    logger="$(awk 'NR > 1 { split($1, kv, "="); if (kv[1] != "root") { print kv[1]; exit } }' \
        <<<"$out")"
    [[ -n "$logger" ]] || fail "no logger besides root in: $out"
    configs --alter --entity-type broker-loggers --entity-name 1 --add-config "$logger=DEBUG" |
        grep -q 'Completed updating config for broker-logger 1.' || fail "alter"
    assert_eq DEBUG "$(logger_level "$logger")" "$logger after the change"
    configs --alter --entity-type broker-loggers --entity-name 1 --delete-config "$logger" |
        grep -q 'Completed updating config for broker-logger 1.' || fail "delete"
    assert_eq "$root_level" "$(logger_level "$logger")" "$logger back at the root's level"
}

test_configs_describe_a_groups_configs() {
    local t g out
    t="$(unique_topic groupcfg)"
    g="$t-group"
    topics --create --topic "$t" --partitions 1 --replication-factor 1 >/dev/null
    echo one | console_producer --topic "$t"
    console_consumer --topic "$t" --group "$g" --from-beginning --max-messages 1 \
        --timeout-ms 30000 >/dev/null
    out="$(configs --describe --all --entity-type groups --entity-name "$g")"
    echo "$out"
    grep -qxF "All configs for group $g are:" <<<"$out" || fail "header"
    for entry in consumer.heartbeat.interval.ms=5000 consumer.session.timeout.ms=45000 \
        share.auto.offset.reset=latest streams.num.standby.replicas=0; do
        grep -qE "^  ${entry//./\\.} sensitive=false synonyms=\{DEFAULT_CONFIG:" <<<"$out" ||
            fail "--all: $entry"
    done
    assert_eq 10 "$(grep -c ' sensitive=false ' <<<"$out")" "ten group configs"
    out="$(configs --describe --entity-type groups --entity-name "$g")"
    assert_eq "Dynamic configs for group $g are:" "$out" "no dynamic config"
    out="$(configs --describe --entity-type groups --entity-name "$g-none")"
    assert_eq "The group '$g-none' doesn't exist and doesn't have dynamic config." "$out" \
        "an unknown group"
}

test_configs_dynamic_broker_configs_set_describe_and_delete() {
    local out
    # The cluster-wide default, then this broker's own value above it.
    configs --alter --entity-type brokers --entity-default --add-config log.cleaner.backoff.ms=16000 |
        grep -qxF 'Completed updating default config for brokers in the cluster.' ||
        fail "alter the default"
    out="$(configs --describe --entity-type brokers --entity-default)"
    echo "$out"
    grep -qF '  log.cleaner.backoff.ms=16000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.backoff.ms=16000}' \
        <<<"$out" || fail "describe the default"
    configs --alter --entity-type brokers --entity-name 1 --add-config log.cleaner.backoff.ms=17000 |
        grep -qxF 'Completed updating config for broker 1.' || fail "alter broker 1"
    out="$(configs --describe --all --entity-type brokers --entity-name 1)"
    grep -qF '  log.cleaner.backoff.ms=17000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.backoff.ms=17000, DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.backoff.ms=16000, DEFAULT_CONFIG:log.cleaner.backoff.ms=15000}' \
        <<<"$out" || fail "describe --all: $(grep backoff <<<"$out")"
    # A static key and a bad value are refused with Kafka's words.
    out="$(configs --alter --entity-type brokers --entity-name 1 --add-config log.dirs=/tmp/x 2>&1)" &&
        fail "log.dirs accepted"
    grep -qF 'InvalidRequestException: Cannot update these configs dynamically: Set(log.dirs)' \
        <<<"$out" || fail "log.dirs: $out"
    out="$(configs --alter --entity-type brokers --entity-name 1 \
        --add-config leader.replication.throttled.rate=-5 2>&1)" && fail "-5 accepted"
    grep -qF 'InvalidRequestException: Invalid value -5 for configuration leader.replication.throttled.rate: Value must be at least 0' \
        <<<"$out" || fail "-5: $out"
    configs --alter --entity-type brokers --entity-name 1 --delete-config log.cleaner.backoff.ms >/dev/null
    configs --alter --entity-type brokers --entity-default --delete-config log.cleaner.backoff.ms >/dev/null
    out="$(configs --describe --entity-type brokers --entity-name 1)"
    assert_eq "Dynamic configs for broker 1 are:" "$out" "every dynamic config deleted"
}

test_configs_a_groups_own_configs_set_and_refused() {
    local g out
    g="$(unique_topic tuned)-group"
    configs --alter --entity-type groups --entity-name "$g" \
        --add-config consumer.heartbeat.interval.ms=6000 |
        grep -qxF "Completed updating config for group $g." || fail "alter"
    out="$(configs --describe --entity-type groups --entity-name "$g")"
    echo "$out"
    grep -qxF '  consumer.heartbeat.interval.ms=6000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:consumer.heartbeat.interval.ms=6000}' \
        <<<"$out" || fail "describe"
    out="$(configs --alter --entity-type groups --entity-name "$g" \
        --add-config consumer.session.timeout.ms=1000 2>&1)" && fail "1000 accepted"
    grep -qF 'InvalidConfigurationException: consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms' \
        <<<"$out" || fail "1000: $out"
    out="$(configs --alter --entity-type groups --entity-name "$g" --add-config no.such=1 2>&1)" &&
        fail "an unknown key accepted"
    grep -qF 'InvalidConfigurationException: Unknown group config name: no.such' <<<"$out" ||
        fail "unknown: $out"
    configs --alter --entity-type groups --entity-name "$g" \
        --delete-config consumer.heartbeat.interval.ms >/dev/null
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
run_test "kafka-transactions: list, describe, describe-producers, find-hanging of an open transaction" \
    test_transactions_list_describe_and_producers_of_an_open_transaction
run_test "kafka-transactions: abort an open transaction by its start offset, then its commit" \
    test_transactions_abort_an_open_transaction_by_its_start_offset
run_test "kafka-transactions: find-hanging and abort of a hanging transaction (if the broker lets one in)" \
    test_transactions_find_hanging_and_abort_a_hanging_transaction
run_test "kafka-features: describe, downgrade and upgrade transaction.version, refusals" \
    test_features_describe_downgrade_and_upgrade
run_test "kafka-metadata-quorum: describe --status and --replication" \
    test_metadata_quorum_describe_status_and_replication
run_test "kafka-log-dirs: describe the sizes of a topic's replicas" \
    test_log_dirs_describe_sizes_of_a_topic
run_test "kafka-acls: list, add and remove refused at once without an authorizer" \
    test_acls_are_refused_without_an_authorizer
run_test "kafka-configs: a broker logger's level set and reset live" \
    test_configs_broker_loggers_set_and_reset_a_level_live
run_test "kafka-configs: a group's configs (--all, dynamic, an unknown group)" \
    test_configs_describe_a_groups_configs
run_test "kafka-configs: dynamic broker configs, default and per broker, set, described, deleted" \
    test_configs_dynamic_broker_configs_set_describe_and_delete
run_test "kafka-configs: a group's own configs set, described and refused out of range" \
    test_configs_a_groups_own_configs_set_and_refused
suite_summary
