"""What every dashboard page shares: the store connection, the time range, formatting.

Pages call :func:`store` first; when ClickHouse cannot be opened or is not migrated, the
page says what to do and stops instead of showing a traceback. What a visitor sees is
short; what an operator needs (a settings error, which may quote a URL with its
password, or an unexpected failure's traceback) goes to the dashboard's log.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import pandas as pd
import streamlit as st

from ..schemas import environment_variables as env
from ..store.access import SchemaNotMigrated, open_migrated
from ..store.connection import StoreConfig, StoreError, open_client
from .safe_render import alert, logger
from .settings import settings

__all__ = ["Store", "TimeRange", "auto_refresh", "empty_state", "format_rate", "minute_frame",
           "rate_delta", "store", "time_range"]


@dataclass(frozen=True)
class Store:
    client: Any
    database: str
    url: str


@st.cache_resource(show_spinner=False)
def _open(url: str, database: str) -> Any:
    """One client per store for the server's lifetime (chDB allows one per process)."""
    return open_client(StoreConfig.resolve(url=url, database=database))


def store() -> Store:
    """The ClickHouse store, checked to be migrated, or a clear message and ``st.stop()``."""
    try:
        config = settings().store
    except env.ConfigError as exc:
        logger.error("the dashboard's settings are unusable: %s", exc)
        alert("error", "The dashboard's settings are unusable; the problem is named in its "
              "log.")
        st.stop()
    try:
        client = _open(config.url, config.database)
    except StoreError as exc:
        # guardtrace's own words: what to do, with the URL's password masked.
        alert("error", "Cannot open ClickHouse.", str(exc))
        st.stop()
    try:
        # The same check the CLI makes (it writes nothing: a read-only user may run this).
        open_migrated(config, client=client)
    except SchemaNotMigrated as exc:
        alert("warning", "The store is not migrated yet. Run `guardtrace migrate`, or start "
              "everything with `guardtrace up`.",
              f"database {exc.database}: missing {exc.missing}")
        st.stop()
    except Exception:  # noqa: BLE001 - any failure: logged with its traceback, told briefly
        logger.exception("cannot read ClickHouse at %s", config.display_url)
        alert("error", "Cannot read ClickHouse; the reason is in the dashboard's log.",
              f"ClickHouse at {config.display_url}")
        st.stop()
    return Store(client, config.database, config.display_url)


# -- time range ----------------------------------------------------------------------------
RANGES = {"Last 15 minutes": timedelta(minutes=15), "Last hour": timedelta(hours=1),
          "Last 24 hours": timedelta(hours=24)}
CUSTOM = "Custom"


@dataclass(frozen=True)
class TimeRange:
    start: datetime
    end: datetime
    label: str

    @property
    def length(self) -> timedelta:
        return self.end - self.start

    def previous(self) -> TimeRange:
        """The period of the same length just before this one (for deltas)."""
        label = (self.label.replace("last ", "previous ", 1) if self.label.startswith("last ")
                 else "previous period")
        return TimeRange(self.start - self.length, self.start, label)


def time_range(now: datetime | None = None) -> TimeRange:
    """The sidebar's time range picker (15 min, 1 h, 24 h or custom)."""
    now = now or datetime.now(UTC)
    choice = st.sidebar.selectbox("Time range", [*RANGES, CUSTOM], index=1, key="time_range")
    if choice != CUSTOM:
        return TimeRange(now - RANGES[choice], now, choice.lower())
    default_start = (now - timedelta(hours=1))
    start_day = st.sidebar.date_input("From (UTC)", value=default_start.date(), key="from_day")
    start_time = st.sidebar.time_input("From time", value=default_start.time().replace(
        second=0, microsecond=0), key="from_time")
    end_day = st.sidebar.date_input("To (UTC)", value=now.date(), key="to_day")
    end_time = st.sidebar.time_input("To time", value=now.time().replace(second=0,
                                     microsecond=0), key="to_time")
    start = _combine(start_day, start_time)
    end = _combine(end_day, end_time)
    if end <= start:
        st.sidebar.error("The end of the range must be after its start.")
        st.stop()
    return TimeRange(start, end, f"{start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC")


def _combine(day: date, at: time) -> datetime:
    return datetime.combine(day, at, tzinfo=UTC)


# -- presentation helpers ---------------------------------------------------------------
def format_rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def rate_delta(current: float | None, previous: float | None) -> str | None:
    """Change in percentage points against the previous period, for ``st.metric``."""
    if current is None or previous is None:
        return None
    return f"{(current - previous) * 100:+.1f} pp"


def minute_frame(rows: list[tuple[datetime, str, int]], start: datetime, end: datetime,
                 series: list[str]) -> pd.DataFrame:
    """Per-minute counts with every minute and series present (zeros where none)."""
    first = start.replace(second=0, microsecond=0)
    minutes = pd.date_range(first, end, freq="1min", tz="UTC", inclusive="left")
    frame = pd.DataFrame(rows, columns=["minute", "series", "count"])
    frame["minute"] = pd.to_datetime(frame["minute"], utc=True)
    full = pd.MultiIndex.from_product([minutes, series], names=["minute", "series"])
    return (frame.groupby(["minute", "series"])["count"].sum()
            .reindex(full, fill_value=0).reset_index())


def empty_state(message: str) -> None:
    st.info(message, icon=":material/info:")


AUTO_REFRESH_S = 10


def auto_refresh() -> None:
    """Rerun the page every few seconds while the sidebar toggle is on (live demo data).

    A fragment with ``run_every`` fires on a timer; the full-page run that draws it fires
    it too, right away, which is told apart by the time since the page last ran.
    """
    import time as clock

    if not st.sidebar.toggle(f"Auto-refresh ({AUTO_REFRESH_S} s)", value=True,
                             key="auto_refresh"):
        return
    st.session_state["_page_ran_at"] = clock.monotonic()

    @st.fragment(run_every=AUTO_REFRESH_S)
    def tick() -> None:
        if clock.monotonic() - st.session_state.get("_page_ran_at", 0) >= AUTO_REFRESH_S - 1:
            st.rerun()

    tick()
