#!/usr/bin/env bash
# Restarts the reference Apache Kafka started by start.sh: SIGTERM, then the same broker on
# the same address and data. Returns when it answers Metadata again. Tests of what survives a
# restart get this as COMPAT_RESTART_BROKER (`make compat-kafka-ref` sets it).
set -euo pipefail
exec "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/start.sh" --restart
