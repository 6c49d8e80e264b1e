-- Core tables: one row per span, span event, metric point and payload chunk.
-- ReplacingMergeTree with a deterministic identity at the end of ORDER BY: a batch the
-- consumer replays after a crash collapses into the rows already written (queries that
-- must be exact use FINAL or GROUP BY the identity).

CREATE TABLE IF NOT EXISTS {database}.spans
(
    trace_id            String,
    span_id             String,
    parent_span_id      String,
    name                LowCardinality(String),
    kind                LowCardinality(String),
    service             LowCardinality(String),
    scope_name          LowCardinality(String),
    start_time          DateTime64(9, 'UTC') CODEC(Delta, ZSTD(1)),
    end_time            DateTime64(9, 'UTC') CODEC(Delta, ZSTD(1)),
    duration_ns         UInt64,
    status_code         LowCardinality(String),
    status_message      String,
    request_id          String,
    attributes          Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    resource_attributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    inserted_at         DateTime64(3, 'UTC') DEFAULT now64(3),
    INDEX idx_request_id request_id TYPE bloom_filter(0.01) GRANULARITY 4
)
ENGINE = ReplacingMergeTree(inserted_at)
PARTITION BY toDate(start_time)
ORDER BY (trace_id, span_id)
TTL toDateTime(start_time) + INTERVAL {ttl_events_days} DAY;

CREATE TABLE IF NOT EXISTS {database}.span_events
(
    event_id            String,
    timestamp           DateTime64(9, 'UTC') CODEC(Delta, ZSTD(1)),
    name                LowCardinality(String),
    trace_id            String,
    span_id             String,
    request_id          String,
    module              LowCardinality(String),
    agent               String,
    tier                LowCardinality(String),
    service             LowCardinality(String),
    attributes          Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    inserted_at         DateTime64(3, 'UTC') DEFAULT now64(3),
    INDEX idx_trace_id trace_id TYPE bloom_filter(0.01) GRANULARITY 4
)
ENGINE = ReplacingMergeTree(inserted_at)
PARTITION BY toDate(timestamp)
ORDER BY (request_id, timestamp, event_id)
TTL toDateTime(timestamp) + INTERVAL {ttl_events_days} DAY;

CREATE TABLE IF NOT EXISTS {database}.metric_points
(
    point_id            String,
    metric_name         LowCardinality(String),
    metric_type         LowCardinality(String),
    unit                LowCardinality(String),
    service             LowCardinality(String),
    module              LowCardinality(String),
    agent               String,
    start_time          DateTime64(9, 'UTC'),
    timestamp           DateTime64(9, 'UTC') CODEC(Delta, ZSTD(1)),
    value               Float64,
    count               UInt64,
    sum                 Float64,
    bucket_counts       Array(UInt64),
    explicit_bounds     Array(Float64),
    is_monotonic        UInt8,
    temporality         LowCardinality(String),
    attributes          Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    resource_attributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    inserted_at         DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(inserted_at)
PARTITION BY toDate(timestamp)
ORDER BY (metric_name, module, timestamp, point_id)
TTL toDateTime(timestamp) + INTERVAL {ttl_events_days} DAY;

CREATE TABLE IF NOT EXISTS {database}.payloads
(
    payload_id          String,
    chunk_index         UInt32,
    chunk_count         UInt32,
    request_id          String,
    kind                LowCardinality(String),
    timestamp           DateTime64(9, 'UTC'),
    trace_id            String,
    span_id             String,
    body                String CODEC(ZSTD(3)),
    preview             String,
    body_bytes          UInt64,
    body_sha256         String,
    truncated           UInt8,
    redactions          UInt32,
    attributes          Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    inserted_at         DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(inserted_at)
PARTITION BY toDate(timestamp)
ORDER BY (request_id, payload_id, chunk_index)
TTL toDateTime(timestamp) + INTERVAL {ttl_payloads_days} DAY;
