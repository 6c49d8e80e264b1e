DROP TABLE IF EXISTS {database}.payloads;
DROP TABLE IF EXISTS {database}.metric_points;
DROP TABLE IF EXISTS {database}.span_events;
DROP TABLE IF EXISTS {database}.spans;
