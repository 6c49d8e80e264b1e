"""guardtrace: observability for LLM-agent hallucinations.

The distribution is one namespace. What agents import lives in
:mod:`guardtrace.collectors`; the pipeline that persists telemetry lives in
:mod:`guardtrace.consumers`; the wire contract shared by both (topics, event and
metric names, attribute keys, the payload record, the SQL schema) lives in
:mod:`guardtrace.schemas`.
"""

__version__ = "0.1.0"
