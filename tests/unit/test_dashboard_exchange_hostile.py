"""The request page's story draws stored text as text: a crafted tool name, role, reply,
phrase, tier, API or model name never becomes a link, an image or words the page never
said (the rules of tests/integration/test_dashboard_hostile_text.py, for the story).

The story is read from crafted payloads, events and an LLM span by the page's own reader,
and drawn by the page's own code in Streamlit's AppTest.
"""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

LINK = "[Sign in](https://evil.example/x)"
IMAGE = "![pixel](https://evil.example/p.png)"


def draw_crafted_story() -> None:
    import json
    from datetime import UTC, datetime

    from guardtrace.dashboard.views.request_story import draw_story
    from guardtrace.dashboard.views.story import read_story
    from guardtrace.schemas import names
    from guardtrace.store.queries import (
        Payload,
        PayloadIntegrity,
        RequestSummary,
        Trace,
        TraceEvent,
        TraceSpan,
    )

    link = "[Sign in](https://evil.example/x)"
    image = "![pixel](https://evil.example/p.png)"
    at = datetime(2026, 5, 1, tzinfo=UTC)

    def payload(kind: str, body: object, **attributes: str) -> Payload:
        text = json.dumps(body)
        return Payload(kind, "r", kind, at, "t", "s", text, len(text), "", False, 0,
                       attributes, 1, 1, PayloadIntegrity.VERIFIED)

    def event(name: str, **attributes: str) -> TraceEvent:
        return TraceEvent(name, at, name, "t", "llm", "", link, attributes.get("tier", ""),
                          "svc", attributes)

    span = TraceSpan("t", "llm", "", image, "svc", at, at, 1.0, "unset", "", {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": json.dumps([{"role": link, "parts": [
            {"type": "text", "content": image}]}]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
            {"type": "text", "content": f"I have sent {link}."},
            {"type": "tool_call", "id": image, "name": link, "arguments": {link: image}}]}]),
        "gen_ai.tool.definitions": json.dumps([{"name": image}]),
        "gen_ai.response.model": link})
    payloads = [
        payload(names.PAYLOAD_KIND_HALLUCINATION, {
            "prompt": image, "response": [{"id": link, "tool": link, "instruction": image}],
            "allowed": [image, link + "x"], "hallucinated_agents": [link], "retry": 0,
            "errors": [{"error_type": "hallucinated_tool", "tool": link, "message": image,
                        "suggested_tools": [link + "x"]}]}),
        payload(names.PAYLOAD_KIND_FABRICATION, {
            "reply": f"{image} I've booked {link}. {link}", "tools_fired": [link],
            "matches": [{"tier": link, "phrase": f"I've booked {link}"},
                        {"tier": "repetition", "phrase": image}], "similarity": link}),
        payload(names.PAYLOAD_KIND_VERIFICATION, {"question": link, "outcome": image,
                                                  "reason": link, "decision": {"depth": image}}),
        payload(names.PAYLOAD_KIND_LLM_EXCHANGE, {
            "model": link, "messages": [{"role": "tool", "tool_call_id": image, "name": link,
                                         "content": image}],
            "tools": [{"name": image}], "response": {"choices": [{"message": {
                "role": "assistant", "tool_calls": [{"id": link, "function": {
                    "name": image, "arguments": link}}]}}]}}, api=link),
        payload(names.PAYLOAD_KIND_LLM_EXCHANGE, link, api=image),
        payload(names.PAYLOAD_KIND_FABRICATION, [link]),
    ]
    events = [
        event(names.EVENT_HALLUCINATION_RECOVERED, retries_used=link),
        event(names.EVENT_FABRICATION_DETECTED, tier=image, matched_phrase=link,
              found_in="pipeline"),
        event(names.EVENT_EVALUATION_RESULT, **{
            names.ATTR_EVALUATION_NAME: link, names.ATTR_EVALUATION_SCORE_LABEL: image,
            names.ATTR_EVALUATION_EXPLANATION: link, names.ATTR_FOUND_IN: image}),
    ]
    summary = RequestSummary("r", at, at, ("t",), (), (), (), ())
    draw_story(read_story(Trace(summary, (span,), tuple(events)), payloads))


def without_code_spans(source: str) -> str:
    """``source`` with its code spans taken out, as CommonMark finds them: a run of
    backticks opens one, the next run of the same length closes it."""
    out: list[str] = []
    index, size = 0, len(source)
    while index < size:
        if source[index] != "`":
            out.append(source[index])
            index += 1
            continue
        end = index
        while end < size and source[end] == "`":
            end += 1
        fence, scan, close = end - index, end, -1
        while scan < size:
            if source[scan] != "`":
                scan += 1
                continue
            run = scan
            while run < size and source[run] == "`":
                run += 1
            if run - scan == fence:
                close = scan
                break
            scan = run
        if close < 0:  # never closed: the backticks are text
            out.append(source[index:end])
            index = end
        else:
            index = close + fence
    return "".join(out)


def markdown_sources(at: AppTest) -> list[str]:
    bodies = [e.value for kind in (at.markdown, at.caption, at.error, at.warning, at.info,
                                   at.success, at.title, at.header, at.subheader)
              for e in kind]
    labels = [e.label for kind in (at.expander, at.tabs) for e in kind]
    return bodies + labels + [m.name for m in at.chat_message]


def test_crafted_stored_text_in_a_story_is_shown_never_rendered() -> None:
    at = AppTest.from_function(draw_crafted_story, default_timeout=30).run()
    assert not at.exception, [e.value for e in at.exception]
    sources = markdown_sources(at)
    # Everything was drawn: the plan, the reply, the verification, the calls, the verdicts.
    assert any("Invented tools" in s for s in sources)
    assert any("Fabricated claim" in s for s in sources)
    assert any("Forced verification" in s for s in sources)
    assert sum("LLM call" in s for s in sources) == 3
    assert any("could not be read" in s for s in sources)
    assert {m.name for m in at.chat_message} <= {"system", "user", "assistant", "tool",
                                                 "prompt", "other"}
    for source in sources:
        # The one escape allowed: a code span, in which Markdown is not parsed, standing
        # alone: never inside a directive's or a link's brackets.
        outside = without_code_spans(source)
        assert "evil.example" not in outside, source
        # The page's own words hold no brackets: one outside a code span would be a
        # directive's or a link's around stored text.
        assert "[" not in outside and "]" not in outside, source
    # The crafted values are on the page, as text.
    shown = "\n".join([t.value for t in at.text] + [c.value for c in at.code]
                      + [str(df.value.to_dict()) for df in at.dataframe])
    assert LINK in shown and IMAGE in shown
