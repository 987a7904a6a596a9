#!/usr/bin/env bash
# franz-go's own integration tests (pkg/kgo *_test.go of franz-go KGO_VERSION) against one
# broker, each test alone (go test -run '^TestX$' -v, in its own process with a timeout).
# The module is copied from the Go module cache (read-only) to target/conformance/ and its
# test binary built once; the integration tests are the ones kgo-tests/ finds (those that
# reach a helper dialing KGO_SEEDS); the other ~117 are unit tests and are not run here.
#
# Usage: compat/conformance/kgo.sh BOOTSTRAP [TEST...]     (default: every integration test)
#        compat/conformance/kgo.sh BOOTSTRAP --fast      (the fast subset below, ~20 s)
# Environment: KGO_RESULTS, a file to which `name<TAB>PASSED|FAILED|SKIPPED|TIMEOUT<TAB>seconds
# <TAB>reason` is appended per test; KGO_LOG_DIR (default target/conformance/kgo-logs) gets
# TestX.log; KGO_TEST_TIMEOUT seconds per test (default 300); KGO_TEST_RECORDS (default
# 50000, franz-go's is 500000) records the ETL tests produce; KGO_VERSION (default 1.22.3);
# KGO_FAST_FLAGS, extra flags of the --fast run (e.g. -test.v).
# The tests see KGO_SEEDS=BOOTSTRAP and KGO_TEST_RF=1 (one node).
set -euo pipefail

bootstrap="${1:?usage: compat/conformance/kgo.sh BOOTSTRAP [TEST...]}"
shift
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
here="$root/compat/conformance"
version="${KGO_VERSION:-1.22.3}"
work="$root/target/conformance"
src="$work/franz-go-$version"
logdir="${KGO_LOG_DIR:-$work/kgo-logs}"
results="${KGO_RESULTS:-/dev/null}"
per_test_timeout="${KGO_TEST_TIMEOUT:-300}"

if [[ ! -f "$src/pkg/kgo/helpers_test.go" ]]; then
    cache="$(go env GOMODCACHE)/github.com/twmb/franz-go@v$version"
    [[ -d "$cache" ]] || (cd "$work" 2>/dev/null || cd /tmp; go mod download "github.com/twmb/franz-go@v$version")
    mkdir -p "$work"
    rm -rf "$src.tmp"
    cp -r "$cache" "$src.tmp"
    chmod -R u+w "$src.tmp"
    mv "$src.tmp" "$src"
fi
bin="$src/kgo.test"
if [[ ! -x "$bin" ]]; then
    echo "kgo: building the pkg/kgo test binary of franz-go $version"
    (cd "$src" && go test -c -o "$bin" ./pkg/kgo)
fi
# --fast: a subset that passes on Kafka and highwater in well under a minute, run as one
# `go test` process (the tests run in parallel), with 10,000 records; its status is go test's.
fast=(Test848RegexBrokerResolves TestAddRemovePartitions TestClient_Produce
    TestClient_ProduceLargeMessages TestConsumeRegex TestDirectPartitionPurge TestGroupETL
    TestIssue325 TestIssue523 TestIssue648 TestIssue769 TestIssue810 TestIssue865
    TestPauseIssue489 TestPauseIssueOct2023 TestPing TestPooling
    TestUnknownGroupOffsetFetchPinned)
if [[ "${1:-}" == --fast ]]; then
    cd "$src/pkg/kgo"
    # shellcheck disable=SC2086 # KGO_FAST_FLAGS: extra go test flags, e.g. -test.v
    KGO_SEEDS="$bootstrap" KGO_TEST_RF=1 KGO_TEST_RECORDS="${KGO_TEST_RECORDS:-10000}" \
        KGO_LOG_LEVEL="${KGO_LOG_LEVEL:-none}" \
        exec "$bin" ${KGO_FAST_FLAGS:-} -test.run "^($(IFS='|'; echo "${fast[*]}"))\$" -test.timeout 120s
fi
if (($# > 0)); then
    tests=("$@")
else
    mapfile -t tests < <(cd "$here/kgo-tests" && go run . "$src/pkg/kgo")
fi

mkdir -p "$logdir"
passed=0 failed=0
for t in "${tests[@]}"; do
    log="$logdir/$t.log"
    start=$SECONDS
    rc=0
    # The tests read testdata relative to their package directory.
    (cd "$src/pkg/kgo" && KGO_SEEDS="$bootstrap" KGO_TEST_RF=1 \
        KGO_TEST_RECORDS="${KGO_TEST_RECORDS:-50000}" \
        timeout $((per_test_timeout + 30)) "$bin" -test.run "^$t\$" -test.v \
        -test.timeout "${per_test_timeout}s" >"$log" 2>&1) || rc=$?
    secs=$((SECONDS - start))
    note=""
    if grep -q "^--- PASS: $t " "$log"; then
        state=PASSED
    elif grep -q "^--- SKIP: $t " "$log"; then
        state=SKIPPED
        # The reason t.Skip printed (file:line: message).
        note="$(grep -m1 -E '^ +[a-z_0-9]+_test\.go:[0-9]+: ' "$log" | sed 's/^ *//' | cut -c1-200 || true)"
    elif grep -q "^panic: test timed out" "$log" || ((rc == 124)); then
        state=TIMEOUT note="not done after ${per_test_timeout}s"
    else
        state=FAILED
        # The failed subtests, then the first error the test reported (file:line: message).
        subs="$(grep -oE "^ *--- FAIL: $t/[^ ]+" "$log" | sed 's/.*FAIL: //' | sort -u | paste -sd, || true)"
        first="$(grep -m1 -E '^ +[a-z_0-9]+_test\.go:[0-9]+: ' "$log" | sed 's/^ *//' | cut -c1-200 || true)"
        [[ -n "$first" ]] || first="$(grep -m1 -E '^panic: ' "$log" | cut -c1-200 || true)"
        note="${subs:+failed: $subs; }$first"
        [[ -n "$note" ]] || note="exit status $rc"
    fi
    # go test's own duration of the test, when it got that far.
    own="$(sed -n "s/^--- [A-Z]*: $t (\([0-9.]*\)s)\$/\1/p" "$log")"
    [[ -n "$own" ]] && secs="$own"
    [[ "$state" == PASSED ]] && passed=$((passed + 1))
    [[ "$state" == FAILED || "$state" == TIMEOUT ]] && failed=$((failed + 1))
    printf '%-7s %s (%ss)%s\n' "$state" "$t" "$secs" "${note:+: $note}"
    printf '%s\t%s\t%s\t%s\n' "$t" "$state" "$secs" "$note" >>"$results"
done
echo "kgo: $passed tests ok, $failed tests failed (against $bootstrap)"
((failed == 0))
