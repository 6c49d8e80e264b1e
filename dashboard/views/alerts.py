"""Alerts: the rules, where each alert is now, and the history of their transitions.

The rules come from the rules file (``GUARDTRACE_ALERT_RULES``, which ``guardtrace up
--alert-rules`` hands the dashboard); states and history from ``alert_events``, which
the evaluator writes wherever it runs (inside ``up``, or ``guardtrace alerts run`` on a
cluster), so a dashboard without the rules file still shows what fired.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pandas as pd
import streamlit as st

from guardtrace.alerts import FIRING, PENDING, AlertRulesError, RuleSet, load_rules
from guardtrace.alerts.durations import format_duration
from guardtrace.dashboard.data import auto_refresh, empty_state, store, time_range
from guardtrace.dashboard.safe_render import alert, run_page
from guardtrace.dashboard.settings import explicit_settings
from guardtrace.schemas import environment_variables as env
from guardtrace.store.alert_events import AlertEvent
from guardtrace.store.alert_queries import alert_history, latest_alert_states

# The newest transitions shown as lines of text above the full table.
RECENT_LINES = 20


def _labels(labels: Any) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(dict(labels).items()))


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.4g}"


def _rules() -> RuleSet | None:
    """The rules file's rules, or None (the page says why)."""
    environ = {**os.environ, **explicit_settings(sys.argv[1:])}
    path = env.read_str(env.ALERT_RULES, None, environ)
    if not path:
        empty_state(f"No rules file is configured: start `guardtrace up --alert-rules FILE`, "
                    f"or set {env.ALERT_RULES.name} for this dashboard. Alerts recorded in "
                    "the store are shown below either way.")
        return None
    try:
        # The dashboard shows the rules; it needs none of the webhooks' secrets.
        return load_rules(path, environ, read_urls=False)
    except AlertRulesError as exc:
        alert("error", "The alert rules file does not validate; the evaluator keeps using "
              "the rules it loaded last.", str(exc))
        return None


def _module(rule: Any) -> str:
    return rule.module or ("each" if rule.per_module else "all")


def render() -> None:
    st.title("Alerts")
    data = store()
    auto_refresh()
    period = time_range()

    rules = _rules()
    latest = latest_alert_states(data.client, data.database)
    active = [event for event in latest if event.state in (FIRING, PENDING)]
    history = alert_history(data.client, data.database, period.start, period.end)

    cols = st.columns(4)
    cols[0].metric("Firing", sum(event.state == FIRING for event in active))
    cols[1].metric("Pending", sum(event.state == PENDING for event in active))
    cols[2].metric("Rules", "n/a" if rules is None else len(rules.rules))
    cols[3].metric("Transitions in range", len(history))

    st.subheader("Firing and pending")
    if not active:
        st.success("No alert is firing or pending.")
    for event in sorted(active, key=lambda e: (e.state != FIRING, e.rule)):
        # Stored text (rule names, labels, the message): shown as text, never Markdown.
        st.text(event.message or f"[{event.state.upper()}] {event.rule} {_labels(event.labels)}")

    if rules is not None:
        st.subheader("Rules")
        st.text(f"From {rules.source}")
        state_of: dict[str, list[str]] = {}
        for event in active:
            labels = _labels(event.labels)
            state_of.setdefault(event.rule, []).append(
                f"{event.state} {labels}".strip())
        st.dataframe(pd.DataFrame([{
            "rule": rule.name, "state": ", ".join(state_of.get(rule.name, [])) or "inactive",
            "metric": rule.metric, "module": _module(rule),
            "condition": rule.describe(), "for": format_duration(rule.for_s),
            "clear for": format_duration(rule.clear_for_s),
            "notify": ", ".join(hook.display for hook in rules.targets(rule)),
            "description": rule.description} for rule in rules.rules]),
            hide_index=True, key="alert_rules")

    st.subheader("History")
    if not history:
        empty_state(f"No alert transitions in the {period.label}.")
        return
    st.code("\n".join(_line(event) for event in history[:RECENT_LINES]), language=None)
    st.dataframe(pd.DataFrame([{
        "time": event.timestamp, "rule": event.rule, "labels": _labels(event.labels),
        "from": event.previous, "to": event.state, "value": event.value,
        "threshold": event.threshold, "volume": event.volume,
        "active since": event.active_since, "message": event.message} for event in history]),
        hide_index=True, key="alert_history")


def _line(event: AlertEvent) -> str:
    labels = _labels(event.labels)
    return (f"{event.timestamp:%Y-%m-%d %H:%M:%S}  {event.rule}{' ' + labels if labels else ''}"
            f"  {event.previous} -> {event.state}  value {_number(event.value) or 'n/a'}"
            f"  threshold {_number(event.threshold) or 'n/a'}")


run_page(render)
