"""The read side: every query the CLI and the dashboard run, parameterised.

No user text is ever formatted into SQL: values travel as query parameters
(``{name:Type}``); only the database name, validated as an identifier at configuration
time, and the table names of :mod:`guardtrace.store.tables` are interpolated. Reads that
must be exact use FINAL (ReplacingMergeTree collapses replayed rows at merge time, FINAL
at read time). The SQL of each read is a module-level template next to the function
that runs it:

* :mod:`.request_queries`: one request (lookup row, trace, payloads) and recent requests;
* :mod:`.overview_queries`: per-minute rates, headline rates, top agents (rollups only);
* :mod:`.pipeline_queries`: counts, label usage, rows written, dead letters, collector drops.
"""

from .overview_queries import (
    AgentRanking,
    Headline,
    event_rates,
    event_totals,
    headline_rates,
    modules,
    requests_seen,
    top_agents,
)
from .pipeline_queries import (
    AGENT_LABELLED_METRICS,
    COUNTED_TABLES,
    DROP_METRICS,
    LabelUsage,
    collector_drops,
    dead_letter_summary,
    event_counts,
    label_usage,
    recent_dead_letters,
    rows_written_per_minute,
    table_counts,
)
from .request_queries import (
    OUTCOMES,
    Payload,
    PayloadIntegrity,
    RequestNotFound,
    RequestSummary,
    Trace,
    TraceEvent,
    TraceSpan,
    find_request,
    recent_requests,
    request_payloads,
    request_trace,
    require_request,
    validate_request_id,
)

__all__ = [
    "AGENT_LABELLED_METRICS", "COUNTED_TABLES", "DROP_METRICS", "OUTCOMES", "AgentRanking",
    "Headline", "LabelUsage", "Payload", "PayloadIntegrity", "RequestNotFound", "RequestSummary",
    "Trace", "TraceEvent", "TraceSpan", "collector_drops", "dead_letter_summary", "event_counts",
    "event_rates", "event_totals", "find_request", "headline_rates", "label_usage", "modules",
    "recent_dead_letters", "recent_requests", "request_payloads", "request_trace",
    "require_request", "requests_seen", "rows_written_per_minute", "table_counts", "top_agents",
    "validate_request_id",
]
