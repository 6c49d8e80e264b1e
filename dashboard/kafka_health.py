"""The health page's consumer lag, cached for a few seconds between page runs.

The reading itself (and the Tansu workaround it needs) is
:func:`guardtrace.transport.lag.read_consumer_lag`; this module only caches it.
"""

from __future__ import annotations

import streamlit as st

from ..transport.lag import ConsumerLag, read_consumer_lag
from .settings import settings

__all__ = ["ConsumerLag", "consumer_lag"]


@st.cache_data(ttl=5, show_spinner=False)
def _cached(bootstrap: str, group: str, topics: tuple[str, ...]) -> ConsumerLag:
    return read_consumer_lag(bootstrap, group, topics)


def consumer_lag() -> ConsumerLag:
    """The configured consumer group's lag on the topics it reads (cached for a few seconds)."""
    current = settings()
    return _cached(current.bootstrap, current.group, current.topics.consumed)
