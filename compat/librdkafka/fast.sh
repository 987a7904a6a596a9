#!/usr/bin/env bash
# The fast subset of librdkafka's own integration tests (compat/librdkafka/run.sh) against a
# throwaway highwater (compat/with-highwater.sh, num.partitions=4 as librdkafka's "default"
# scenario assumes): produce and consume, offsets, commits, headers and idempotence.
# Part of `make test` (`make conformance-fast`); the first run fetches
# Debian's librdkafka source (compat/librdkafka/fetch-source.sh) and builds its test-runner,
# about three minutes here. Prints "N passed, N failed" last.
# Environment: LIBRDKAFKA_SRC (default target/conformance/librdkafka-2.0.2),
# LIBRDKAFKA_FAST_TESTS (test numbers; default below).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export LIBRDKAFKA_SRC="${LIBRDKAFKA_SRC:-$root/target/conformance/librdkafka-2.0.2}"
export LIBRDKAFKA_TESTS="${LIBRDKAFKA_FAST_TESTS:-0001 0002 0005 0013 0015 0017 0030 0031 0034 0035 0036 0041 0063 0070 0073 0090 0099}"
export LIBRDKAFKA_SINGLE_NODE=1 LIBRDKAFKA_TEST_TIMEOUT="${LIBRDKAFKA_TEST_TIMEOUT:-300}"

"$root/compat/librdkafka/fetch-source.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
sed 's/^"num.partitions" = .*/"num.partitions" = 4/' "$root/config/server.toml" >"$work/server.toml"
export LIBRDKAFKA_RESULTS="$work/results.tsv" LIBRDKAFKA_LOG_DIR="$work/logs"
rc=0
HIGHWATER_CONFIG="$work/server.toml" "$root/compat/with-highwater.sh" \
    "$root/compat/librdkafka/run.sh" || rc=$?
if ((rc != 0)); then
    # The failed tests' own logs, for CI.
    awk -F'\t' '$2 == "FAILED" || $2 == "TIMEOUT" { print substr($1, 1, 4) }' "$LIBRDKAFKA_RESULTS" |
        while read -r num; do tail -40 "$work/logs/highwater-$num.log"; done
fi
awk -F'\t' '$2 == "PASSED" { p++ } $2 == "FAILED" || $2 == "TIMEOUT" { f++ }
    END { printf "%d passed, %d failed\n", p, f }' "$LIBRDKAFKA_RESULTS"
exit "$rc"
