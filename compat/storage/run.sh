#!/usr/bin/env bash
# Compat suite: Apache Kafka's own DumpLogSegments (kafka.tools.DumpLogSegments, in the
# kafka_2.13 4.1.1 jar of .kafka-ref/libs) reads the segments and indexes highwater writes.
#
# Starts its own throwaway highwater (it needs the data dir) with small segments and dense
# indexes, produces with kcat (plain, gzip, snappy, lz4, zstd, keyed, idempotent), stops it
# with SIGTERM (files trimmed, clean-shutdown marker), then runs DumpLogSegments on every
# .log/.index/.timeindex with --verify-index-only, with --index-sanity-check and with
# --deep-iteration --print-data-log. Any index mismatch, time index error, non-consecutive
# offset, invalid batch, trailing bytes, exception or stderr output fails; the records it
# prints must be exactly those produced, with the codec asked for. A damaged copy of one
# segment shows that these checks can fail (and that `highwater dump --verify` fails too).
# A compacted topic (cleanup.policy=compact, created with Kafka's TopicCommand) is cleaned by
# highwater's log cleaner before the stop: kcat must read back the latest value of every key
# and DumpLogSegments must read the cleaned segments cleanly (gaps in offsets are what
# compaction leaves, so its "Non-consecutive offsets" report is expected there).
# A transactional producer (confluent-kafka) commits one transaction and aborts another:
# the tool must read highwater's COMMIT/ABORT markers, the aborted transaction in the
# segment's .txnindex, and its --transaction-log-decoder the coordinator's records in
# __transaction_state. Every producer snapshot (.snapshot) must pass Kafka's reader.
# Prints "N passed, N failed" last; exits non-zero if a test failed.
# Usage: compat/storage/run.sh
# Environment: HIGHWATER_BIN (default target/release/highwater), KEEP_DATA=1 keeps the
# temporary directory and prints its path.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
test_suite_name=storage
# shellcheck source=../lib/testlib.sh source-path=SCRIPTDIR
source "$root/compat/lib/testlib.sh"

bin="${HIGHWATER_BIN:-$root/target/release/highwater}"
[[ -x "$bin" ]] || fail "no highwater binary at $bin (make build)"
command -v kcat >/dev/null || fail "kcat is not installed; run compat/install-deps.sh"
command -v java >/dev/null || fail "java is not installed; run compat/install-deps.sh"
compgen -G "$root/.kafka-ref/libs/kafka_2.13-*.jar" >/dev/null ||
    fail "no Kafka jars in .kafka-ref/libs; run compat/install-deps.sh"

data="$test_tmp/data"
out="$test_tmp/out"
mkdir -p "$out"
pid=""

# shellcheck disable=SC2317 # run from the EXIT trap
cleanup() {
    if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid" 2>/dev/null || true
    fi
    if [[ -n "${KEEP_DATA:-}" ]]; then
        echo "storage: kept $test_tmp"
    else
        rm -rf "$test_tmp"
    fi
}
trap cleanup EXIT

# ---- a throwaway highwater ------------------------------------------------------------
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])')"
bootstrap="127.0.0.1:$port"
"$bin" serve --config "$root/config/server.toml" --listeners "$bootstrap" \
    --log-dirs "$data" --set http.listeners= --set log.segment.bytes=4096 --set log.index.interval.bytes=256 \
    --set log.cleaner.backoff.ms=100 >"$out/broker.log" 2>&1 </dev/null &
pid=$!
if ! wait_until 30 kcat -L -b "$bootstrap" -m 2; then
    tail -n 40 "$out/broker.log" >&2
    exit 1
fi

# ---- data: one topic per case ---------------------------------------------------------
# case NAME: the kcat flags of that case.
cases=(plain gzip snappy lz4 zstd keyed idempotent)
declare -A case_flags=(
    [plain]="-z none"
    [gzip]="-z gzip"
    [snappy]="-z snappy"
    [lz4]="-z lz4"
    [zstd]="-z zstd"
    [keyed]="-z none -K :"
    [idempotent]="-z zstd -X enable.idempotence=true"
)
declare -A case_codec=(
    [plain]=none [gzip]=gzip [snappy]=snappy [lz4]=lz4 [zstd]=zstd [keyed]=none
    [idempotent]=zstd
)

