#!/usr/bin/env bash
# librdkafka's own integration tests (its tests/test-runner) against a running broker or
# cluster, one test number at a time (each its own test-runner process, -p1, full mode).
# By default the transactional ones issue 12 names — 0055 producer latency (with its
# transactional case), 0061 consumer lag (read_committed), 0103 transactions, 0129 fetch of
# aborted messages, 0137 barrier batch consume; most of them create topics with three
# replicas, so BOOTSTRAP must then be a three-node cluster (`make cluster`: 127.0.0.1:9092-9094).
# LIBRDKAFKA_TESTS=all runs every broker test of the tree's tests/test.c instead (what `make
# conformance` runs, compat/conformance/run.sh). Tests that need no broker (flag
# TEST_F_LOCAL, librdkafka's mock cluster and unit tests) are left out (-L): they test the
# client alone; known-issue, manual and `noautocreate`-scenario tests are reported skipped.
#
# Usage: compat/librdkafka/run.sh BOOTSTRAP
# Environment: LIBRDKAFKA_SRC, a librdkafka source tree (a release tarball or Debian's
# `apt-get source librdkafka`, which needs a deb-src line); test-runner is built there on
# first use (configure without GSSAPI, curl, zstd and SASL; make libs, src-cpp, tests).
# LIBRDKAFKA_TESTS: test numbers (e.g. "0001 0045") or `all`; TEST_KAFKA_VERSION (default
# 4.1.1) is the broker version the tests assume; LIBRDKAFKA_TEST_TIMEOUT seconds per test
# number (default 900; the runner's own per-test timeouts apply inside it);
# LIBRDKAFKA_LOG_DIR (default $LIBRDKAFKA_SRC/tests) gets highwater-NNNN.log per test number;
# LIBRDKAFKA_RESULTS, a file to which a line `name<TAB>PASSED|FAILED|SKIPPED|TIMEOUT<TAB>seconds
# <TAB>reason` is appended per test; LIBRDKAFKA_SINGLE_NODE=1 skips the tests that need three
# brokers (0101, 0103). Not part of `make test`.
set -euo pipefail

bootstrap="${1:?usage: compat/librdkafka/run.sh BOOTSTRAP}"
src="${LIBRDKAFKA_SRC:?set LIBRDKAFKA_SRC to a librdkafka source tree}"
src="$(cd "$src" && pwd)" # absolute: the tests run from $src/tests
tests="${LIBRDKAFKA_TESTS:-0055 0061 0103 0129 0137}"
per_test_timeout="${LIBRDKAFKA_TEST_TIMEOUT:-900}"
logdir="${LIBRDKAFKA_LOG_DIR:-$src/tests}"
results="${LIBRDKAFKA_RESULTS:-/dev/null}"
export TEST_KAFKA_VERSION="${TEST_KAFKA_VERSION:-4.1.1}"
# The tests that run kafka-topics.sh (0045, 0052, 0077) or a Java producer (0098) find them
# under KAFKA_PATH, given the broker in BROKERS: by default kafka-path/, Kafka's tools from
# the jars in .kafka-ref/libs.
export KAFKA_PATH="${KAFKA_PATH:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/kafka-path}"
export BROKERS="$bootstrap"

[[ -f "$src/configure" && -d "$src/tests" ]] || {
    echo "librdkafka: $src is not a librdkafka source tree" >&2
    exit 1
}
if [[ ! -x "$src/tests/test-runner" ]]; then
    echo "librdkafka: building test-runner in $src"
    (
        cd "$src"
        ./configure --disable-gssapi --disable-curl --disable-zstd --disable-sasl
        make -j"$(nproc)" libs
        make -j"$(nproc)" -C src-cpp
        make -j"$(nproc)" -C tests build
    ) >"$src/tests/highwater-build.log" 2>&1 || {
        tail -30 "$src/tests/highwater-build.log" >&2
        exit 1
    }
fi

# The tests[] table of test.c: one line "name flags scenario" per test.
test_table() {
    python3 - "$src/tests/test.c" <<'EOF'
import re, sys
body = open(sys.argv[1]).read()
body = body[body.index("struct test tests[] = {"):]
body = re.sub(r"/\*.*?\*/", "", body[:body.index("{NULL}")], flags=re.S)
for m in re.finditer(r"_TEST\(\s*(\w+)\s*,\s*([^,)]+)(.*?)\)\s*,\s*(?=_TEST|#|$)", body, re.S):
    scenario = re.search(r'\.scenario\s*=\s*"([^"]+)"', m.group(3))
    print(m.group(1), m.group(2).replace(" ", ""), scenario.group(1) if scenario else "default")
EOF
}

