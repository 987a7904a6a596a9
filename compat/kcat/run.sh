#!/usr/bin/env bash
# Compat suite: librdkafka, old and new, through kcat's command line.
#   kcat        Debian's kcat 1.7.1, linked against librdkafka 2.0.2;
#   rdkafka216  compat/kcat/pykcat.py, the same flags on confluent-kafka's librdkafka 2.16.
# Every test runs once with each tool: metadata, produce (auto-create, keys, headers,
# compression, idempotence) and consume back byte-exact, start offsets, unknown partitions,
# and offsets for timestamps (ListOffsets), and the balanced consumer in a group (-G: join,
# consume, commit on exit, resume from the commits).
# Usage: compat/kcat/run.sh HOST:PORT
set -euo pipefail

bootstrap="${1:?usage: compat/kcat/run.sh HOST:PORT}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
py="$root/compat/.venv/bin/python"
test_suite_name=kcat
# shellcheck source=../lib/testlib.sh source-path=SCRIPTDIR
source "$root/compat/lib/testlib.sh"

command -v kcat >/dev/null || fail "kcat is not installed; run compat/install-deps.sh"
[[ -x "$py" ]] || fail "no $py; run compat/install-deps.sh"

# tool NAME ARGS...: runs kcat or pykcat with kcat's flags against the broker, bounded in time.
tool() {
    local name="$1"
    shift
    case "$name" in
        kcat) timeout 90 kcat -b "$bootstrap" -X client.id=compat-kcat-rdkafka-2.0.2 "$@" ;;
        rdkafka216) timeout 90 "$py" "$here/pykcat.py" -b "$bootstrap" "$@" ;;
        *) fail "unknown tool $name" ;;
    esac
}

# Writes N keyed lines ("key:value") mixing empty values, values holding the delimiter,
# UTF-8, bytes that are not UTF-8, tabs, an empty key, and one 200 kB value.
keyed_lines() {
    "$py" - "$1" <<'PY'
import sys
n = int(sys.argv[1])
out = sys.stdout.buffer
for i in range(n):
    key = b"key %d" % (i % 17)
    kind = i % 6
    if kind == 0:
        value = b""
    elif kind == 1:
        value = b"a:b:c:%d" % i
    elif kind == 2:
        value = "zażółć gęślą jaźń ✓ %d" % i
        value = value.encode()
    elif kind == 3:
        value = b"\x01\x7f\xff\xfe\x80\tbin %d" % i
    elif kind == 4:
        key = b""
        value = b"empty key %d" % i
    else:
        value = b"x" * ((i * 37) % 3000)
    out.write(key + b":" + value + b"\n")
out.write(b"big:" + b"0123456789abcdef" * 12800 + b"\n")
PY
}

# stored_codecs TOPIC: the distinct codecs of partition 0's stored batches (raw Fetch v4).
stored_codecs() {
    "$py" "$root/compat/lib/stored_codecs.py" "$bootstrap" "$1" 0
}

# Writes N keyed lines whose every value compresses well on its own: clients send a batch
# uncompressed when compressing it would not make it smaller.
compressible_lines() {
    local i j phrase='the quick brown fox jumps over the lazy dog; '
    for ((i = 0; i < $1; i++)); do
        printf 'key-%d:message %d: ' "$((i % 17))" "$i"
        for ((j = 0; j < 3 + i % 5; j++)); do printf '%s' "$phrase"; done
        printf 'zażółć ✓\n'
    done
}

consume_all() { # TOOL TOPIC FORMAT
    tool "$1" -C -t "$2" -p 0 -o beginning -e -f "$3"
}

test_metadata_lists_the_bootstrap_broker() {
    local json
    json="$(tool "$1" -L -J)"
    "$py" -c '
import json, sys
md = json.loads(sys.argv[1])
names = [b["name"] for b in md["brokers"]]
assert sys.argv[2] in names, f"no broker advertises {sys.argv[2]}: {names}"
' "$json" "$bootstrap"
}

