"""ClickHouse, the one home of the store: connection, table names, migrations (single node
and cluster), the batch writer and the read queries used by the dashboard and the CLI."""
