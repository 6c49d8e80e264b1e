"""Showing stored and requested text without rendering it, and pages that fail quietly.

What a page shows from the store or the URL (request ids, agent, module and event names,
payload kinds, error messages that quote them) was written by agents, models or
visitors. Streamlit renders Markdown in alerts, captions, headers and labels, so a
crafted value there becomes a link, an image fetched from anywhere, or words the page
never said. Hence:

* a value goes in an element that renders no Markdown: ``st.text``, ``st.code``,
  ``st.json`` or a dataframe. An alert's words are the page's own; the value it is about
  follows as plain text (:func:`alert`);
* where Streamlit takes only Markdown (an expander's label), a value goes through
  :func:`literal`, the one escape: a code span, inside which Markdown is not parsed.

A page's body runs in :func:`run_page`: an exception is logged on the server with its
traceback, and the visitor sees a short message with an incident id to quote.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable
from typing import Literal

import streamlit as st

__all__ = ["ERROR_DETAILS", "alert", "literal", "run_page"]

logger = logging.getLogger("guardtrace.dashboard")

# Streamlit's own handling of an uncaught exception (one raised outside run_page, e.g.
# in a widget callback): "none" shows a generic message. The default, "full", sends the
# traceback to the browser; the legacy False still sends it ("stacktrace").
ERROR_DETAILS = "none"

AlertKind = Literal["error", "warning", "info"]
_ALERTS: dict[AlertKind, Callable[..., object]] = {
    "error": st.error, "warning": st.warning, "info": st.info}
_BACKTICKS = re.compile("`+")
# CommonMark ends a line at \n or \r; a line break inside a code span would let the next
# line start a block (a heading, a list) and end the span.
_LINE_BREAK = re.compile("\r\n|\r|\n")


def alert(kind: AlertKind, headline: str, detail: str | None = None) -> None:
    """An alert box with the page's own ``headline`` (Markdown), then ``detail`` as text.

    Args:
        headline: Written by the page, never holding a value from the store or the URL.
        detail: Any text (a message quoting a request id, a store's error): shown as is.
    """
    _ALERTS[kind](headline)
    if detail:
        st.text(detail)


def literal(text: str) -> str:
    """Markdown that shows ``text`` exactly, for a label that only takes Markdown.

    A code span whose backtick fence is longer than any run of backticks in the text, so
    nothing inside can close it, with a space on each side (CommonMark strips one each
    side, so text starting or ending with a backtick is kept). Line breaks become spaces,
    as a code span would show them.
    """
    if not text:
        return ""
    one_line = _LINE_BREAK.sub(" ", text)
    longest = max((len(run) for run in _BACKTICKS.findall(one_line)), default=0)
    fence = "`" * (longest + 1)
    return f"{fence} {one_line} {fence}"


def run_page(render: Callable[[], None]) -> None:
    """Run a page's body; on an exception, log it and show the visitor a short message.

    Streamlit's stop and rerun signals are not exceptions (BaseException) and pass.
    """
    st.set_option("client.showErrorDetails", ERROR_DETAILS)
    try:
        render()
    except Exception:  # any failure: the visitor gets a message, the log the details
        incident = uuid.uuid4().hex[:8]
        logger.exception("dashboard page failed (incident %s)", incident)
        st.error(f"This page could not be shown (incident {incident}). The details are in "
                 "the dashboard's log.", icon=":material/error:")
