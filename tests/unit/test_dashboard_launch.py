"""How the CLI launches the dashboard: loopback unless told otherwise, and no traceback
ever sent to a visitor's browser."""

from __future__ import annotations

import pytest

from guardtrace.cli.main import build_parser
from guardtrace.cli.up import streamlit_flags


@pytest.mark.parametrize("command", ["up", "dashboard"])
def test_the_dashboard_listens_on_loopback_by_default(command: str) -> None:
    assert build_parser().parse_args([command]).address == "127.0.0.1"


def test_uncaught_errors_show_visitors_no_details() -> None:
    flags = streamlit_flags(8501, "127.0.0.1")
    # "none": a generic message. Streamlit's legacy `false` means "stacktrace", which
    # still sends the traceback.
    assert flags["client_showErrorDetails"] == "none"
    assert (flags["server_port"], flags["server_address"]) == (8501, "127.0.0.1")
