"""The emit path every guard shares: span events, counters with capped agent labels,
structured logs and redacted debug payloads (telemetry, state, cardinality, redaction)."""
