# shellcheck shell=bash
# Sourced by the shell compat suites (compat/kcat/run.sh, compat/java/cli-tools.sh).
# Each test is a function run in a subshell with errexit on; any failing command or failed
# assertion fails that test only. Output of a passing test is hidden; a failing test's output
# is printed, indented. `suite_summary` prints the counts and sets the exit status.

tests_passed=0
tests_failed=0
failed_tests=()
test_suite_name="${test_suite_name:-suite}"
test_tmp="$(mktemp -d "${TMPDIR:-/tmp}/compat-${test_suite_name}.XXXXXX")"
trap 'rm -rf "$test_tmp"' EXIT

# run_test NAME FUNCTION [ARGS...]: runs one test and records the outcome. With COMPAT_ONLY
# set (an extended regular expression), only tests whose name matches it run; with
# COMPAT_SKIP set, tests whose name matches it are not run (each says so on a "skip" line).
run_test() {
    local name="$1"
    shift
    if [[ -n "${COMPAT_ONLY:-}" ]] && ! grep -qE -- "$COMPAT_ONLY" <<<"$name"; then
        return 0
    fi
    if [[ -n "${COMPAT_SKIP:-}" ]] && grep -qE -- "$COMPAT_SKIP" <<<"$name"; then
        echo "skip   $name (COMPAT_SKIP)"
        return 0
    fi
    local log="$test_tmp/test.log" rc start=$SECONDS
    set +e
    (
        set -euo pipefail
        "$@"
    ) >"$log" 2>&1
    rc=$?
    set -e
    if ((rc == 0)); then
        tests_passed=$((tests_passed + 1))
        echo "ok     $name ($((SECONDS - start))s)"
    else
        tests_failed=$((tests_failed + 1))
        failed_tests+=("$name")
        echo "FAILED $name ($((SECONDS - start))s)"
        sed 's/^/    | /' "$log" | tail -n 60
    fi
}

# suite_summary: prints the counts; returns non-zero if any test failed.
suite_summary() {
    echo "$test_suite_name: $tests_passed tests ok, $tests_failed tests failed"
    local t
    for t in "${failed_tests[@]}"; do
        echo "    failed: $t"
    done
    ((tests_failed == 0))
}

fail() {
    echo "assertion failed: $*" >&2
    exit 1
}

# assert_eq EXPECTED ACTUAL WHAT
assert_eq() {
    [[ "$1" == "$2" ]] || fail "$3: expected '$1', got '$2'"
}

# assert_same_file EXPECTED_FILE ACTUAL_FILE WHAT: byte-exact comparison. Either may be a
# process substitution, so both are copied first.
assert_same_file() {
    local want got
    want="$(mktemp)"
    got="$(mktemp)"
    cat "$1" >"$want"
    cat "$2" >"$got"
    if ! cmp -s "$want" "$got"; then
        echo "$3: differs ($(wc -c <"$want") bytes expected, $(wc -c <"$got") received)" >&2
        diff <(head -c 4000 "$want" | cat -v) <(head -c 4000 "$got" | cat -v) | head -n 20 >&2 ||
            true
        exit 1
    fi
    rm -f "$want" "$got"
}

# unique_topic PREFIX: a topic name no earlier run used.
unique_topic() {
    echo "compat-${test_suite_name}-$1-$(date +%s%N | tail -c 10)-$RANDOM"
}

# wait_until SECONDS COMMAND...: polls COMMAND every 0.2 s until it succeeds.
wait_until() {
    local limit="$1" start=$SECONDS
    shift
    until "$@" >/dev/null 2>&1; do
        ((SECONDS - start < limit)) || fail "timed out after ${limit}s waiting for: $*"
        sleep 0.2
    done
}
