"""The guardtrace dashboard (Streamlit): ``guardtrace up`` or ``guardtrace dashboard``.

Run it through the CLI, which sets up the store and the port and refuses to serve beyond
loopback without sign-in; ``streamlit run`` on this file also works when the
``GUARDTRACE_*`` variables point at a migrated ClickHouse.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

# Absolute: Streamlit runs this file as a script, not as a module of the package.
from guardtrace.dashboard.auth import admit

# Not named pages/: Streamlit would also serve a pages/ folder on its own, bypassing
# this navigation (and its page config, and the sign-in below).
VIEWS = Path(__file__).parent / "views"

st.set_page_config(page_title="guardtrace", page_icon=":material/shield:", layout="wide")
# Before any page runs: a visitor who is not let in gets the sign-in, and no page reads
# the store for them.
admitted = admit()
# Declared either way, so a link to a page (/requests?request_id=...) still leads there
# once signed in; hidden until then.
navigation = st.navigation([
    st.Page(VIEWS / "overview.py", title="Overview", icon=":material/monitoring:", default=True),
    st.Page(VIEWS / "requests.py", title="Requests", icon=":material/search:", url_path="requests"),
    st.Page(VIEWS / "labels.py", title="Labels", icon=":material/label:", url_path="labels"),
    st.Page(VIEWS / "health.py", title="Pipeline health", icon=":material/health_and_safety:", url_path="health"),
    st.Page(VIEWS / "alerts.py", title="Alerts", icon=":material/notifications:", url_path="alerts"),
], position="sidebar" if admitted else "hidden")
if not admitted:
    st.stop()
st.sidebar.caption("guardtrace: hallucinations detected, recovered and verified, "
                   "by request.")
navigation.run()
