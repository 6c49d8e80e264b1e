"""Requests: find one by id, or pick from recent requests with problems; see its story,
its trace and its debug payloads.

Under its trace timeline, a request page has three tabs: the story (its LLM calls as
conversations and what the guards found in them, :mod:`.request_story`), its events with
their attributes, and the raw debug payloads.

A request page reads the request-id lookup first, then only that request's rows. The
request id travels in the URL (``/requests?request_id=...``) so a page can be shared,
and so can a crafted one: the id, like everything read from the store, is shown as text
(:mod:`guardtrace.dashboard.safe_render`), never as Markdown.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import altair as alt
import pandas as pd
import streamlit as st

from guardtrace.dashboard.data import Store, empty_state, store
from guardtrace.dashboard.safe_render import alert, literal, run_page
from guardtrace.dashboard.views.request_story import draw_story
from guardtrace.dashboard.views.story import read_story
from guardtrace.schemas import names
from guardtrace.schemas.request_ids import InvalidRequestId, validate_request_id
from guardtrace.store import queries

# Bodies longer than this are shown cut (the download button has the whole body).
SHOWN_BODY_CHARS = 20_000
LIST_WINDOWS = {"last hour": timedelta(hours=1), "last 24 hours": timedelta(hours=24),
                "last 7 days": timedelta(days=7)}
_REDACTION_PREFIX = names.REDACTION_MARKER_FORMAT.split("{")[0]
# A download's file name is made of stored text: kept to characters every system allows.
_FILE_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _timeline_chart(trace: queries.Trace) -> alt.LayerChart | alt.FacetChart:
    """Spans as bars and events as diamonds on one axis: milliseconds since the start.

    An offset axis, not wall-clock time: guard work often takes well under a millisecond,
    which a time axis cannot resolve.
    """
    origin = min([s.start_time for s in trace.spans] + [e.timestamp for e in trace.events])

    def ms(moment: datetime) -> float:
        return round((moment - origin).total_seconds() * 1000, 3)

    spans = pd.DataFrame([{"name": s.name, "start_ms": ms(s.start_time),
                           "end_ms": max(ms(s.end_time), ms(s.start_time) + 0.001),
                           "duration_ms": round(s.duration_ms, 3), "status": s.status_code}
                          for s in trace.spans])
    events = pd.DataFrame([{"name": e.name, "at_ms": ms(e.timestamp), "lane": _lane(trace, e),
                            "module": e.module, "agent": e.agent, "tier": e.tier}
                           for e in trace.events])
    axis = alt.X("start_ms:Q", title="ms since the request started")
    layers = []
    if not spans.empty:
        layers.append(alt.Chart(spans).mark_bar(height=14, opacity=0.6).encode(
            x=axis, x2="end_ms:Q",
            y=alt.Y("name:N", title=None, sort=None, axis=alt.Axis(labelLimit=240)),
            tooltip=["name", "start_ms", "duration_ms", "status"]))
    if not events.empty:
        layers.append(alt.Chart(events).mark_point(size=140, filled=True, shape="diamond")
                      .encode(x=alt.X("at_ms:Q", title="ms since the request started"),
                              y=alt.Y("lane:N", sort=None),
                              color=alt.Color("name:N", title="event"),
                              tooltip=["name", "at_ms", "module", "agent", "tier"]))
    lanes = len({*spans.get("name", []), *events.get("lane", [])})
    return alt.layer(*layers).properties(height=50 + 36 * max(1, lanes))


def _lane(trace: queries.Trace, event: queries.TraceEvent) -> str:
    """The span an event belongs to, so events sit on their span's row of the timeline."""
    for span in trace.spans:
        if span.span_id == event.span_id:
            return span.name
    return "(no span)"


def _show_payload(payload: queries.Payload, index: int) -> None:
    title = (f"{literal(payload.kind)} · {payload.timestamp:%H:%M:%S} · "
             f"{payload.body_bytes:,} bytes"
             + (" · redacted" if payload.redactions else "")
             + (" · truncated" if payload.truncated else ""))
    with st.expander(title, expanded=index == 0):
        if payload.redactions:
            st.caption(f":material/lock: {payload.redactions} secret(s) were redacted in the agent process "
                       f"before export; they appear as `{_REDACTION_PREFIX}…]`.")
        if payload.truncated:
            alert("warning", f"Truncated at the collector's payload limit: the original body "
                  f"was {payload.body_bytes:,} bytes.", f"sha256 {payload.body_sha256}")
        if not payload.complete:
            st.warning(f"Incomplete: {payload.chunks_present} of {payload.chunk_count} chunks "
                       "have arrived.")
        elif payload.integrity is queries.PayloadIntegrity.CHECKSUM_MISMATCH:
            # The chunks are all there but the body is not the one the agent sent.
            alert("error", "Checksum mismatch: this body is not the one the agent sent.",
                  payload.problem)
        if payload.attributes:
            st.json(payload.attributes, expanded=False)
        shown = payload.body[:SHOWN_BODY_CHARS]
        st.code(shown + ("\n…" if len(payload.body) > SHOWN_BODY_CHARS else ""),
                language="json" if shown.lstrip().startswith(("{", "[")) else None)
        name = _FILE_NAME_UNSAFE.sub("_", f"{payload.request_id}-{payload.kind}-"
                                          f"{payload.payload_id[:8]}")
        st.download_button("Download payload", payload.body.encode("utf-8"),
                           file_name=f"{name}.txt", mime="text/plain",
                           key=f"download-{payload.payload_id}")


