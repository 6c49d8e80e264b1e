DROP TABLE IF EXISTS {database}.alert_events;