# input_lines NAME: 300 compressible lines (clients send a batch uncompressed when
# compressing would not make it smaller); "key:value" for the keyed case.
input_lines() {
    local i
    for ((i = 0; i < 300; i++)); do
        if [[ "$1" == keyed ]]; then printf 'key-%d:' "$((i % 13))"; fi
        printf '%s message %d: the quick brown fox jumps over the lazy dog, %d times\n' \
            "$1" "$i" "$((i % 7))"
    done
}

for name in "${cases[@]}"; do
    input_lines "$name" >"$out/in-$name.txt"
    # linger.ms=50 lets batches fill to 15 records even on a loaded machine: with 5 ms, a
    # busy one sent batches too small to be worth compressing and the codec check failed.
    # shellcheck disable=SC2086 # the flags are words
    if ! timeout 60 kcat -b "$bootstrap" -P -l -t "storage-$name" ${case_flags[$name]} \
        -X batch.num.messages=15 -X linger.ms=50 "$out/in-$name.txt"; then
        fail "kcat could not produce the $name case"
    fi
done

# ---- a compacted topic, cleaned before the stop --------------------------------------
java -cp "$root/.kafka-ref/libs/*" \
    "-Dlog4j2.configurationFile=$root/compat/java/tools-log4j2.properties" \
    org.apache.kafka.tools.TopicCommand --bootstrap-server "$bootstrap" --create \
    --topic storage-compacted --partitions 1 --config cleanup.policy=compact \
    --config min.cleanable.dirty.ratio=0.01 --config delete.retention.ms=100 \
    >"$out/create-compacted.out" 2>&1 || fail "TopicCommand could not create storage-compacted"
# compacted_lines CODEC: 200 records over 9 keys; key-3's last write is a tombstone (kcat -Z).
compacted_lines() {
    local i
    for ((i = 0; i < 200; i++)); do printf 'key-%d:%s value %d\n' "$((i % 9))" "$1" "$i"; done
    printf 'key-3:\n'
}
for codec in none gzip zstd; do
    compacted_lines "$codec" >"$out/in-compacted-$codec.txt"
    timeout 60 kcat -b "$bootstrap" -P -l -t storage-compacted -K : -Z -z "$codec" \
        -X batch.num.messages=15 -X linger.ms=5 "$out/in-compacted-$codec.txt" ||
        fail "kcat could not produce to storage-compacted"
done
# Fillers roll the segments holding the keyed records out of the active one.
seq 0 299 | sed 's/^/filler:/' | timeout 60 kcat -b "$bootstrap" -P -t storage-compacted \
    -K : -X batch.num.messages=5 || fail "kcat could not produce the fillers"
wait_until 30 grep -q 'cleaned log topic=storage-compacted' "$out/broker.log" ||
    fail "the log cleaner did not clean storage-compacted"
sleep 1
timeout 60 kcat -b "$bootstrap" -C -t storage-compacted -e -o beginning -Z \
    -f '%o %k=%s\n' >"$out/compacted-read.txt" || fail "kcat could not read storage-compacted"

# ---- a transactional topic: one committed and one aborted transaction ---------------
"$root/compat/.venv/bin/python" - "$bootstrap" >"$out/txn.out" 2>&1 <<'PY' ||
import sys
from confluent_kafka import Producer
producer = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": "storage-txn"})
producer.init_transactions(30)
for commit, count in ((True, 20), (False, 10)):
    producer.begin_transaction()
    for i in range(count):
        value = f"{'committed' if commit else 'aborted'} {i}".encode()
        producer.produce("storage-txn", value, partition=0)
    producer.flush(30)
    (producer.commit_transaction if commit else producer.abort_transaction)(30)
PY
    { cat "$out/txn.out" >&2; fail "confluent-kafka could not write the transactions"; }

kill -TERM "$pid"
for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
rc=0
wait "$pid" || rc=$?
pid=""
((rc == 0)) || { tail -n 40 "$out/broker.log" >&2; fail "highwater exited $rc on SIGTERM"; }
[[ -f "$data/.kafka_cleanshutdown" ]] || fail "no clean-shutdown marker after SIGTERM"

