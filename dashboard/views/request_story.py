"""Drawing a request's story (:class:`~guardtrace.dashboard.views.story.RequestStory`) on
the request page: each plan loop with the invented tools against the list the model was
shown, the guard's feedback and the rejected and recovered plans side by side; each
flagged reply with its sentences marked; forced verifications; every verdict; and the
LLM calls as conversations.

Everything drawn from the store is hostile text (:mod:`guardtrace.dashboard.safe_render`):
it goes in ``st.text``, ``st.code`` or a dataframe, or through ``literal`` where Streamlit
takes only Markdown (captions, alert bodies), never inside a Markdown directive or link,
and never as HTML. Chat avatars and names are the page's own constants.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd
import streamlit as st

from guardtrace.dashboard.safe_render import literal
from guardtrace.dashboard.views.exchange import (
    ROLE_ASSISTANT,
    ROLE_PROMPT,
    ROLE_SYSTEM,
    ROLE_TOOL,
    ROLE_USER,
    Conversation,
    Message,
    Unreadable,
)
from guardtrace.dashboard.views.plan_story import (
    OUTCOME_DETECTED,
    PlanStep,
    PlanStory,
    RejectedPlan,
)
from guardtrace.dashboard.views.reply_marks import FabricationStory, Mark
from guardtrace.dashboard.views.story import (
    Evaluation,
    ExchangeView,
    RequestStory,
    VerificationStory,
)
from guardtrace.schemas import names

__all__ = ["SHOWN_MESSAGE_CHARS", "TIER_MEANINGS", "draw_story"]

# A message longer than this is shown cut; the raw payload (a tab away) has all of it.
SHOWN_MESSAGE_CHARS = 2_000
# Tools shown to the model, listed beside a plan; a longer list is cut here.
SHOWN_TOOLS = 60

# What each fabrication tier means, in the page's words.
TIER_MEANINGS = {
    names.TIER_ACTION: "claims an action no tool call performed",
    names.TIER_READ: "claims to have read or looked something up, and no tool fetched it",
    names.TIER_REPETITION: "repeats an earlier reply of the same conversation",
    names.TIER_TEXT_TOOL_CALL: "writes a tool call out as text instead of making it",
    names.TIER_UNGROUNDED_RESULT: "states values no tool result, user or system prompt gave",
}
_ROLE_AVATARS = {ROLE_SYSTEM: ":material/settings:", ROLE_USER: "user",
                 ROLE_ASSISTANT: "assistant", ROLE_TOOL: ":material/build:",
                 ROLE_PROMPT: ":material/description:"}
_FOUND_IN = {names.FOUND_IN_AGENT: "Found by a guard hook in the agent's process.",
             names.FOUND_IN_PIPELINE: "Found by the pipeline, in the telemetry the agent's "
                                      "LLM instrumentation already emits (no hook in the agent)."}
_INVENTED_ROW = "background-color: #fde2e1"
_SUGGESTED_ROW = "background-color: #fff4d6"
_ACCEPTED_ROW = "background-color: #e3f4e6"


def draw_story(story: RequestStory) -> None:
    """Draw every part of ``story`` that has something to show, in reading order."""
    if story.pipeline_findings:
        found = sum(e.name in names.GUARD_EVENTS for e in story.pipeline_findings)
        verdicts = len(story.pipeline_findings) - found
        st.info(f":material/travel_explore: {found} finding(s) and {verdicts} verdict(s) of "
                "this request were made by the pipeline, in the telemetry of its LLM spans "
                "(`found_in` = `pipeline`).")
    for plan in story.plans:
        _draw_plan(plan)
    for reply in story.fabrications:
        _draw_fabrication(reply)
    for verification in story.verifications:
        _draw_verification(verification)
    if story.evaluations:
        _draw_evaluations(story.evaluations)
    # The calls open by themselves only when no finding above tells their story.
    found = bool(story.plans or story.fabrications or story.verifications)
    for index, exchange in enumerate(story.exchanges):
        _draw_exchange(exchange, expanded=index == 0 and not found)
    for payload, why in story.unreadable:
        st.warning(f"A {literal(payload.kind)} payload of {payload.timestamp:%H:%M:%S} could "
                   "not be read; it is shown raw in the payloads tab.")
        st.text(why)
    if not (story.plans or story.fabrications or story.verifications or story.evaluations
            or story.exchanges or story.unreadable):
        st.info("No guard finding, verdict or recorded LLM call in this request's telemetry; "
                "its spans and events are in the Trace tab.")


# -- plans ---------------------------------------------------------------------------------

def _draw_plan(plan: PlanStory) -> None:
    st.subheader(f":material/build: Invented tools · {_outcome_words(plan)}")
    if plan.rejected:
        st.caption(_FOUND_IN.get(plan.rejected[0].found_in, _FOUND_IN[names.FOUND_IN_AGENT]))
    for index, rejected in enumerate(plan.rejected):
        _draw_rejected(rejected, is_last=index == len(plan.rejected) - 1, plan=plan)
    if plan.rejected and plan.outcome != OUTCOME_DETECTED:
        _draw_side_by_side(plan)


def _outcome_words(plan: PlanStory) -> str:
    detail = plan.outcome_detail
    if plan.outcome == names.EVENT_HALLUCINATION_RECOVERED:
        return f"recovered after {_retries(detail.get(names.ATTR_RETRIES_USED, ''))}"
    if plan.outcome == names.EVENT_HALLUCINATION_UNRECOVERABLE:
        return f"unrecoverable after {_retries(detail.get(names.ATTR_RETRIES_EXHAUSTED, ''))}"
    if plan.outcome == names.EVENT_HALLUCINATION_REGENERATION_FAILED:
        return "the retry's model call failed"
    return "detected"


def _retries(count: str) -> str:
    # A count is stored text: only digits are the page's to write.
    if not (count.isascii() and count.isdigit()):
        return "its retries"
    return f"{int(count)} {'retry' if int(count) == 1 else 'retries'}"


def _draw_rejected(rejected: RejectedPlan, *, is_last: bool, plan: PlanStory) -> None:
    if plan.outcome == OUTCOME_DETECTED:  # no retry loop: a detection, not a rejection
        st.markdown(f"**The model's plan** calls {len(rejected.invented)} tool(s) it was "
                    "not shown")
    else:
        st.markdown(f"**Attempt {rejected.retry + 1}** (retry {rejected.retry}): rejected, "
                    f"it calls {len(rejected.invented)} tool(s) the model was not shown")
    if rejected.feedback:
        st.caption(f"What the guard told the model before retry {rejected.retry} (the "
                   "start of its prompt):")
        st.code(_cut(rejected.feedback), language=None, wrap_lines=True)
    left, right = st.columns([5, 4])
    with left:
        st.caption("The plan the model returned")
        if rejected.steps is None:
            st.text("The plan is not stored in a form this page reads; see the payloads tab.")
        else:
            _plan_table(rejected.steps, rejected)
    with right:
        _tools_table(rejected)
    for note in rejected.notes:
        st.caption(note)
    if is_last and plan.recovered and rejected.problems:
        st.caption("What the guard told the model before the accepted retry is not stored "
                   "(an accepted plan records no payload). It named these problems, with "
                   "the closest listed tools, then listed the tools again:")
        st.code("\n".join(rejected.problems), language=None, wrap_lines=True)


def _plan_table(steps: Sequence[PlanStep], rejected: RejectedPlan | None) -> None:
    invented = set(rejected.invented) if rejected is not None else set()
    rows = []
    for step in steps:
        verdict = ""
        if step.tool in invented:
            closest = rejected.suggestions.get(step.tool, ()) if rejected is not None else ()
            verdict = "not in the list" + (f"; closest: {', '.join(closest)}" if closest else "")
        elif rejected is None:
            verdict = "listed"
        after = f" (after {', '.join(step.after)})" if step.after else ""
        rows.append({"step": step.step_id, "tool": step.tool, "verdict": verdict,
                     "what for": step.detail + after})
    frame = pd.DataFrame(rows, columns=["step", "tool", "verdict", "what for"])
    style = _INVENTED_ROW if rejected is not None else _ACCEPTED_ROW
    st.dataframe(_styled(frame, lambda row: style if row["verdict"] else ""),
                 hide_index=True, width="stretch",
                 column_config={"step": st.column_config.TextColumn(width="small")})


def _tools_table(rejected: RejectedPlan) -> None:
    if rejected.shown is None:
        st.caption("The tools the model was shown")
        st.text("Not stored for this attempt.")
        return
    st.caption(f"The {len(rejected.shown)} tool(s) the model was shown, against what it called")
    suggested = {name: invented for invented, names_ in rejected.suggestions.items()
                 for name in names_}
    rows = [{"tool": name, "shown": "no: invented"}
            for name in rejected.invented if name not in rejected.shown]
    rows += [{"tool": name, "shown": f"yes, closest to {suggested[name]}"
              if name in suggested else "yes"} for name in rejected.shown[:SHOWN_TOOLS]]
    frame = pd.DataFrame(rows, columns=["tool", "shown"])

    def style(row: pd.Series) -> str:
        if row["shown"].startswith("no"):
            return _INVENTED_ROW
        return _SUGGESTED_ROW if row["tool"] in suggested else ""

    st.dataframe(_styled(frame, style), hide_index=True, width="stretch")
    if len(rejected.shown) > SHOWN_TOOLS:
        st.caption(f"… and {len(rejected.shown) - SHOWN_TOOLS} more (all in the payload).")


def _draw_side_by_side(plan: PlanStory) -> None:
    last = plan.rejected[-1]
    st.markdown("**The rejected plan and the plan given back, side by side**")
    left, right = st.columns(2)
    with left:
        st.caption(f"Rejected: attempt {last.retry + 1}")
        if last.steps is None:
            st.text("Not stored in a form this page reads.")
        else:
            _plan_table(last.steps, last)
    with right:
        if plan.recovered:
            st.caption(f"Recovered: retry {last.retry + 1}, every tool in the list")
            if plan.final is None:
                st.text("The accepted plan is not stored: the agent recorded no llm_exchange "
                        "payload after it.")
            elif not plan.final:
                st.text("No tool call: the model answered without one (a valid plan).")
            else:
                _plan_table(plan.final, None)
        else:
            st.caption("Given back")
            st.text(f"No valid plan: {_outcome_words(plan)}.")


# -- replies -------------------------------------------------------------------------------

def _draw_fabrication(story: FabricationStory) -> None:
    tiers = list(dict.fromkeys(m.tier for m in story.marks))
    known = [t for t in tiers if t in TIER_MEANINGS]
    st.subheader(":material/flag: Fabricated claim" + (f" · {', '.join(known)}" if known else ""))
    st.caption(_FOUND_IN.get(story.found_in, _FOUND_IN[names.FOUND_IN_AGENT]))
    with st.chat_message("assistant"):
        if story.reply is None:
            st.text("The reply is not stored (no payload, and no LLM span with its text).")
        for segment in story.segments():
            if not segment.marks:
                if segment.text.strip():
                    st.text(segment.text.strip())
                continue
            st.error(literal(_cut(segment.text)), icon=":material/flag:")
            for mark in segment.marks:
                st.caption(_mark_words(mark, story))
    unplaced = [m for m in story.marks if not m.placed]
    for mark in unplaced:
        st.caption("Not found in the reply as stored: " + _mark_words(mark, story))
    fired = "not recorded" if story.tools_fired is None else \
        ", ".join(story.tools_fired) or "none"
    st.text(f"Tools that ran for this reply: {fired}")


def _mark_words(mark: Mark, story: FabricationStory) -> str:
    tier = f"**{mark.tier}**" if mark.tier in TIER_MEANINGS else literal(mark.tier)
    meaning = TIER_MEANINGS.get(mark.tier, "a tier this page does not know")
    if mark.tier == names.TIER_REPETITION:
        similar = f" (similarity {literal(story.similarity)})" if story.similarity else ""
        return f"{tier}: {meaning}{similar}; the earlier reply began {literal(mark.evidence)}"
    return f"{tier}: {meaning}; matched {literal(mark.evidence)}"


# -- verification and verdicts -------------------------------------------------------------

def _draw_verification(story: VerificationStory) -> None:
    st.subheader(":material/fact_check: Forced verification · " + literal(story.outcome))
    with st.chat_message("user"):
        st.text(_cut(story.question))
    if story.reason:
        st.text(f"Ended so because: {story.reason}")
    if story.facts:
        st.dataframe(pd.DataFrame(story.facts, columns=["what", "value"]), hide_index=True)


def _draw_evaluations(evaluations: Sequence[Evaluation]) -> None:
    st.subheader(":material/rule: Verdicts")
    st.caption("Every guard verdict, pass or fail, as an OpenTelemetry GenAI evaluation "
               "result (`gen_ai.evaluation.result`).")
    frame = pd.DataFrame([{
        "time": f"{e.at:%H:%M:%S.%f}"[:-3], "evaluation": e.name, "label": e.label,
        "score": e.score, "explanation": e.explanation, "response id": e.response_id,
        "found in": e.found_in, "error type": e.error_type} for e in evaluations])
    frame = _without_empty(frame, "response id", "error type")

    def style(row: pd.Series) -> str:
        if row["label"] == names.EVALUATION_FAIL:
            return _INVENTED_ROW
        return _ACCEPTED_ROW if row["label"] == names.EVALUATION_PASS else ""

    st.dataframe(_styled(frame, style), hide_index=True, width="stretch")


# -- conversations -------------------------------------------------------------------------

def _draw_exchange(exchange: ExchangeView, *, expanded: bool) -> None:
    if exchange.payload is not None:
        origin = "recorded by the agent"
        if exchange.payload.attributes.get("api"):
            origin += " · " + literal(exchange.payload.attributes["api"])
    else:
        origin = "read from the LLM span " + literal(exchange.span.name if exchange.span
                                                     else "")
    conversation = exchange.conversation
    with st.expander(f":material/forum: LLM call · {exchange.at:%H:%M:%S} · {origin}",
                     expanded=expanded):
        if isinstance(conversation, Unreadable):
            st.warning("This record is not a conversation this page can read; it is shown "
                       "raw in the payloads tab.")
            st.text(conversation.note)
            return
        _draw_conversation(conversation)


def _draw_conversation(conversation: Conversation) -> None:
    if conversation.model:
        st.caption("model " + literal(conversation.model))
    if conversation.tools is not None:
        st.caption(f"{len(conversation.tools)} tool(s) shown to the model: "
                   + literal(", ".join(conversation.tools[:SHOWN_TOOLS])))
    for message in conversation.sent:
        _draw_message(message, conversation.tools)
    if conversation.reply:
        st.caption("The reply")
    for message in conversation.reply:
        _draw_message(message, conversation.tools)
    for note in conversation.notes:
        st.caption(literal(note))


def _draw_message(message: Message, tools: tuple[str, ...] | None) -> None:
    known = message.role in _ROLE_AVATARS
    with st.chat_message(message.role if known else "other",
                         avatar=_ROLE_AVATARS.get(message.role, ":material/help:")):
        if message.role == ROLE_TOOL:
            who = literal(message.tool) if message.tool else "a tool"
            answers = f" (call {literal(message.answers)})" if message.answers else ""
            st.caption(f"Result of {who}{answers}")
        elif not known:
            st.caption("role " + literal(message.role))
        elif message.role == ROLE_PROMPT:
            st.caption("The prompt, as one text")
        if message.text:
            st.text(_cut(message.text))
        for call in message.tool_calls:
            ident = f" (call {literal(call.call_id)})" if call.call_id else ""
            st.caption(f":material/call_made: Calls {literal(call.name)}{ident}")
            if tools is not None and call.name not in tools:
                st.error(f"{literal(call.name)} is not one of the {len(tools)} tool(s) the "
                         "model was shown.", icon=":material/block:")
            if call.arguments:
                st.code(_cut(call.arguments), language="json"
                        if call.arguments[:1] in ("{", "[") else None, wrap_lines=True)


# -- helpers -------------------------------------------------------------------------------

def _styled(frame: pd.DataFrame, row_style: Callable[[pd.Series], str]) -> object:
    """``frame`` with each row's cells in the colour ``row_style`` gives the row."""
    if frame.empty:
        return frame
    return frame.style.apply(lambda row: [row_style(row)] * len(row), axis=1)


def _without_empty(frame: pd.DataFrame, *columns: str) -> pd.DataFrame:
    """``frame`` without those of ``columns`` that hold nothing in any row."""
    return frame.drop(columns=[c for c in columns if not frame[c].astype(bool).any()])


def _cut(text: str) -> str:
    if len(text) <= SHOWN_MESSAGE_CHARS:
        return text
    return (f"{text[:SHOWN_MESSAGE_CHARS]}\n… ({len(text) - SHOWN_MESSAGE_CHARS:,} more "
            "characters in the raw payload)")