# What a single node cannot run (LIBRDKAFKA_SINGLE_NODE=1, which `make conformance` sets).
declare -A single_node_skip=(
    [0101]="needs three replicas and broker racks (fetch from follower)"
    [0103]="creates its topics with three replicas"
)

record() { printf '%s\t%s\t%s\t%s\n' "$@" >>"$results"; }

# Broker tests (not TEST_F_LOCAL) of the selected numbers; the ones that cannot run here are
# recorded as skipped with the reason.
declare -A run_names=()
numbers=()
while read -r name flags scenario; do
    num="${name%%_*}"
    if [[ "$tests" != all && " $tests " != *" $num "* ]]; then continue; fi
    [[ "$flags" == *TEST_F_LOCAL* ]] && continue
    reason=""
    [[ "$flags" == *TEST_F_MANUAL* ]] && reason="manual test"
    [[ "$flags" =~ TEST_F_KNOWN_ISSUE($|\|) ]] && reason="flagged TEST_F_KNOWN_ISSUE by librdkafka"
    [[ "${LIBRDKAFKA_SINGLE_NODE:-0}" == 1 && -n "${single_node_skip[$num]:-}" ]] &&
        reason="${single_node_skip[$num]}"
    [[ ",$scenario," == *",default,"* ]] ||
        reason="scenario $scenario only (a broker with auto.create.topics.enable=false)"
    if [[ -n "$reason" ]]; then
        echo "skip   $name: $reason"
        record "$name" SKIPPED 0 "$reason"
        continue
    fi
    [[ -n "${run_names[$num]:-}" ]] || numbers+=("$num")
    run_names[$num]+="$name "
done < <(test_table)

cd "$src/tests"
export LD_LIBRARY_PATH="$src/src:$src/src-cpp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$logdir"
conf="$logdir/highwater-test.conf"
printf 'bootstrap.servers=%s\ntest.topic.random=true\n' "$bootstrap" >"$conf"
export RDKAFKA_TEST_CONF="$conf"
passed=0 failed=0
for num in "${numbers[@]}"; do
    log="$logdir/highwater-$num.log"
    start=$SECONDS
    rc=0
    # (The subshell's stderr keeps bash's "Aborted" of a test-runner that asserts in the log.)
    (TESTS="$num" timeout "$per_test_timeout" ./test-runner -p1 -L >"$log" 2>&1; exit $?) 2>>"$log" || rc=$?
    secs=$((SECONDS - start))
    plain="$(sed 's/\x1b\[[0-9;]*m//g; s/\x1b(B//g' "$log")"
    for name in ${run_names[$num]}; do
        row="$(grep -E "^\| $name +\|" <<<"$plain" || true)"
        state="$(awk -F'|' '{gsub(/ /, "", $3); print $3}' <<<"$row")"
        dur="$(awk -F'|' '{gsub(/[ s]/, "", $4); print $4}' <<<"$row")"
        note="$(awk -F'|' '{sub(/^ +/, "", $5); print $5}' <<<"$row")"
        if ((rc == 124)); then
            state=TIMEOUT dur=$secs note="test-runner killed after ${per_test_timeout}s"
        elif [[ -z "$state" ]]; then
            state=FAILED dur=$secs note="no summary from test-runner (exit status $rc)"
        fi
        # The first failure's reason: the line after `### Test "NAME (SUBTEST)" failed at ...`.
        if [[ "$state" != PASSED && "$state" != SKIPPED ]]; then
            why="$(awk -v h="### Test \"$name" 'hit { print sub_ $0; exit }
                index($0, h) == 1 && substr($0, length(h) + 1, 1) ~ /[" ]/ { hit = 1; sub_ = ""
                    if (match($0, /\(.*\)" failed/)) sub_ = substr($0, RSTART, RLENGTH - 8) " " }' \
                <<<"$plain" | cut -c1-240)"
            [[ -n "$why" ]] && note="$why"
        fi
        [[ "$state" == PASSED ]] && passed=$((passed + 1))
        [[ "$state" == FAILED || "$state" == TIMEOUT ]] && failed=$((failed + 1))
        printf '%-7s %s (%ss)%s\n' "$state" "$name" "$dur" "${note:+: $note}"
        record "$name" "$state" "$dur" "$note"
    done
done
echo "librdkafka: $passed tests ok, $failed tests failed (against $bootstrap)"
((failed == 0))
