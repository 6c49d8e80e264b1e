#!/usr/bin/env bash
# A batch smoke test of the pipeline on embedded defaults: broker -> migrate -> emit -> consume ->
# stats. Every component is the real one (Tansu speaks Kafka, chDB is ClickHouse).
set -euo pipefail
PORT="${GUARDTRACE_DEMO_PORT:-9092}"
SPANS="${GUARDTRACE_DEMO_SPANS:-10000}"
export GUARDTRACE_KAFKA_BOOTSTRAP="127.0.0.1:${PORT}"
export GUARDTRACE_CLICKHOUSE_URL="${GUARDTRACE_CLICKHOUSE_URL:-chdb://.guardtrace/store}"
mkdir -p .guardtrace

guardtrace broker --port "$PORT" > .guardtrace/broker.log 2>&1 &
BROKER=$!
trap 'kill $BROKER 2>/dev/null; wait $BROKER 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  grep -q "listening" .guardtrace/broker.log 2>/dev/null && break
  kill -0 $BROKER 2>/dev/null || { cat .guardtrace/broker.log; exit 1; }
  sleep 0.2
done
echo "== broker:   $(grep -m1 listening .guardtrace/broker.log)"
echo "== migrate:  $(guardtrace migrate)"
echo "== emit:     $(guardtrace emit-test --spans "$SPANS" --payloads)"
echo "== consume:  $(guardtrace consume --until-idle 5 2>/dev/null)"
echo "== stats (every emitted event exactly once):"
guardtrace stats
