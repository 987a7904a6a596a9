#!/usr/bin/env bash
# librdkafka's own integration tests (its tests/test-runner) against a running cluster: by
# default the transactional ones issue 12 names — 0055 producer latency (with its
# transactional case), 0061 consumer lag (read_committed), 0103 transactions, 0129 fetch of
# aborted messages, 0137 barrier batch consume. Most of them create topics with three
# replicas, so BOOTSTRAP must be a three-node cluster (`make cluster`: 127.0.0.1:9092-9094).
# Tests that need no broker (librdkafka's mock cluster) are left out (-L): they test the
# client alone.
#
# Usage: compat/librdkafka/run.sh BOOTSTRAP
# Environment: LIBRDKAFKA_SRC, a librdkafka source tree (a release tarball or Debian's
# `apt-get source librdkafka`, which needs a deb-src line); test-runner is built there on
# first use (configure without GSSAPI, curl, zstd and SASL; make libs, src-cpp, tests).
# LIBRDKAFKA_TESTS overrides the list; TEST_KAFKA_VERSION (default 4.1.1) is the broker
# version the tests assume. Not part of `make test`: it needs the source tree and a
# three-node cluster, and takes about 4 minutes (plus about 3 to build).
set -euo pipefail

bootstrap="${1:?usage: compat/librdkafka/run.sh BOOTSTRAP (a three-node cluster)}"
src="${LIBRDKAFKA_SRC:?set LIBRDKAFKA_SRC to a librdkafka source tree}"
tests="${LIBRDKAFKA_TESTS:-0055 0061 0103 0129 0137}"
export TEST_KAFKA_VERSION="${TEST_KAFKA_VERSION:-4.1.1}"

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

cd "$src/tests"
export LD_LIBRARY_PATH="$src/src:$src/src-cpp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
printf 'bootstrap.servers=%s\n' "$bootstrap" >highwater-test.conf
export RDKAFKA_TEST_CONF="$src/tests/highwater-test.conf"
passed=0 failed=0
for t in $tests; do
    log="$src/tests/highwater-$t.log"
    start=$SECONDS
    if TESTS="$t" timeout 900 ./test-runner -p1 -L >"$log" 2>&1; then
        passed=$((passed + 1))
        echo "ok     $t ($((SECONDS - start))s)"
    else
        failed=$((failed + 1))
        echo "FAILED $t ($((SECONDS - start))s); the end of $log:"
        sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E "FAIL|assert|Assert" | tail -10
    fi
done
echo "librdkafka: $passed tests ok, $failed tests failed (against $bootstrap)"
((failed == 0))
