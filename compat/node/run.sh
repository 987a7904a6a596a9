#!/usr/bin/env bash
# Compat suite: kafkajs (version pinned in package.json / package-lock.json) under Node's
# own test runner (the tests of kafkajs.test.js run one after another).
# Usage: compat/node/run.sh HOST:PORT
set -euo pipefail

bootstrap="${1:?usage: compat/node/run.sh HOST:PORT}"
cd "$(dirname "${BASH_SOURCE[0]}")"
[[ -d node_modules/kafkajs ]] || { echo "kafkajs is not installed; run compat/install-deps.sh" >&2; exit 1; }
# The whole run is bounded; each test bounds its own waits well below this.
COMPAT_BOOTSTRAP="$bootstrap" exec timeout 300 node --test kafkajs.test.js
