-- One row per OTLP log record from the logs topic: GenAI log events such as
-- gen_ai.client.inference.operation.details (the prompt and reply of one LLM call, when an
-- instrumentation sends them as an event rather than on the span), and any other log an
-- agent or a Collector sends there. record_id is a hash of the record's position in its
-- message and its content, so a replayed batch collapses into the rows already written.
-- `timestamp` is the record's time, or its observed time when the record has none (as the
-- OTLP logs data model recommends); both are kept.

CREATE TABLE IF NOT EXISTS {database}.log_records
(
    record_id           String,
    timestamp           DateTime64(9, 'UTC') CODEC(Delta, ZSTD(1)),
    observed_timestamp  DateTime64(9, 'UTC') CODEC(Delta, ZSTD(1)),
    trace_id            String,
    span_id             String,
    severity_number     Int32,
    severity_text       LowCardinality(String),
    event_name          LowCardinality(String),
    body                String CODEC(ZSTD(3)),
    request_id          String,
    service             LowCardinality(String),
    scope_name          LowCardinality(String),
    attributes          Map(LowCardinality(String), String) CODEC(ZSTD(3)),
    resource_attributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    inserted_at         DateTime64(3, 'UTC') DEFAULT now64(3),
    INDEX idx_request_id request_id TYPE bloom_filter(0.01) GRANULARITY 4,
    INDEX idx_trace_id trace_id TYPE bloom_filter(0.01) GRANULARITY 4
)
ENGINE = ReplacingMergeTree(inserted_at)
PARTITION BY toDate(timestamp)
ORDER BY (service, event_name, timestamp, record_id)
TTL toDateTime(timestamp) + INTERVAL {ttl_events_days} DAY;