test_produce_auto_creates_and_consume_is_byte_exact() {
    local t dir
    t="$(unique_topic "$1-keyed")"
    dir="$(mktemp -d)"
    keyed_lines 300 >"$dir/sent"
    tool "$1" -P -t "$t" -p 0 -K: <"$dir/sent"
    # The topic did not exist: Metadata auto-created it, with a leader for partition 0.
    tool "$1" -L -J -t "$t" >"$dir/md.json"
    "$py" -c '
import json, sys
md = json.load(open(sys.argv[1]))
ids = {b["id"] for b in md["brokers"]}
(t,) = [t for t in md["topics"] if t["topic"] == sys.argv[2]]
assert "error" not in t, t
p0 = [p for p in t["partitions"] if p["partition"] == 0]
assert p0 and p0[0]["leader"] in ids, t
' "$dir/md.json" "$t"
    consume_all "$1" "$t" '%k:%s\n' >"$dir/got"
    assert_same_file "$dir/sent" "$dir/got" "keys and values"
    consume_all "$1" "$t" '%o\n' >"$dir/offsets"
    assert_same_file <(seq 0 300) "$dir/offsets" "offsets 0..300"
    assert_eq none "$(stored_codecs "$t")" "codec of the stored batches"
}

test_headers_round_trip() {
    local t dir
    t="$(unique_topic "$1-headers")"
    dir="$(mktemp -d)"
    printf 'k%d:v%d\n' 1 1 2 2 3 3 >"$dir/sent"
    tool "$1" -P -t "$t" -p 0 -K: -H trace=abc-123 -H 'two words=x y' -H empty= <"$dir/sent"
    consume_all "$1" "$t" '%h|%k:%s\n' >"$dir/got"
    printf 'trace=abc-123,two words=x y,empty=|k%d:v%d\n' 1 1 2 2 3 3 >"$dir/want"
    assert_same_file "$dir/want" "$dir/got" "headers"
}

test_compressed_round_trip() { # TOOL CODEC
    local t dir
    t="$(unique_topic "$1-$2")"
    dir="$(mktemp -d)"
    compressible_lines 2000 >"$dir/sent"
    tool "$1" -P -t "$t" -p 0 -K: -z "$2" <"$dir/sent"
    consume_all "$1" "$t" '%k:%s\n' >"$dir/got"
    assert_same_file "$dir/sent" "$dir/got" "$2-compressed keys and values"
    # The client may silently send uncompressed batches if it believes the broker lacks the
    # codec (librdkafka < 2.11.1 gates LZ4 on FindCoordinator v0), so look at what is stored.
    assert_eq "$2" "$(stored_codecs "$t")" "codec of the stored batches"
}

test_idempotent_producer_round_trip() {
    local t dir
    t="$(unique_topic "$1-idempotent")"
    dir="$(mktemp -d)"
    keyed_lines 1000 >"$dir/sent"
    tool "$1" -P -t "$t" -p 0 -K: -X enable.idempotence=true -X acks=all <"$dir/sent"
    consume_all "$1" "$t" '%k:%s\n' >"$dir/got"
    assert_same_file "$dir/sent" "$dir/got" "idempotently produced keys and values"
    consume_all "$1" "$t" '%o\n' >"$dir/offsets"
    assert_same_file <(seq 0 1000) "$dir/offsets" "offsets 0..1000"
}

test_consume_from_an_offset_and_from_the_tail() {
    local t dir
    t="$(unique_topic "$1-offsets")"
    dir="$(mktemp -d)"
    for i in $(seq 0 9); do echo "k$i:v$i"; done >"$dir/sent"
    tool "$1" -P -t "$t" -p 0 -K: <"$dir/sent"
    tool "$1" -C -t "$t" -p 0 -o 4 -e -f '%o %k:%s\n' >"$dir/from4"
    assert_same_file <(for i in $(seq 4 9); do echo "$i k$i:v$i"; done) "$dir/from4" "-o 4"
    tool "$1" -C -t "$t" -p 0 -o -3 -e -f '%o %k:%s\n' >"$dir/tail3"
    assert_same_file <(for i in 7 8 9; do echo "$i k$i:v$i"; done) "$dir/tail3" "-o -3"
    tool "$1" -C -t "$t" -p 0 -o end -e -f '%o\n' >"$dir/end"
    assert_same_file /dev/null "$dir/end" "-o end"
}

