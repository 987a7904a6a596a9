#!/usr/bin/env bash
# Installs what the compat suites need, idempotently and quickly when already done:
#   - kcat from Debian (links librdkafka 2.0.2), and a JDK + Maven if missing;
#   - a Python venv at compat/.venv with compat/requirements.txt
#     (confluent-kafka bundles librdkafka 2.16, which is checked);
#   - the Maven dependencies of compat/java;
#   - Apache Kafka (broker, tools, clients; compat/kafka-ref/pom.xml) into .kafka-ref/libs;
#   - the Go modules of compat/go (franz-go), and Debian's Go if there is no `go`;
#   - the npm packages of compat/node (kafkajs, from its package-lock.json), and Debian's
#     Node.js and npm if missing.
# Needs only Debian's, PyPI's, npm's and Maven Central's registries and the Go module
# proxy; no prompts (CI has no stdin).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
compat="$root/compat"
venv="$compat/.venv"
libs="$root/.kafka-ref/libs"
mvn_flags=(-q -B --no-transfer-progress)
# Debian's Maven prints stray ANSI resets through jansi without this.
export MAVEN_OPTS="${MAVEN_OPTS:-} -Djansi.noreset=true"
apt_updated=0

as_root() {
    if [[ "$(id -u)" -eq 0 ]]; then
        "$@"
    else
        sudo -n "$@"
    fi
}

apt_install() {
    if ((apt_updated == 0)); then
        as_root apt-get update -qq
        apt_updated=1
    fi
    local log
    log="$(mktemp)"
    if ! as_root env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "$@" >"$log" 2>&1; then
        cat "$log" >&2
        echo "install-deps: apt-get install $* failed" >&2
        exit 1
    fi
    rm -f "$log"
}

# Prints a short fingerprint of the given files, to skip steps whose inputs did not change.
fingerprint() {
    cat "$@" | sha256sum | cut -c1-16
}

# --- Debian packages -------------------------------------------------------------------
missing=()
command -v kcat >/dev/null || missing+=(kcat)
command -v java >/dev/null || missing+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null || missing+=(maven)
command -v python3 >/dev/null || missing+=(python3)
# compat/go/go.mod asks for Go 1.26; an older go fetches that toolchain from the module proxy.
command -v go >/dev/null || missing+=(golang-go)
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if ((${#missing[@]} > 0)); then
    echo "install-deps: apt-get install ${missing[*]}"
    apt_install "${missing[@]}"
fi

# --- Python venv -----------------------------------------------------------------------
req="$compat/requirements.txt"
stamp="$venv/.compat-stamp"
want="$(fingerprint "$req")"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" || ! -x "$venv/bin/python" ]]; then
    if [[ ! -x "$venv/bin/python" ]]; then
        echo "install-deps: creating $venv"
        if ! python3 -m venv "$venv" 2>/dev/null; then
            rm -rf "$venv"
            apt_install python3-venv
            python3 -m venv "$venv"
        fi
    fi
    echo "install-deps: pip install -r compat/requirements.txt"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
    echo "$want" >"$stamp"
fi
"$venv/bin/python" - <<'PY'
import sys
import confluent_kafka
import kafka

lib = confluent_kafka.libversion()[0]
if not lib.startswith("2.16."):
    sys.exit(f"install-deps: confluent-kafka bundles librdkafka {lib}, expected 2.16.x")
print(f"install-deps: python ok: confluent-kafka {confluent_kafka.__version__} "
      f"(librdkafka {lib}), kafka-python {kafka.__version__}")
PY

# --- Maven: compat/java ----------------------------------------------------------------
java_stamp="$compat/java/target/.compat-stamp"
want="$(fingerprint "$compat/java/pom.xml")"
if [[ ! -f "$java_stamp" || "$(cat "$java_stamp")" != "$want" ]]; then
    echo "install-deps: resolving compat/java (mvn test-compile dependency:resolve-plugins)"
    # Fetches the dependencies and plugins; surefire fetches its small JUnit provider on the
    # first test run (Maven Central is reachable then too).
    mvn "${mvn_flags[@]}" -f "$compat/java/pom.xml" test-compile dependency:resolve-plugins
    mkdir -p "$(dirname "$java_stamp")"
    echo "$want" >"$java_stamp"
fi

# --- Maven: the Apache Kafka reference -------------------------------------------------
libs_stamp="$libs/.compat-stamp"
want="$(fingerprint "$compat/kafka-ref/pom.xml")"
if [[ ! -f "$libs_stamp" || "$(cat "$libs_stamp")" != "$want" ]]; then
    echo "install-deps: copying Apache Kafka jars into .kafka-ref/libs"
    rm -rf "$libs"
    mvn "${mvn_flags[@]}" -f "$compat/kafka-ref/pom.xml" dependency:copy-dependencies \
        -DincludeScope=runtime "-DoutputDirectory=$libs"
    echo "$want" >"$libs_stamp"
fi

# --- Go: compat/go ---------------------------------------------------------------------
# Quick when the module cache has them already.
(cd "$compat/go" && go mod download)
echo "install-deps: go ok: $(cd "$compat/go" && go version) ($(cd "$compat/go" &&
    go list -m -f '{{.Path}} {{.Version}}' github.com/twmb/franz-go))"

# --- Node: compat/node ----------------------------------------------------------------
# npm ci reinstalls only when the lock file changed since the last install.
node_stamp="$compat/node/node_modules/.compat-stamp"
want="$(fingerprint "$compat/node/package-lock.json")"
if [[ ! -f "$node_stamp" || "$(cat "$node_stamp")" != "$want" ]]; then
    (cd "$compat/node" && npm ci --no-audit --no-fund --loglevel=error)
    echo "$want" >"$node_stamp"
fi
echo "install-deps: node ok: $(node --version) (kafkajs $(node -p 'require("'"$compat"'/node/node_modules/kafkajs/package.json").version'))"

echo "install-deps: done ($(find "$libs" -name '*.jar' | wc -l) jars in .kafka-ref/libs)"
