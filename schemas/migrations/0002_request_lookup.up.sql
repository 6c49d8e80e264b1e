-- request_id -> time range, trace ids, what happened: one small row per request, so a
-- lookup by request id reads this table, then only the partitions and traces it names.
-- Every column aggregates idempotently (min, max, set union), so a replayed batch
-- leaves the row as it was.

CREATE TABLE IF NOT EXISTS {database}.requests
(
    request_id     String,
    first_seen     SimpleAggregateFunction(min, DateTime64(9, 'UTC')),
    last_seen      SimpleAggregateFunction(max, DateTime64(9, 'UTC')),
    trace_ids      SimpleAggregateFunction(groupUniqArrayArray, Array(String)),
    event_names    SimpleAggregateFunction(groupUniqArrayArray, Array(String)),
    modules        SimpleAggregateFunction(groupUniqArrayArray, Array(String)),
    agents         SimpleAggregateFunction(groupUniqArrayArray, Array(String)),
    payload_kinds  SimpleAggregateFunction(groupUniqArrayArray, Array(String))
)
ENGINE = AggregatingMergeTree
ORDER BY request_id
TTL toDateTime(last_seen) + INTERVAL {ttl_events_days} DAY;

CREATE MATERIALIZED VIEW IF NOT EXISTS {database}.requests_from_events_mv
TO {database}.requests AS
SELECT
    request_id,
    min(timestamp) AS first_seen,
    max(timestamp) AS last_seen,
    groupUniqArray(trace_id) AS trace_ids,
    groupUniqArray(toString(name)) AS event_names,
    groupUniqArrayIf(toString(module), module != '') AS modules,
    groupUniqArrayIf(agent, agent != '') AS agents,
    CAST([], 'Array(String)') AS payload_kinds
FROM {database}.span_events
WHERE request_id != ''
GROUP BY request_id;

CREATE MATERIALIZED VIEW IF NOT EXISTS {database}.requests_from_spans_mv
TO {database}.requests AS
SELECT
    request_id,
    min(start_time) AS first_seen,
    max(end_time) AS last_seen,
    groupUniqArray(trace_id) AS trace_ids,
    CAST([], 'Array(String)') AS event_names,
    CAST([], 'Array(String)') AS modules,
    CAST([], 'Array(String)') AS agents,
    CAST([], 'Array(String)') AS payload_kinds
FROM {database}.spans
WHERE request_id != ''
GROUP BY request_id;

CREATE MATERIALIZED VIEW IF NOT EXISTS {database}.requests_from_payloads_mv
TO {database}.requests AS
SELECT
    request_id,
    min(timestamp) AS first_seen,
    max(timestamp) AS last_seen,
    groupUniqArrayIf(trace_id, trace_id != '') AS trace_ids,
    CAST([], 'Array(String)') AS event_names,
    CAST([], 'Array(String)') AS modules,
    CAST([], 'Array(String)') AS agents,
    groupUniqArray(toString(kind)) AS payload_kinds
FROM {database}.payloads
GROUP BY request_id;
