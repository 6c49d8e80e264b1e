-- One row per record the consumer could not decode. The record itself goes to the
-- dead-letter topic (with the reason in its headers) for replay; this table is what the
-- dashboard's health page and `guardtrace stats` count. The row is written in the same
-- batch as the good rows, before the offsets are committed, and its id is the source
-- position, so a replayed batch collapses into the row already written.

CREATE TABLE IF NOT EXISTS {database}.dead_letters
(
    dead_letter_id   String,
    timestamp        DateTime64(9, 'UTC'),
    source_topic     LowCardinality(String),
    source_partition UInt32,
    source_offset    UInt64,
    reason_kind      LowCardinality(String),
    reason           String,
    value_bytes      UInt64,
    value_sample     String,
    inserted_at      DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(inserted_at)
PARTITION BY toDate(timestamp)
ORDER BY (source_topic, source_partition, source_offset, dead_letter_id)
TTL toDateTime(timestamp) + INTERVAL {ttl_events_days} DAY;
