DROP VIEW IF EXISTS {database}.requests_from_payloads_mv;
DROP VIEW IF EXISTS {database}.requests_from_spans_mv;
DROP VIEW IF EXISTS {database}.requests_from_events_mv;
DROP TABLE IF EXISTS {database}.requests;
