#!/usr/bin/env bash
# Compat suite: the Apache Kafka Java client (JUnit 5 tests under Maven Surefire), then
# Kafka's CLI tools (cli-tools.sh). Both parts always run; fails if either failed.
# Usage: compat/java/run.sh HOST:PORT [extra mvn args, e.g. -Dtest=OffsetsTest]
set -euo pipefail

bootstrap="${1:?usage: compat/java/run.sh HOST:PORT [mvn args...]}"
shift
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# Debian's Maven prints stray ANSI resets through jansi without this.
export MAVEN_OPTS="${MAVEN_OPTS:-} -Djansi.noreset=true"
rc=0
mvn -B --no-transfer-progress -f "$here/pom.xml" test \
    "-Dbootstrap=$bootstrap" "$@" || rc=1
"$here/cli-tools.sh" "$bootstrap" || rc=1
exit "$rc"