test_producing_to_a_missing_partition_fails() {
    local t
    t="$(unique_topic "$1-nopart")"
    echo 'k:v' | tool "$1" -P -t "$t" -p 0 -K:
    if echo 'k:v' | tool "$1" -P -t "$t" -p 7 -K:; then
        fail "producing to partition 7 of a 1-partition topic succeeded"
    fi
}

# Timestamps (ms after a base an hour ago) of offsets 0..7: out of order at 3, a tie at
# 4 and 5, and the largest (60) is not the last. Each "target expected" pair: the first offset
# whose timestamp is >= target, -1 past the last timestamp; -1 and -2 are the special
# LATEST (log end offset) and EARLIEST lookups.
ts_deltas=(10 20 30 25 40 40 60 50)
ts_expected=("-100000 0" "5 0" "10 0" "11 1" "20 1" "21 2" "25 2" "26 2" "30 2" "31 4"
    "40 4" "41 6" "50 6" "51 6" "60 6" "61 -1" "100000 -1")

test_offsets_for_times() { # TOOL one-batch|batch-per-message
    local t base dir extra=() i pair target want got
    t="$(unique_topic "$1-ts-$2")"
    dir="$(mktemp -d)"
    base=$(($(date +%s) * 1000 - 3600000))
    for i in "${!ts_deltas[@]}"; do
        echo "$((base + ts_deltas[i])) k$i:v$i"
    done >"$dir/sent"
    [[ "$2" == batch-per-message ]] && extra=(--flush-each)
    # Debian's kcat cannot set a message's timestamp, so pykcat produces for both tools.
    tool rdkafka216 -P -t "$t" -p 0 -K: --line-timestamps "${extra[@]}" <"$dir/sent"
    consume_all "$1" "$t" '%T %k:%s\n' >"$dir/got"
    assert_same_file "$dir/sent" "$dir/got" "CreateTime, keys and values"

    for pair in "${ts_expected[@]}"; do
        read -r target want <<<"$pair"
        got="$(tool "$1" -Q -t "$t:0:$((base + target))")"
        assert_eq "$t [0] offset $want" "$got" "offset for timestamp base+$target"
    done
    assert_eq "$t [0] offset ${#ts_deltas[@]}" "$(tool "$1" -Q -t "$t:0:-1")" "LATEST (-1)"
    assert_eq "$t [0] offset 0" "$(tool "$1" -Q -t "$t:0:-2")" "EARLIEST (-2)"
}

# create_topic TOPIC PARTITIONS: kcat cannot create topics, and auto-creation makes one
# partition.
create_topic() {
    "$py" - "$bootstrap" "$1" "$2" <<'PY'
import sys, time
from confluent_kafka.admin import AdminClient, NewTopic
bootstrap, topic, partitions = sys.argv[1], sys.argv[2], int(sys.argv[3])
admin = AdminClient({"bootstrap.servers": bootstrap})
admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
deadline = time.monotonic() + 30
while True:
    md = admin.list_topics(topic=topic, timeout=30).topics.get(topic)
    if md and md.error is None and len(md.partitions) == partitions and all(
            p.leader >= 0 for p in md.partitions.values()):
        break
    assert time.monotonic() < deadline, f"no leaders for {topic}"
    time.sleep(0.2)
PY
}

# committed GROUP TOPIC PARTITIONS: "partition offset" lines of the group's commits (-1001:
# none), read with OffsetFetch by a consumer that does not join the group. On a fresh broker
# Kafka first answers NOT_COORDINATOR, which librdkafka's committed() does not retry.
committed() {
    "$py" - "$bootstrap" "$@" <<'PY'
import sys, time
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
bootstrap, group, topic, partitions = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
not_ready = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
             KafkaError.COORDINATOR_NOT_AVAILABLE}
