"""The guardtrace dashboard (Streamlit): ``guardtrace up`` or ``guardtrace dashboard``.

Run it through the CLI, which sets up the store and the port; ``streamlit run`` on this
file also works when the ``GUARDTRACE_*`` variables point at a migrated ClickHouse.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

PAGES = Path(__file__).parent / "pages"

st.set_page_config(page_title="guardtrace", page_icon="🛡️", layout="wide")
navigation = st.navigation([
    st.Page(PAGES / "overview.py", title="Overview", icon="📈", default=True),
    st.Page(PAGES / "requests.py", title="Requests", icon="🔎", url_path="requests"),
    st.Page(PAGES / "labels.py", title="Labels", icon="🏷️", url_path="labels"),
    st.Page(PAGES / "health.py", title="Pipeline health", icon="🩺", url_path="health"),
])
st.sidebar.caption("guardtrace: hallucinations detected, recovered and verified, "
                   "by request.")
navigation.run()
