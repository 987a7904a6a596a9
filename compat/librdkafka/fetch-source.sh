#!/usr/bin/env bash
# Fetches Debian's librdkafka source (2.0.2, the version its packages ship) into the parent
# directory of LIBRDKAFKA_SRC when that is not a source tree yet: adds a deb-src line when
# the machine has none, installs RapidJSON (tests 0053 and 0098 need it to build), then
# `apt-get source librdkafka`. compat/librdkafka/run.sh builds its test-runner on first use.
# Usage: LIBRDKAFKA_SRC=DIR compat/librdkafka/fetch-source.sh
set -euo pipefail

src="${LIBRDKAFKA_SRC:?set LIBRDKAFKA_SRC to where the source tree goes}"
[[ -d "$src/tests" ]] && exit 0
echo "librdkafka: fetching Debian's librdkafka source into $(dirname "$src")"
mkdir -p "$(dirname "$src")"
if ! grep -rqs '^Types: *deb-src\|^deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    codename="$(. /etc/os-release && echo "$VERSION_CODENAME")"
    printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: %s %s-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        "$codename" "$codename" >/etc/apt/sources.list.d/debian-src.sources
    apt-get update -qq
fi
# apt-get source unpacks with dpkg-source (dpkg-dev).
command -v dpkg-source >/dev/null 2>&1 ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dpkg-dev
[[ -f /usr/include/rapidjson/document.h ]] ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rapidjson-dev
(cd "$(dirname "$src")" && apt-get source -qq librdkafka) || {
    echo "librdkafka: apt-get source failed; it needs a deb-src line (or set LIBRDKAFKA_SRC)" >&2
    exit 1
}
[[ -d "$src/tests" ]] || {
    echo "librdkafka: apt-get source made no $src (another version?): $(ls "$(dirname "$src")")" >&2
    exit 1
}
