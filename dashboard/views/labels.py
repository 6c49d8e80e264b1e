"""Labels: how many distinct agent label values each guard counter carries, against the cap.

The collectors cap the ``agent`` label per counter and module (hallucinated names are
unbounded); past the cap, values are folded into ``__other__`` and counted in
``guardtrace.label_overflow``. This page shows how close each series is to the cap.
"""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from guardtrace.dashboard.data import auto_refresh, empty_state, store, time_range
from guardtrace.dashboard.safe_render import run_page
from guardtrace.dashboard.settings import settings
from guardtrace.schemas import environment_variables as env
from guardtrace.schemas import names
from guardtrace.store import queries


def render() -> None:
    st.title("Agent labels")
    data = store()
    auto_refresh()
    period = time_range()
    cap = settings().agent_label_cap
    usage = queries.label_usage(data.client, data.database, period.start)
    st.caption(f"Collector cap: {cap:,} distinct `agent` values per counter and module "
               f"({env.AGENT_LABEL_CAP.name}, as configured for this dashboard; agents may set "
               f"their own). Counters exported in the {period.label}.")
    if not usage:
        empty_state("No guard counters with an agent label in this range yet. Run "
                    "`guardtrace simulate`, and allow one metric export interval "
                    f"({env.METRIC_EXPORT_INTERVAL_MS.name}).")
        st.stop()

    frame = pd.DataFrame([{
        "metric": u.metric, "module": u.module, "distinct agents": u.distinct_agents,
        "cap": cap, "of cap": f"{min(u.distinct_agents / cap, 1):.0%}",
        f"{names.OVERFLOW_LABEL} in use": "yes" if u.overflowed else "no",
        "folded label uses": u.overflow_count} for u in usage])
    cols = st.columns(3)
    cols[0].metric("Counters with agent labels", f"{len(usage):,}")
    cols[1].metric("At the cap", f"{sum(u.overflowed for u in usage):,}")
    cols[2].metric("Folded label uses", f"{sum(u.overflow_count for u in usage):,}")
    chart = frame.assign(series=frame["metric"] + " · " + frame["module"])
    st.altair_chart(alt.Chart(chart).mark_bar().encode(
        x=alt.X("distinct agents:Q", scale=alt.Scale(domain=[0, max(cap, int(chart["distinct agents"].max()))])),
        # Altair cuts axis labels at 180 px; "metric · module" needs its full width to be told apart.
        y=alt.Y("series:N", title=None, sort="-x", axis=alt.Axis(labelLimit=420)),
        tooltip=["metric", "module", "distinct agents", "folded label uses"],
    ) + alt.Chart(pd.DataFrame({"cap": [cap]})).mark_rule(color="red", strokeDash=[4, 4]).encode(
        x="cap:Q"), width="stretch")
    st.dataframe(frame, hide_index=True, key="labels")


run_page(render)