# The metadata quorum's raft.log (under __cluster_metadata-0) is not a Kafka segment;
# __transaction_state's binary records are read with their decoder, apart.
mapfile -t files < <(find "$data" \( -name '*.log' -o -name '*.index' -o -name '*.timeindex' \) \
    -not -path '*/storage-compacted-0/*' -not -path '*/__cluster_metadata-0/*' \
    -not -path '*/__transaction_state-*' | sort)
mapfile -t compacted_files < <(find "$data/storage-compacted-0" -name '*.log' -o \
    -name '*.index' -o -name '*.timeindex' | sort)
((${#files[@]} > 0)) || fail "highwater wrote no segment files"
files_csv="$(IFS=,; echo "${files[*]}")"
count_files() { printf '%s\n' "${files[@]}" | grep -c "\\.$1\$" || true; }

# ---- Kafka's DumpLogSegments ----------------------------------------------------------
# dump_log_segments OUT_NAME ARGS...: runs the tool; stdout, stderr and status go to
# $out/OUT_NAME.{out,err,rc}.
dump_log_segments() {
    local name="$1" rc=0
    shift
    timeout 180 java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
        "-Dlog4j2.configurationFile=$root/compat/java/tools-log4j2.properties" \
        -cp "$root/.kafka-ref/libs/*" kafka.tools.DumpLogSegments "$@" \
        >"$out/$name.out" 2>"$out/$name.err" || rc=$?
    echo "$rc" >"$out/$name.rc"
}

dump_log_segments verify --files "$files_csv" --verify-index-only
dump_log_segments sanity --files "$files_csv" --index-sanity-check
dump_log_segments deep --files "$files_csv" --deep-iteration --print-data-log
compacted_csv="$(IFS=,; echo "${compacted_files[*]}")"
dump_log_segments compacted-verify --files "$compacted_csv" --verify-index-only
dump_log_segments compacted-deep --files "$compacted_csv" --deep-iteration --print-data-log

# What DumpLogSegments prints when something is wrong (DumpLogSegments.scala): index
# mismatches, time index errors, non-consecutive offsets, trailing bytes, invalid batches,
# and exceptions (CorruptRecordException, CorruptIndexException, ...).
error_pattern='Mismatches in|Found timestamp mismatch|Found out of order timestamp|'
error_pattern+='indexed offsets are not found|Non-consecutive offsets|invalid bytes at the end|'
error_pattern+='isvalid: false|Exception|[Cc]orrupt'

# reported_clean NAME: the run exited 0, wrote nothing to stderr and printed no error.
reported_clean() {
    local name="$1"
    assert_eq 0 "$(cat "$out/$name.rc")" "DumpLogSegments exit status"
    if [[ -s "$out/$name.err" ]]; then
        head -n 40 "$out/$name.err" >&2
        fail "DumpLogSegments wrote to stderr"
    fi
    if grep -E "$error_pattern" "$out/$name.out" >"$out/$name.errors"; then
        head -n 40 "$out/$name.errors" >&2
        fail "DumpLogSegments reported errors"
    fi
}

# every_file_dumped NAME: one "Dumping FILE" line per file, in order.
every_file_dumped() {
    diff <(printf 'Dumping %s\n' "${files[@]}") <(grep '^Dumping ' "$out/$1.out") >&2 ||
        fail "DumpLogSegments did not dump every file"
}

test_verify_index_only() {
    reported_clean verify
    every_file_dumped verify
}

test_index_sanity_check() {
    reported_clean sanity
    every_file_dumped sanity
    local passed empty
    passed="$(grep -c 'passed sanity check\.$' "$out/sanity.out" || true)"
    empty="$(grep -c ' is empty\.$' "$out/sanity.out" || true)"
    assert_eq "$(($(count_files index) + $(count_files timeindex)))" "$((passed + empty))" \
        "index files that passed the sanity check (or are empty)"
}

test_deep_iteration() {
    reported_clean deep
    every_file_dumped deep
    local entries time_entries segments
    entries="$(grep -c '^offset: [0-9]* position: [0-9]*$' "$out/deep.out" || true)"
    time_entries="$(grep -c '^timestamp: [0-9]* offset: [0-9]*$' "$out/deep.out" || true)"
    segments="$(grep -c '^Log starting offset: ' "$out/deep.out" || true)"
    echo "$segments segments, $entries index entries, $time_entries time index entries"
    ((entries > 0)) || fail "no offset index entries: the check would be empty"
    ((time_entries > 0)) || fail "no time index entries: the check would be empty"
    ((segments > ${#cases[@]})) || fail "small segments should roll"
}

# section NAME KIND: the lines DumpLogSegments printed for the topic's files of KIND
# (log, index, timeindex), in file order, without the "Dumping" lines.
section() {
    awk -v dir="/storage-$1-0/" -v suffix=".$2" '
        /^Dumping / {
            tail = substr($0, length($0) - length(suffix) + 1)
            inside = index($0, dir) > 0 && tail == suffix
            next
        }
        inside' "$out/deep.out"
}

# test_records NAME: the records printed are those produced, at offsets 0..N-1, and most
# batches have the case's codec (and a producer id for the idempotent case).
test_records() {
    local name="$1" codec="${case_codec[$1]}"
    section "$name" log >"$out/$name.log.txt"
    awk '/^\| offset: / {
            k = index($0, " key: "); p = index($0, " payload: ")
            key = k ? substr($0, k + 6, p - k - 6) ":" : ""
            print key substr($0, p + 10)
        }' "$out/$name.log.txt" >"$out/$name.records.txt"
    assert_same_file "$out/in-$name.txt" "$out/$name.records.txt" "records of storage-$name"
    local n
    n="$(wc -l <"$out/in-$name.txt")"
    diff <(seq 0 $((n - 1))) \
        <(sed -n 's/^| offset: \([0-9]*\) .*/\1/p' "$out/$name.log.txt") >/dev/null ||
        fail "record offsets are not 0..$((n - 1))"
    local batches with_codec
    batches="$(grep -c '^baseOffset: ' "$out/$name.log.txt")"
    with_codec="$(grep -c " compresscodec: $codec " "$out/$name.log.txt" || true)"
    echo "storage-$name: $n records in $batches batches"
    # librdkafka sends a batch uncompressed when compression would not shrink it (a small
    # last batch), so only require that the codec was exercised: most batches carry it.
    [ "$with_codec" -ge 1 ] && [ $((with_codec * 2)) -ge "$batches" ] ||
        fail "batches stored with codec $codec: $with_codec of $batches"
    if [[ "$name" == idempotent ]]; then
        if grep '^baseOffset: ' "$out/$name.log.txt" | grep -q ' producerId: -1 '; then
            fail "an idempotent batch without a producer id"
        fi
    fi
}

# A copy of the plain topic's first segment with a byte of a record flipped in the .log
# and the first index entry's offset moved: Kafka's tool and `highwater dump --verify`
# must both complain, so the checks above are not vacuous.
test_a_damaged_copy_is_reported() {
    local src="$data/storage-plain-0" copy="$test_tmp/damaged"
    mkdir -p "$copy"
    cp "$src/00000000000000000000.log" "$src/00000000000000000000.index" \
        "$src/00000000000000000000.timeindex" "$copy/"
    local log="$copy/00000000000000000000.log" index="$copy/00000000000000000000.index"
    local size
    size="$(stat -c %s "$log")"
    [[ "$(stat -c %s "$index")" -ge 8 ]] || fail "the first index has no entry to damage"
    # A byte of the last record's value in the first batch (10 bytes before its end, past
    # the 1-byte header count) and the low byte of the first index entry's offset.
    local first_batch_end=$((12 + $(od -An -tu1 -j8 -N4 "$log" |
        awk '{ print ($1 * 16777216) + ($2 * 65536) + ($3 * 256) + $4 }')))
    ((first_batch_end < size)) || fail "the first segment has a single batch"
    printf '\x7e' | dd of="$log" bs=1 seek=$((first_batch_end - 10)) conv=notrunc status=none
    local low
    low="$(od -An -tu1 -j3 -N1 "$index" | tr -d ' ')"
    printf '%b' "\\x$(printf %02x $((low ^ 1)))" |
        dd of="$index" bs=1 seek=3 conv=notrunc status=none
    dump_log_segments damaged --files "$log,$index" --deep-iteration --print-data-log
    cat "$out/damaged.out" "$out/damaged.err"
    grep -q 'isvalid: false' "$out/damaged.out" || fail "Kafka did not flag the flipped byte"
    grep -q 'Mismatches in' "$out/damaged.err" || fail "Kafka did not flag the index entry"
    if "$bin" dump --verify "$log" "$index" >/dev/null 2>"$out/hw-damaged.err"; then
        fail "highwater dump --verify passed a damaged segment"
    fi
    cat "$out/hw-damaged.err"
    grep -q 'stored CRC' "$out/hw-damaged.err" || fail "highwater dump missed the CRC"
}

# last_per_key: "key=value" of the last line of each key in "key=value" lines on stdin.
last_per_key() {
    awk -F= '{ last[$1] = $2 } END { for (k in last) print k "=" last[k] }' | sort
}

test_compacted_read() {
    local produced read
    produced=$((3 * 201 + 300))
    read="$(wc -l <"$out/compacted-read.txt")"
    echo "storage-compacted: $produced records produced, $read read back"
    ((read < produced)) || fail "storage-compacted was not compacted"
    sort -n -c <(cut -d' ' -f1 "$out/compacted-read.txt") || fail "offsets do not increase"
    # Every key's last value read is the last one produced; key-3 ends with its tombstone
    # (read as NULL), unless the tombstone itself is already gone with all of key-3.
    local expected actual
    expected="$(cat "$out"/in-compacted-{none,gzip,zstd}.txt | tr : = | grep -v '^key-3=' |
        last_per_key)"
    actual="$(sed 's/^[0-9]* //' "$out/compacted-read.txt" | grep '^key-' | last_per_key)"
    diff <(echo "$expected") <(echo "$actual" | grep -v '^key-3=') >&2 ||
        fail "a key's latest value was lost"
    if echo "$actual" | grep '^key-3=' | grep -v '=NULL$'; then
        fail "a deleted key came back"
    fi
}

test_compacted_dump() {
    local name
    for name in compacted-verify compacted-deep; do
        assert_eq 0 "$(cat "$out/$name.rc")" "DumpLogSegments exit status"
        if grep -v -E '^Non-consecutive offsets in |^  -?[0-9]+ is followed by [0-9]+$' \
            "$out/$name.err" | grep -q .; then
            head -n 40 "$out/$name.err" >&2
            fail "DumpLogSegments wrote more than the gaps of compaction to stderr"
        fi
        if grep -E "${error_pattern/Non-consecutive offsets|/}" "$out/$name.out" >&2; then
            fail "DumpLogSegments reported errors"
        fi
    done
    grep -q 'deleteHorizonMs: OptionalLong\[' "$out/compacted-deep.out" ||
        echo "storage-compacted: no tombstone was stamped with a delete horizon yet"
}

# The transactional topic's batches: Kafka's tool reads the markers highwater wrote.
test_transaction_markers() {
    section txn log >"$out/txn.log.txt"
    assert_eq 1 "$(grep -c 'endTxnMarker: COMMIT' "$out/txn.log.txt" || true)" "COMMIT markers"
    assert_eq 1 "$(grep -c 'endTxnMarker: ABORT' "$out/txn.log.txt" || true)" "ABORT markers"
    assert_eq 30 "$(grep -c '^| offset: .* payload: \(committed\|aborted\) ' "$out/txn.log.txt" || true)" \
        "transactional records"
    grep '^baseOffset: ' "$out/txn.log.txt" | grep -q 'isTransactional: true isControl: true' ||
        fail "no control batch flagged transactional"
}

# __transaction_state: the coordinator's records in Kafka's TransactionLog layout.
test_transaction_log_decoder() {
    local logs
    logs="$(find "$data" -path '*/__transaction_state-*' -name '*.log' -size +0 | sort | paste -sd,)"
    [[ -n "$logs" ]] || fail "no __transaction_state segment holds records"
    dump_log_segments txnlog --files "$logs" --transaction-log-decoder
    assert_eq 0 "$(cat "$out/txnlog.rc")" "DumpLogSegments exit status"
    if grep -q . "$out/txnlog.err"; then
        head -n 20 "$out/txnlog.err" >&2
        fail "DumpLogSegments wrote to stderr"
    fi
    grep 'storage-txn' "$out/txnlog.out" | head -n 3
    grep -q 'storage-txn' "$out/txnlog.out" || fail "the decoder shows no record of storage-txn"
    if grep -i -E 'unknown|exception|error' "$out/txnlog.out" >&2; then
        fail "the decoder could not read a record"
    fi
}

# The aborted transaction of storage-txn: Kafka's tool reads the .txnindex entry of the
# segment holding the ABORT marker, from the first aborted record to the marker.
test_transaction_index() {
    mapfile -t indexes < <(find "$data/storage-txn-0" -name '*.txnindex' -size +0 | sort)
    assert_eq 1 "${#indexes[@]}" ".txnindex files with an entry"
    dump_log_segments txnindex --files "${indexes[0]}"
    assert_eq 0 "$(cat "$out/txnindex.rc")" "DumpLogSegments exit status"
    [[ ! -s "$out/txnindex.err" ]] || { cat "$out/txnindex.err" >&2; fail "stderr output"; }
    cat "$out/txnindex.out"
    local abort first
    abort="$(grep -B1 'endTxnMarker: ABORT' "$out/txn.log.txt" | sed -n 's/^baseOffset: \([0-9]*\) .*/\1/p' | head -n 1)"
    first="$(grep -B1 'endTxnMarker: COMMIT' "$out/txn.log.txt" | sed -n 's/^baseOffset: \([0-9]*\) .*/\1/p' | head -n 1)"
    [[ -n "$abort" && -n "$first" ]] || fail "no ABORT or COMMIT marker offset in the log dump"
    first=$((first + 1))
    grep -q "^version: 0 producerId: [0-9]* firstOffset: $first lastOffset: $abort lastStableOffset: $((abort + 1))\$" \
        "$out/txnindex.out" || fail "expected the aborted transaction $first..$abort"
}

# Every .snapshot file (written at each roll and at the clean stop) passes Kafka's
# readSnapshot (a bad CRC or layout goes to stderr); the idempotent case's last snapshot
# holds its producer at sequence 299, offset 299.
test_producer_snapshots() {
    mapfile -t snapshots < <(find "$data" -name '*.snapshot' -not -path '*/__cluster_metadata-0/*' | sort)
    ((${#snapshots[@]} > ${#cases[@]})) || fail "too few producer snapshots: ${#snapshots[@]}"
    dump_log_segments snapshots --files "$(IFS=,; echo "${snapshots[*]}")"
    assert_eq 0 "$(cat "$out/snapshots.rc")" "DumpLogSegments exit status"
    [[ ! -s "$out/snapshots.err" ]] || { head -n 20 "$out/snapshots.err" >&2; fail "stderr output"; }
    assert_eq "${#snapshots[@]}" "$(grep -c '^Dumping .*\.snapshot$' "$out/snapshots.out")" "snapshots dumped"
    local last
    last="$(printf '%s\n' "${snapshots[@]}" | grep '/storage-idempotent-0/' | tail -n 1)"
    awk -v f="Dumping $last" '$0 == f { on = 1; next } /^Dumping / { on = 0 } on' \
        "$out/snapshots.out" >"$out/idempotent-snapshot.txt"
    cat "$out/idempotent-snapshot.txt"
    grep -q 'producerEpoch: 0 .* lastSequence: 299 lastOffset: 299 ' "$out/idempotent-snapshot.txt" ||
        fail "the idempotent producer's last snapshot does not hold sequence 299 at offset 299"
}

run_test "DumpLogSegments --verify-index-only: no mismatch" test_verify_index_only
run_test "DumpLogSegments --index-sanity-check: every index passes" test_index_sanity_check
run_test "DumpLogSegments --deep-iteration --print-data-log: no error" test_deep_iteration
for name in "${cases[@]}"; do
    run_test "DumpLogSegments prints every record of the $name case" test_records "$name"
done
run_test "a damaged segment is reported (the checks can fail)" test_a_damaged_copy_is_reported
run_test "a compacted topic reads back the latest value of each key" test_compacted_read
run_test "DumpLogSegments reads cleaned segments cleanly" test_compacted_dump
run_test "DumpLogSegments reads highwater's transaction markers" test_transaction_markers
run_test "DumpLogSegments --transaction-log-decoder reads __transaction_state" \
    test_transaction_log_decoder
run_test "DumpLogSegments reads the aborted transaction in the .txnindex" test_transaction_index
run_test "DumpLogSegments reads every producer snapshot" test_producer_snapshots

suite_summary || true
echo "$tests_passed passed, $tests_failed failed"
((tests_failed == 0))