def show_request(data: Store, request_id: str) -> None:
    try:
        request = queries.require_request(data.client, data.database, request_id)
    except queries.RequestNotFound:
        alert("warning", "No request with this id is stored. Ids appear once the consumers "
              "have written the request's telemetry; pick one from the list below.",
              f"request id: {request_id}\ndatabase: {data.database}")
        return
    trace = queries.request_trace(data.client, data.database, request)
    # The trace's summary also names what was filed under a trace id (pipeline findings
    # on an LLM span whose request id reached Kafka later).
    request = trace.request
    payloads = queries.request_payloads(data.client, data.database, request_id)
    st.subheader("Request")
    st.code(request.request_id, language=None)
    cols = st.columns(4)
    cols[0].metric("Spans", len(trace.spans))
    cols[1].metric("Events", len(trace.events))
    cols[2].metric("Payloads", len(payloads))
    cols[3].metric("Duration", f"{(request.last_seen - request.first_seen).total_seconds() * 1000:,.1f} ms")
    # Agent names are often the model's own inventions: text, not Markdown.
    st.text(f"first seen {request.first_seen:%Y-%m-%d %H:%M:%S.%f} UTC · modules: "
            f"{', '.join(request.modules) or '-'} · agents: "
            f"{', '.join(request.agents) or '-'} · traces: {', '.join(request.trace_ids)}")
    st.markdown("**Trace timeline** (spans as bars, events as diamonds)")
    if trace.spans or trace.events:
        st.altair_chart(_timeline_chart(trace), width="stretch")
    story, events, raw = st.tabs(["Story", f"Events ({len(trace.events)})",
                                  f"Debug payloads ({len(payloads)})"])
    with story:
        draw_story(read_story(trace, payloads))
    with events:
        _show_events(trace)
    with raw:
        if not payloads:
            empty_state("No debug payloads for this request (payload capture may be off: "
                        "GUARDTRACE_CAPTURE_PAYLOADS).")
        for index, payload in enumerate(payloads):
            _show_payload(payload, index)


def _show_events(trace: queries.Trace) -> None:
    st.dataframe(pd.DataFrame([{
        "time": f"{e.timestamp:%H:%M:%S.%f}"[:-3], "event": e.name, "module": e.module, "agent": e.agent,
        "tier": e.tier,
        "attributes": json.dumps({k: v for k, v in sorted(e.attributes.items())
                                  if k not in (names.ATTR_REQUEST_ID, names.ATTR_MODULE)})}
        for e in trace.events], columns=["time", "event", "module", "agent", "tier",
                                         "attributes"]),
        hide_index=True, key="events")
    for event in trace.events:
        with st.expander(f"{event.timestamp:%H:%M:%S.%f} {literal(event.name)}"):
            st.json(event.attributes)


def show_recent(data: Store) -> None:
    st.subheader("Recent requests with problems")
    left, right = st.columns(2)
    options = [*queries.OUTCOMES, "all"]
    outcome = left.selectbox("Outcome", options, index=options.index("problems"),
                             key="outcome")
    window = right.selectbox("Seen in", list(LIST_WINDOWS), key="window")
    rows = queries.recent_requests(data.client, data.database,
                                   since=datetime.now(UTC) - LIST_WINDOWS[window],
                                   outcome=outcome, limit=200)
    if not rows:
        empty_state(f"No requests with outcome `{outcome}` in the {window}. Generate traffic "
                    "with `guardtrace simulate`, or widen the window.")
        return
    st.dataframe(pd.DataFrame([{
        "request id": r.request_id, "last seen": r.last_seen,
        "events": ", ".join(n.removeprefix("llm.") for n in r.event_names),
        "modules": ", ".join(r.modules), "payloads": ", ".join(r.payload_kinds)}
        for r in rows]), hide_index=True, key="recent")
    st.selectbox("Open a request", ["", *[r.request_id for r in rows]], key="open_request",
                 on_change=_open_picked)


def _open_picked() -> None:
    if st.session_state.get("open_request"):
        st.query_params["request_id"] = st.session_state["open_request"]


def render() -> None:
    st.title("Requests")
    data = store()
    request_id = st.query_params.get("request_id", "").strip()
    # Keep the search box showing the id in the URL (opened from the list, or a shared link).
    if st.session_state.get("_shown_request_id") != request_id:
        st.session_state["request_id_input"] = request_id
        st.session_state["_shown_request_id"] = request_id
    with st.form("search", border=False):
        st.text_input("Request id", placeholder="paste a request id, e.g. from a log line",
                      key="request_id_input")
        if st.form_submit_button("Search"):
            request_id = st.session_state["request_id_input"].strip()
            st.query_params["request_id"] = request_id
            st.session_state["_shown_request_id"] = request_id
    if request_id:
        try:
            request_id = validate_request_id(request_id)
        except InvalidRequestId as exc:
            alert("error", "That is not a request id, so nothing was looked up.", str(exc))
        else:
            show_request(data, request_id)
        st.divider()
    show_recent(data)


run_page(render)
