"""The dashboard's settings: its script arguments, then the environment, then defaults.

``guardtrace up`` runs the dashboard in its own process and hands it the pipeline it
runs (the embedded broker's address, the demo's label cap, ...) explicitly: as the
app's script arguments, ``GUARDTRACE_NAME=value`` each (Streamlit gives the script
``sys.argv``). ``guardtrace dashboard`` and ``streamlit run`` pass none, and the
environment decides. Nothing here writes the environment.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..schemas import environment_variables as env
from ..store.connection import StoreConfig, reader_url
from ..transport.topics import TopicSet

__all__ = ["DashboardSettings", "settings"]

_KNOWN = {var.name for var in env.ALL}
_PREFIX = "GUARDTRACE_"


@dataclass(frozen=True)
class DashboardSettings:
    store: StoreConfig  # the reader's URL: a read-only user on a server, if configured
    bootstrap: str
    group: str
    topics: TopicSet
    agent_label_cap: int
    top_agents: int

    @classmethod
    def resolve(cls, environ: Mapping[str, str]) -> DashboardSettings:
        """Resolve every setting from ``environ`` (then defaults).

        Raises:
            ConfigError: a setting has an unusable value (the message names it).
        """
        return cls(
            store=StoreConfig.resolve(url=reader_url(environ), environ=environ),
            bootstrap=env.read_str(env.KAFKA_BOOTSTRAP, None, environ),
            group=env.read_str(env.CONSUMER_GROUP, None, environ),
            topics=TopicSet.resolve(environ=environ),
            agent_label_cap=env.read_int(env.AGENT_LABEL_CAP, None, environ, minimum=1),
            top_agents=env.read_int(env.DASHBOARD_TOP_AGENTS, None, environ, minimum=1))


def explicit_settings(arguments: Sequence[str]) -> dict[str, str]:
    """The ``GUARDTRACE_NAME=value`` arguments among ``arguments`` (others are ignored:
    under a test runner the arguments are the runner's).

    Raises:
        ConfigError: a ``GUARDTRACE_`` argument names no guardtrace setting.
    """
    found = {}
    for argument in arguments:
        name, equals, value = argument.partition("=")
        if not equals or not name.startswith(_PREFIX):
            continue
        if name not in _KNOWN:
            raise env.ConfigError(f"the dashboard was given {name}, which is not a guardtrace "
                                  "setting (see the README's Configuration table)")
        found[name] = value
    return found


def settings() -> DashboardSettings:
    """This run's settings: explicit arguments over this process's environment."""
    return DashboardSettings.resolve({**os.environ, **explicit_settings(sys.argv[1:])})
