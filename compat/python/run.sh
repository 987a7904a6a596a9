#!/usr/bin/env bash
# Compat suite: confluent-kafka (librdkafka 2.16) and kafka-python, under pytest.
# Usage: compat/python/run.sh HOST:PORT [pytest args...]
set -euo pipefail

bootstrap="${1:?usage: compat/python/run.sh HOST:PORT [pytest args...]}"
shift
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
py="$here/../.venv/bin/python"
[[ -x "$py" ]] || { echo "no $py; run compat/install-deps.sh" >&2; exit 1; }
cd "$here"
exec "$py" -m pytest -p no:cacheprovider --bootstrap "$bootstrap" "$@"
