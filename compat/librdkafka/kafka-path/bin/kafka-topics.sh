#!/usr/bin/env bash
# Kafka's bin/kafka-topics.sh from the jars in .kafka-ref/libs (see kafka-run-class.sh).
# Usage: kafka-topics.sh --bootstrap-server HOST:PORT ARGS...
set -euo pipefail
exec "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh" org.apache.kafka.tools.TopicCommand "$@"
