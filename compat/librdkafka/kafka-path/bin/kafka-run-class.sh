#!/usr/bin/env bash
# A stand-in for Kafka's bin/kafka-run-class.sh over the jars in .kafka-ref/libs, for the
# librdkafka tests that run Kafka's tools or Java helpers through KAFKA_PATH
# (compat/librdkafka/run.sh sets KAFKA_PATH to the directory above this one).
# Usage: kafka-run-class.sh CLASS [ARGS...]   (CLASSPATH, if set, comes first)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../.." && pwd)"
exec java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    "-Dlog4j2.configurationFile=$root/compat/java/tools-log4j2.properties" \
    -cp "${CLASSPATH:+$CLASSPATH:}$root/.kafka-ref/libs/*" "$@"
