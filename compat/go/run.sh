#!/usr/bin/env bash
# Compat suite: franz-go (github.com/twmb/franz-go, version pinned in go.mod) under `go test`.
# Usage: compat/go/run.sh HOST:PORT [extra go test args, e.g. -run ETL]
set -euo pipefail

bootstrap="${1:?usage: compat/go/run.sh HOST:PORT [go test args...]}"
shift
cd "$(dirname "${BASH_SOURCE[0]}")"

# -count=1: never a cached result (the broker is the thing under test). The whole run is
# bounded; each test bounds its own waits well below this.
COMPAT_BOOTSTRAP="$bootstrap" exec go test -count=1 -v -timeout 300s "$@" ./...
