DROP TABLE IF EXISTS {database}.log_records;
