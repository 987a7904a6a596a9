#!/usr/bin/env bash
# Starts a throwaway highwater broker on a free loopback port with an empty temporary log
# dir, waits until it answers Metadata, runs `CMD... 127.0.0.1:PORT`, then stops the broker
# (SIGTERM), removes the temporary dir and exits with CMD's status. When the broker does not
# come up or CMD fails, the tail of the broker's log is printed.
# Usage: compat/with-highwater.sh CMD [ARGS...]      e.g. compat/with-highwater.sh compat/run-all.sh
# Environment: HIGHWATER_BIN (default ./target/release/highwater), HIGHWATER_CONFIG (default
# config/server.toml), HIGHWATER_START_TIMEOUT seconds (default 30), COMPAT_BROKER_LOG (a
# path to keep a copy of the broker's log), HIGHWATER_HTTP_LISTENERS (its http.listeners;
# default off, so that it never takes the config's fixed port).
#
# CMD gets COMPAT_RESTART_BROKER in its environment: an executable that stops the broker
# (SIGTERM) and starts it again on the same address and log dirs, returning once it answers
# Metadata (the tests of what survives a restart run it). It runs this script as
# `with-highwater.sh --restart TMPDIR`; the broker's pid is kept in TMPDIR/pid.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
restart=0
if [[ "${1:-}" == --restart ]]; then
    restart=1
    tmp="${2:?usage: with-highwater.sh --restart TMPDIR}"
    # shellcheck source=/dev/null # written below by the first run
    source "$tmp/broker.env"
else
    (($# > 0)) || { echo "usage: compat/with-highwater.sh CMD [ARGS...]" >&2; exit 2; }
    # The broker runs in the repository root, so these paths are relative to it; CMD runs
    # where this script was started.
    bin="${HIGHWATER_BIN:-./target/release/highwater}"
    config="${HIGHWATER_CONFIG:-config/server.toml}"
    timeout_s="${HIGHWATER_START_TIMEOUT:-30}"

    [[ -x "$bin" || -x "$root/$bin" ]] || { echo "with-highwater: no broker binary at $bin (make build)" >&2; exit 1; }

    # A port the kernel just handed out and released; another process could take it in
    # between, in which case the broker fails to bind and the start-up check reports it.
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])')"
    tmp="$(mktemp -d "${TMPDIR:-/tmp}/highwater-compat.XXXXXX")"
    declare -p bin config timeout_s port >"$tmp/broker.env"
    printf '#!/usr/bin/env bash\nexec %q --restart %q\n' "$root/compat/with-highwater.sh" \
        "$tmp" >"$tmp/restart"
    chmod +x "$tmp/restart"
    export COMPAT_RESTART_BROKER="$tmp/restart"
fi
bootstrap="127.0.0.1:$port"
log="$tmp/broker.log"
pid=""

# alive PID: the process exists and is not a zombie (a restarted broker is no child of the
# first run, so it cannot always be waited for).
alive() {
    [[ -e "/proc/$1" ]] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}

log_tail() {
    echo "---------- last 60 lines of the highwater log ($log) ----------" >&2
    tail -n 60 "$log" >&2 || true
    echo "---------------------------------------------------------------" >&2
}

# shellcheck disable=SC2317 # run from the EXIT trap
stop_broker() {
    [[ -f "$tmp/pid" ]] && pid="$(cat "$tmp/pid")"
    [[ -n "$pid" ]] || return 0
    if alive "$pid"; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 100); do
            alive "$pid" || break
            sleep 0.1
        done
        if alive "$pid"; then
            echo "with-highwater: broker ignored SIGTERM for 10s; sending SIGKILL" >&2
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    wait "$pid" 2>/dev/null || true
    pid=""
    rm -f "$tmp/pid"
}

# shellcheck disable=SC2317 # the EXIT trap
cleanup() {
    stop_broker
    if [[ -n "${COMPAT_BROKER_LOG:-}" && -f "$log" ]]; then
        cp "$log" "$COMPAT_BROKER_LOG" || true
    fi
    rm -rf "$tmp"
}

if ((restart)); then
    start=$SECONDS
    stop_broker
    echo "---------- with-highwater: restarted after $((SECONDS - start))s ----------" >>"$log"
else
    trap cleanup EXIT
    trap 'exit 130' INT TERM
fi

(cd "$root" && exec "$bin" serve --config "$config" --listeners "$bootstrap" \
    --log-dirs "$tmp/data" --set "http.listeners=${HIGHWATER_HTTP_LISTENERS:-}") >>"$log" 2>&1 </dev/null &
pid=$!
echo "$pid" >"$tmp/pid"

answers() {
    if command -v kcat >/dev/null; then
        kcat -L -b "$bootstrap" -m 2 >/dev/null 2>&1
    else
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null
    fi
}

start=$SECONDS
until answers; do
    if ! kill -0 "$pid" 2>/dev/null; then
        rc=0
        wait "$pid" || rc=$?
        pid=""
        echo "with-highwater: the broker exited during start-up (status $rc)" >&2
        log_tail
        exit 1
    fi
    if ((SECONDS - start >= timeout_s)); then
        echo "with-highwater: the broker did not answer on $bootstrap within ${timeout_s}s" >&2
        log_tail
        exit 1
    fi
    sleep 0.2
done
if ((restart)); then
    echo "with-highwater: highwater (pid $pid) answers again on $bootstrap after" \
        "$((SECONDS - start))s"
    exit 0
fi
echo "with-highwater: highwater (pid $pid) answers on $bootstrap after $((SECONDS - start))s"

rc=0
set +o pipefail
"$@" "$bootstrap" 2>&1 | tee "$tmp/cmd.out"
rc=${PIPESTATUS[0]}
set -o pipefail
crashed=0
pid="$(cat "$tmp/pid" 2>/dev/null || true)"
[[ -n "$pid" ]] && alive "$pid" || crashed=1
if ((rc != 0 || crashed)); then
    echo "with-highwater: '$*' exited with status $rc$( ((crashed)) &&
        echo "; the broker had exited before the end of the run")" >&2
    log_tail
    ((rc != 0)) || rc=1
    # Keep run-all.sh's "N passed, N failed" as the closing line.
    last="$(tail -n 1 "$tmp/cmd.out")"
    if [[ "$last" =~ ^[0-9]+\ passed,\ [0-9]+\ failed$ ]]; then
        echo "$last"
    fi
fi
exit "$rc"
