"""The health page's consumer lag, cached for a few seconds between page runs.

The reading itself (and the Tansu workaround it needs) is
:func:`guardtrace.transport.lag.read_consumer_lag`; this module only caches it, and
gives it the transport security (TLS, SASL) of the dashboard's environment.
"""

from __future__ import annotations

import os
import sys

import streamlit as st

from ..schemas.environment_variables import ConfigError
from ..schemas.transport_security import KafkaSecurity
from ..transport.lag import ConsumerLag, read_consumer_lag
from .settings import explicit_settings, settings

__all__ = ["ConsumerLag", "consumer_lag"]


# ``_security`` is left out of the cache key (Streamlit skips arguments named with a
# leading underscore): it is fixed for the process, and holds a password.
@st.cache_data(ttl=5, show_spinner=False)
def _cached(bootstrap: str, group: str, topics: tuple[str, ...],
            _security: KafkaSecurity) -> ConsumerLag:
    return read_consumer_lag(bootstrap, group, topics, _security)


def consumer_lag() -> ConsumerLag:
    """The configured consumer group's lag on the topics it reads (cached for a few seconds).

    An unusable security setting is the result's ``error`` (naming the variable), shown
    on the page like a broker that cannot be reached.
    """
    current = settings()
    try:
        # The same sources as settings(): script arguments over the environment.
        security = KafkaSecurity.resolve({**os.environ, **explicit_settings(sys.argv[1:])})
    except ConfigError as exc:
        return ConsumerLag(current.bootstrap, current.group, error=str(exc))
    return _cached(current.bootstrap, current.group, current.topics.consumed, security)
