#!/usr/bin/env bash
# Runs every compat suite (compat/<suite>/run.sh BOOTSTRAP) against one broker, in turn,
# going on after a failure. Prints a table of suites with their times, then one closing line
# "N passed, N failed" counting suites; exits non-zero if any suite failed.
# Usage: compat/run-all.sh HOST:PORT
# Environment: COMPAT_SUITES="kcat java python go node quota" (the default) picks and orders the
# suites.
set -euo pipefail

bootstrap="${1:?usage: compat/run-all.sh HOST:PORT}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
read -r -a suites <<<"${COMPAT_SUITES:-kcat java python go node quota}"

passed=0
failed=0
report=()
for suite in "${suites[@]}"; do
    echo
    echo "==================== suite $suite against $bootstrap ===================="
    start=$SECONDS
    if [[ ! -x "$here/$suite/run.sh" ]]; then
        echo "no suite $suite ($here/$suite/run.sh)" >&2
        rc=127
    else
        set +e
        "$here/$suite/run.sh" "$bootstrap"
        rc=$?
        set -e
    fi
    took=$((SECONDS - start))
    if ((rc == 0)); then
        passed=$((passed + 1))
        report+=("$(printf '  %-8s passed  %4ds' "$suite" "$took")")
    else
        failed=$((failed + 1))
        report+=("$(printf '  %-8s FAILED  %4ds  (exit %d)' "$suite" "$took" "$rc")")
    fi
done

echo
echo "==================== compat summary ($bootstrap) ===================="
printf '%s\n' "${report[@]}"
echo "$passed passed, $failed failed"
((failed == 0))
