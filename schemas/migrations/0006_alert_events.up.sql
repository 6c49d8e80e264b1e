-- One row per alert state transition: a rule's label set went pending, firing, resolved
-- (firing -> inactive) or inactive again before it fired. Written by the alert evaluator
-- (`guardtrace up` with a rules file, or `guardtrace alerts run`); read by the dashboard's
-- Alerts page, and by the evaluator when it starts, to take over the alerts still pending
-- or firing. event_id hashes the rule, the labels, the new state and the time, so a
-- transition written twice (a retried insert) collapses into one row.

CREATE TABLE IF NOT EXISTS {database}.alert_events
(
    event_id      String,
    timestamp     DateTime64(3, 'UTC'),
    rule          LowCardinality(String),
    labels        Map(LowCardinality(String), String),
    state         LowCardinality(String),
    previous      LowCardinality(String),
    metric        LowCardinality(String),
    condition     String,
    value         Nullable(Float64),
    threshold     Nullable(Float64),
    volume        Nullable(UInt64),
    active_since  DateTime64(3, 'UTC'),
    message       String,
    inserted_at   DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(inserted_at)
PARTITION BY toDate(timestamp)
ORDER BY (rule, timestamp, event_id)
TTL toDateTime(timestamp) + INTERVAL {ttl_events_days} DAY;
