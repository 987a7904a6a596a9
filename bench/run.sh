#!/usr/bin/env bash
# Runs the benchmark package bench/hwbench (highwater against Apache Kafka 4.1.1) in
# bench/.venv, creating the venv with bench/requirements.txt (matplotlib) on first use.
# Expects a release build and the Kafka jars in .kafka-ref/libs: `make bench` /
# `make bench-smoke` see to both.
# Usage: bench/run.sh full|smoke|rf3|txn [options: --rounds N, --rf3-rounds N, --rf3-rate R,
#        --out DIR, --keep, --work-dir DIR, --no-readme]; rf3 runs only the RF=3 vs RF=1
#        section (three nodes per broker). bench/run.sh render RESULTS_JSON recomputes a
#        run's tables and chart.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/bench/.venv"
req="$root/bench/requirements.txt"
stamp="$venv/.bench-stamp"
want="$(sha256sum "$req" | cut -c1-16)"

if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" || ! -x "$venv/bin/python" ]]; then
    if [[ ! -x "$venv/bin/python" ]]; then
        echo "bench: creating $venv"
        python3 -m venv "$venv"
    fi
    echo "bench: pip install -r bench/requirements.txt"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
    echo "$want" >"$stamp"
fi
export PYTHONPATH="$root/bench${PYTHONPATH:+:$PYTHONPATH}"
exec "$venv/bin/python" -m hwbench "$@"
