"""The contract between the agent side and the storage side.

Everything that crosses Kafka or lands in ClickHouse is named here exactly once:
topic names, span event names, metric names, attribute keys (:mod:`.names`), the debug
payload record (:mod:`.payload_record`) and the numbered SQL migrations (``migrations/``).
"""
