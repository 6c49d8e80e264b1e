"""Kafka on the server side: the topic set, consumer lag, the broker workarounds and the
embedded broker binary."""
