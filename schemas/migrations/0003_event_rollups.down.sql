DROP VIEW IF EXISTS {database}.event_rollup_1m_mv;
DROP TABLE IF EXISTS {database}.event_rollup_1m;