deadline = time.monotonic() + 30
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
while True:
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
        break
    except KafkaException as e:
        if e.args[0].code() not in not_ready or time.monotonic() > deadline:
            raise
        print(f"committed(): {e.args[0].name()}; retrying", file=sys.stderr)
        time.sleep(0.5)
for tp in got:
    assert tp.error is None, tp.error
    print(tp.partition, tp.offset)
c.close()
PY
}

test_balanced_consumer_commits_and_resumes() {
    local t g dir p i
    t="$(unique_topic "$1-group")"
    g="$t-group"
    dir="$(mktemp -d)"
    create_topic "$t" 3
    assert_eq "$(printf '0 -1001\n1 -1001\n2 -1001')" "$(committed "$g" "$t" 3)" \
        "no commits before the group consumed"
    for p in 0 1 2; do
        for i in 0 1 2 3 4; do echo "p$p-$i"; done | tool "$1" -P -t "$t" -p "$p"
    done
    # -G: subscribe in a group; -e: exit when every assigned partition is at its end, after
    # which the client commits what it consumed. (No -o: kcat -G -o beginning would start
    # every assigned partition at the beginning, whatever was committed.)
    tool "$1" -G "$g" "$t" -X auto.offset.reset=earliest -e -f '%p %o %s\n' >"$dir/first"
    assert_same_file <(for p in 0 1 2; do for i in 0 1 2 3 4; do echo "$p $i p$p-$i"; done
    done) <(sort "$dir/first") "first run in the group"
    assert_eq "$(printf '0 5\n1 5\n2 5')" "$(committed "$g" "$t" 3)" "commits after run 1"

    for p in 0 1 2; do
        for i in 5 6 7; do echo "p$p-$i"; done | tool "$1" -P -t "$t" -p "$p"
    done
    tool "$1" -G "$g" "$t" -X auto.offset.reset=earliest -e -f '%p %o %s\n' >"$dir/second"
    assert_same_file <(for p in 0 1 2; do for i in 5 6 7; do echo "$p $i p$p-$i"; done
    done) <(sort "$dir/second") "second run resumes at the commits"
    assert_eq "$(printf '0 8\n1 8\n2 8')" "$(committed "$g" "$t" 3)" "commits after run 2"
}

echo "kcat suite against $bootstrap: $(kcat -V 2>&1 | grep -o 'librdkafka [0-9.]*' | head -1)" \
    "and pykcat on librdkafka $("$py" -c 'import confluent_kafka as c; print(c.libversion()[0])')"
for t in kcat rdkafka216; do
    run_test "$t: metadata lists the bootstrap broker" test_metadata_lists_the_bootstrap_broker "$t"
    run_test "$t: produce auto-creates the topic, consume is byte-exact" \
        test_produce_auto_creates_and_consume_is_byte_exact "$t"
    run_test "$t: headers round trip" test_headers_round_trip "$t"
    for codec in gzip snappy lz4 zstd; do
        run_test "$t: $codec round trip" test_compressed_round_trip "$t" "$codec"
    done
    run_test "$t: idempotent producer round trip" test_idempotent_producer_round_trip "$t"
    run_test "$t: consume from an offset, the tail and the end" \
        test_consume_from_an_offset_and_from_the_tail "$t"
    run_test "$t: producing to a missing partition fails" \
        test_producing_to_a_missing_partition_fails "$t"
    run_test "$t: offsets for times, one batch" test_offsets_for_times "$t" one-batch
    run_test "$t: offsets for times, a batch per message" \
        test_offsets_for_times "$t" batch-per-message
    run_test "$t: balanced consumer (-G) commits and a second run resumes" \
        test_balanced_consumer_commits_and_resumes "$t"
done
suite_summary
