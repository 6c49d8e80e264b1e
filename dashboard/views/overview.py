"""Overview: guard event rates per minute, headline rates and the agents that hallucinate.

Everything here reads the per-minute rollup (``event_rollup_1m``), never raw events, so
the page stays fast with millions of events stored.
"""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from guardtrace.dashboard.data import (
    auto_refresh,
    empty_state,
    format_rate,
    minute_frame,
    rate_delta,
    store,
    time_range,
)
from guardtrace.dashboard.safe_render import run_page
from guardtrace.dashboard.settings import settings
from guardtrace.schemas import environment_variables as env
from guardtrace.schemas import names
from guardtrace.store import queries

ALL_MODULES = "All modules"

# Each chart: its title, and the series it plots as (label, event name, tier or None).
CHARTS = (
    ("Plan hallucinations", (
        ("detected", names.EVENT_HALLUCINATION_DETECTED, None),
        ("recovered", names.EVENT_HALLUCINATION_RECOVERED, None),
        ("unrecoverable", names.EVENT_HALLUCINATION_UNRECOVERABLE, None))),
    ("Fabrications by tier", (
        (names.TIER_ACTION, names.EVENT_FABRICATION_DETECTED, names.TIER_ACTION),
        (names.TIER_READ, names.EVENT_FABRICATION_DETECTED, names.TIER_READ),
        (names.TIER_TEXT_TOOL_CALL, names.EVENT_FABRICATION_DETECTED,
         names.TIER_TEXT_TOOL_CALL),
        (names.TIER_UNGROUNDED_RESULT, names.EVENT_FABRICATION_DETECTED,
         names.TIER_UNGROUNDED_RESULT),
        (names.TIER_REPETITION, names.EVENT_FABRICATION_DETECTED, names.TIER_REPETITION))),
    ("Forced verification", (
        ("required", names.EVENT_VERIFICATION_REQUIRED, None),
        ("nudged", names.EVENT_VERIFICATION_NUDGED, None),
        ("completed", names.EVENT_VERIFICATION_COMPLETED, None),
        ("bypassed", names.EVENT_VERIFICATION_BYPASSED, None))),
)


def _series_rows(rates: list[tuple], series: tuple) -> list[tuple]:
    wanted = {(event, tier): label for label, event, tier in series}
    rows = []
    for minute, name, tier, count in rates:
        label = wanted.get((name, tier)) or wanted.get((name, None))
        if label is not None:
            rows.append((minute, label, count))
    return rows


def _chart(frame: pd.DataFrame) -> alt.Chart:
    return alt.Chart(frame).mark_line(point=True).encode(
        x=alt.X("minute:T", title="minute (UTC)"),
        y=alt.Y("count:Q", title="events / minute"),
        color=alt.Color("series:N", title=None),
        tooltip=["minute:T", "series:N", "count:Q"],
    ).properties(height=220)


def render() -> None:
    st.title("Overview")
    data = store()
    auto_refresh()
    period = time_range()
    module_options = [ALL_MODULES, *queries.modules(data.client, data.database,
                                                    period.start - period.length)]
    chosen = st.sidebar.selectbox("Module", module_options, key="module")
    module = None if chosen == ALL_MODULES else chosen

    now_headline = queries.headline_rates(data.client, data.database, period.start, period.end,
                                          module)
    before = period.previous()
    prev_headline = queries.headline_rates(data.client, data.database, before.start, before.end,
                                           module)
    totals = queries.event_totals(data.client, data.database, period.start, period.end, module)
    guard_total = sum(totals.get(name, 0) for name in names.GUARD_EVENTS)

    # The module name is stored text: a text line, not a Markdown caption.
    st.text(f"{period.label.capitalize()} · {chosen} · changes against the {before.label}")
    if guard_total == 0:
        empty_state("No guard events in this range yet. Instrument an agent with "
                    "`guardtrace.collectors`, or generate traffic: `guardtrace simulate` "
                    "(or `guardtrace up --demo`). Then widen the time range if needed.")
        st.stop()

    cols = st.columns(4)
    cols[0].metric("Recovery rate", format_rate(now_headline.recovery_rate),
                   rate_delta(now_headline.recovery_rate, prev_headline.recovery_rate),
                   help="recovered / (recovered + unrecoverable) plan hallucinations")
    cols[1].metric("Unrecoverable rate", format_rate(now_headline.unrecoverable_rate),
                   rate_delta(now_headline.unrecoverable_rate, prev_headline.unrecoverable_rate),
                   delta_color="inverse",
                   help="requests whose plan stayed hallucinated after every retry / requests seen")
    cols[2].metric("Hallucinations detected", f"{now_headline.detected:,}",
                   f"{now_headline.detected - prev_headline.detected:+,}", delta_color="inverse")
    cols[3].metric("Requests seen", f"{now_headline.requests:,}",
                   f"{now_headline.requests - prev_headline.requests:+,}", delta_color="off")

    rates = queries.event_rates(data.client, data.database, period.start, period.end, module)
    for title, series in CHARTS:
        st.subheader(f"{title} per minute")
        frame = minute_frame(_series_rows(rates, series), period.start, period.end,
                             [label for label, _, _ in series])
        st.altair_chart(_chart(frame), width="stretch")

    st.subheader("Totals in range")
    st.dataframe(pd.DataFrame(
        [{"event": name, "count": totals.get(name, 0)} for name in names.GUARD_EVENTS]),
        hide_index=True, key="totals")

    st.subheader("Top agents by hallucinations")
    top_n = settings().top_agents
    ranking = queries.top_agents(data.client, data.database, period.start, period.end, module,
                                 top_n=top_n)
    if not ranking.total_agents:
        empty_state("No hallucinated agents or tools in this range.")
    else:
        agents = pd.DataFrame(ranking.rows(), columns=["agent", "hallucinations"])
        st.altair_chart(alt.Chart(agents).mark_bar().encode(
            x=alt.X("hallucinations:Q"), y=alt.Y("agent:N", sort=None, title=None),
            tooltip=["agent", "hallucinations"]).properties(height=28 * len(agents) + 20),
            width="stretch")
        st.dataframe(agents, hide_index=True, key="top_agents")
        st.caption(f"{ranking.total_agents:,} distinct agents; the top {len(ranking.top)} are "
                   f"named, {ranking.other_agents:,} beyond the cap of {top_n} are folded into "
                   f"`{names.OVERFLOW_LABEL}` (set {env.DASHBOARD_TOP_AGENTS.name}).")


run_page(render)
