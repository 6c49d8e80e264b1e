"""Pipeline health: consumer lag, rows written per minute, dead letters, collector drops."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from guardtrace.dashboard.data import auto_refresh, empty_state, minute_frame, store, time_range
from guardtrace.dashboard.kafka_health import consumer_lag
from guardtrace.dashboard.safe_render import alert, run_page
from guardtrace.dashboard.settings import settings
from guardtrace.store import queries
from guardtrace.store.connection import masked_url


def render() -> None:
    st.title("Pipeline health")
    data = store()
    auto_refresh()
    period = time_range()

    st.subheader("Consumer lag")
    lag = consumer_lag()
    if lag.error:
        alert("warning", "Cannot read the consumer lag from Kafka.",
              f"Kafka at {masked_url(lag.bootstrap)}: {lag.error}")
    else:
        cols = st.columns(3)
        cols[0].metric("Records behind", f"{lag.total:,}")
        cols[1].metric("Partitions", f"{len(lag.partitions):,}")
        cols[2].metric("Consumer group", lag.group)
        if lag.partitions:
            st.dataframe(pd.DataFrame(lag.partitions), hide_index=True, key="lag")

    st.subheader("Rows written per minute")
    written = queries.rows_written_per_minute(data.client, data.database, period.start)
    if not written:
        empty_state("No rows written in this range. Is a consumer running "
                    "(`guardtrace consume`, or `guardtrace up`)?")
    else:
        tables = sorted({table for _, table, _ in written})
        frame = minute_frame(written, period.start, period.end, tables)
        st.altair_chart(alt.Chart(frame).mark_area(opacity=0.7).encode(
            x=alt.X("minute:T", title="minute (UTC)"), y=alt.Y("count:Q", title="rows / minute",
                                                              stack=True),
            color=alt.Color("series:N", title="table"),
            tooltip=["minute:T", "series:N", "count:Q"]).properties(height=220), width="stretch")
        totals = frame.groupby("series")["count"].sum()
        st.dataframe(pd.DataFrame({"table": totals.index, "rows": totals.values}),
                     hide_index=True, key="rows_written")

    st.subheader("Dead letters")
    summary = queries.dead_letter_summary(data.client, data.database)
    total_dead = sum(row["count"] for row in summary)
    st.metric("Dead letters (all time)", f"{total_dead:,}")
    if not summary:
        st.success("No dead letters: every record the consumers read was decoded.")
    else:
        st.dataframe(pd.DataFrame(summary), hide_index=True, key="dead_letters")
        with st.expander("Newest dead letters"):
            st.dataframe(pd.DataFrame(queries.recent_dead_letters(data.client, data.database)),
                         hide_index=True, key="recent_dead_letters")
        st.caption(f"The records themselves are in the `{settings().topics.dead_letters}` "
                   "topic, with the reason in their headers, for replay.")

    st.subheader("Dropped at the collectors")
    drops = queries.collector_drops(data.client, data.database)
    for column, (metric, value) in zip(st.columns(len(drops)), drops.items(), strict=True):
        column.metric(metric.removeprefix("guardtrace."), f"{value:,}")
    st.caption("Counted inside agent processes (queue full, Kafka unreachable, hook errors) and "
               "exported as metrics; the latest value per agent process, summed.")


run_page(render)
