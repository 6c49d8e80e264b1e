"""The export path from the agent process to Kafka: the producer, the OTLP span and metric
exporters, and the debug-payload sink. Loaded only once telemetry is configured."""
