DROP TABLE IF EXISTS {database}.dead_letters;
