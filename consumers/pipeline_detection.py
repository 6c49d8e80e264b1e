"""Zero-code detection: the guards' detectors run on the GenAI telemetry agents already emit.

An agent instrumented with OpenInference or the OpenTelemetry GenAI instrumentations
records each LLM call as a span holding the conversation sent, the reply and the tools
shown (read by :mod:`.genai_exchange`). The consumers run the same pure detectors the
hooks run on it, and write what they find as the hooks' own events, on the LLM span:

* hallucinated tools: the reply's tool calls against the tools the request showed
  (:func:`~guardtrace.collectors.plans.validation.validate_plan` with ``emit=False``,
  suggestions included) -> ``llm.hallucination_detected``, one per invented name;
* fabrication: the reply judged within its conversation by the hooks' conversation
  engine with its default settings (what
  :meth:`~guardtrace.collectors.replies.fabrication_detector.FabricationDetector.detect_last`
  runs: ``action``, ``read``, ``text_tool_call``, ``ungrounded_result``, ``repetition``;
  the tiers that cannot fire on a reply are left out, see :func:`judge_reply`)
  -> ``llm.fabrication_detected``, one per tier;
* each verdict, pass or fail, also as a ``gen_ai.evaluation.result`` event
  (``guardtrace.plan_tools`` / ``guardtrace.fabrication``, label ``pass`` or ``fail``,
  the evidence as the explanation), so a backend that shows evaluations shows these.

The rows carry the attributes the hooks put on their events (``request_id`` first,
``module``, ``agent``, ``tier`` ...) plus ``found_in`` = ``pipeline``.

Detection is a pure function of one record: a loop needs the earlier replies of the
conversation, and every LLM call carries the conversation so far in its input messages,
so the reply is judged against those and no state is kept across records. A replayed
record therefore yields the same rows: event ids are derived from the trace id, span
id, event name and finding (in a namespace of their own, ``pipeline-...``, apart from
the index-based ids of the span's own events), the timestamp is the span's end.

What a call's own span does not record is taken from the same export request, never
from state: the request id (see :func:`detect_in_spans`), and the tools offered and the
agent's name, from the nearest ancestor that declares them (an agent's ``invoke_agent``
span, :func:`~.genai_exchange.read_enclosing_agent`). With no tools recorded anywhere in
the request, tool calls are not checked (``tools_not_captured``): not guessed.

What is not judged, and why:

* spans of guardtrace's own scope, and spans that carry a guard or evaluation event
  already: a hook or adapter in the agent judged that call and reported it;
* spans whose content was not captured, or cannot be read (bad JSON, missing message
  indexes): the span is stored as it came and the reason counted per kind
  (:class:`DetectionCounts`, logged the first time each kind is seen);
* a detector that fails on a span: counted and logged the same way; the span's rows,
  and the rest of the record, are kept.

:func:`detection_rows` is the entry for one attribute mapping (a span's, or a GenAI log
record's, which carries the same ``gen_ai.*`` keys); :class:`PipelineDetection` decodes
an OTLP trace request and adds the rows of its LLM spans, and is what the consumer's
decoder map holds for the spans topic.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from ..collectors.errors import GuardInputError
from ..collectors.plans.allowed_tools import AllowedTools
from ..collectors.plans.findings import PlanErrorType, PlanIssue, PlanValidationResult, shown_name
from ..collectors.plans.validation import validate_plan
from ..collectors.replies.conversation_guard import ReplyVerdict
from ..collectors.replies.fabrication_detector import default_detector
from ..collectors.replies.run_outcomes import may_report_run_outcome
from ..collectors.replies.write_outcomes import may_report_outcome
from ..schemas import names
from ..schemas.request_ids import storable_request_id
from ..store.rows import DecodedRows
from ..store.tables import Columns
from .genai_exchange import (
    GENAI_RESPONSE_ID,
    PROBLEM_UNEXPECTED_SHAPE,
    EnclosingAgent,
    GenAIExchange,
    read_enclosing_agent,
    read_exchange,
)

__all__ = [
    "COUNT_FINDINGS",
    "COUNT_LLM_SPANS",
    "COUNT_REPORTED_IN_AGENT",
    "PROBLEM_DETECTOR_ERROR",
    "PROBLEM_TOOLS_NOT_CAPTURED",
    "DetectionCounts",
    "PipelineDetection",
    "detect_in_spans",
    "detection_rows",
    "judge_reply",
    "pipeline_event_id",
]

logger = logging.getLogger("guardtrace.consumers.pipeline_detection")

# What DetectionCounts counts, besides the reader's PROBLEM_* kinds.
COUNT_LLM_SPANS: Final = "llm_spans"  # LLM calls read (spans or log records)
COUNT_FINDINGS: Final = "findings"  # detection events written
COUNT_REPORTED_IN_AGENT: Final = "reported_in_agent"  # skipped: a hook already reported
PROBLEM_TOOLS_NOT_CAPTURED: Final = "tools_not_captured"  # calls made, no tools recorded
PROBLEM_DETECTOR_ERROR: Final = "detector_error"

# Events that say guardtrace already judged the call in the agent's process.
_REPORTED: Final = frozenset((*names.GUARD_EVENTS, names.EVENT_EVALUATION_RESULT))
# An evaluation's explanation is the evidence, cut here, marker included, as the hooks cut
# theirs: readable, and bounded whatever a model wrote.
_MAX_EXPLANATION = 512
# error.type (OpenTelemetry's conventions): an evaluation that could not decide says why.
_ERROR_TYPE: Final = "error.type"
_EVENT_ID_NAMESPACE: Final = "pipeline"
_SCORE_PASS, _SCORE_FAIL = 1.0, 0.0
_ALLOWED_CACHE_ENTRIES = 64

# Positions in a spans row (Columns.SPANS) read here.
_SPAN = {column: Columns.SPANS.index(column) for column in (
    "trace_id", "span_id", "parent_span_id", "scope_name", "service", "end_time",
    "request_id", "attributes", "resource_attributes")}
_EVENT = {column: Columns.SPAN_EVENTS.index(column) for column in (
    "name", "trace_id", "span_id")}


class DetectionCounts:
    """What pipeline detection saw, by kind; each problem kind is logged once.

    Args:
        counts: The dict to count into (the consumer's stats), or a new one.
    """

    def __init__(self, counts: dict[str, int] | None = None) -> None:
        self.counts = counts if counts is not None else {}
        self._logged: set[str] = set()

    def add(self, kind: str, number: int = 1) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + number

    def problem(self, kind: str, detail: str) -> None:
        """Count a span not (fully) judged because of ``kind``; log the first of each kind."""
        self.add(kind)
        if kind not in self._logged:
            self._logged.add(kind)
            logger.warning("GenAI span not fully judged (%s): %s; later spans with this "
                           "problem are counted in the consumer's stats, not logged",
                           kind, detail[:300])


def pipeline_event_id(trace_id: str, span_id: str, event_name: str, finding: str) -> str:
    """The id of an event found in the pipeline: the same finding always gets the same id.

    Prefixed, and hashed in a namespace of its own, so it never equals the index-based id
    of an event the span itself carried (:func:`.otlp_values.event_id`).
    """
    raw = f"{_EVENT_ID_NAMESPACE}\x1f{trace_id}\x1f{span_id}\x1f{event_name}\x1f{finding}"
    return f"{_EVENT_ID_NAMESPACE}-{hashlib.blake2b(raw.encode(), digest_size=16).hexdigest()}"


def _text(value: Any) -> str:
    """An attribute value as the decoders store it (see :func:`.otlp_values.any_value_text`)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, int):
        return str(value)
    return json.dumps(list(value), ensure_ascii=False)


def _bounded(text: str, limit: int = _MAX_EXPLANATION) -> str:
    if len(text) <= limit:
        return text
    return text[:limit - len(names.TRUNCATION_MARKER)] + names.TRUNCATION_MARKER


class _Span:
    """Where one LLM call's rows go: ids, time, request id, labels."""

    __slots__ = ("agent", "key", "request_id", "response_id", "service", "span_id",
                 "time_ns", "trace_id")

    def __init__(self, trace_id: str, span_id: str, time_ns: int, service: str,
                 request_id: str, agent: str, response_id: str, key: str) -> None:
        self.trace_id, self.span_id, self.time_ns = trace_id, span_id, time_ns
        self.service, self.request_id, self.agent = service, request_id, agent
        self.response_id, self.key = response_id, key

    def row(self, event_name: str, module: str, agent: str, tier: str, finding: str,
            attributes: Mapping[str, Any]) -> list[Any]:
        attrs = {names.ATTR_REQUEST_ID: self.request_id, names.ATTR_MODULE: module}
        attrs.update((k, _text(v)) for k, v in attributes.items() if v is not None)
        attrs[names.ATTR_FOUND_IN] = names.FOUND_IN_PIPELINE
        return [pipeline_event_id(self.trace_id, self.key, event_name, finding),
                self.time_ns, event_name, self.trace_id, self.span_id, self.request_id,
                module, agent, tier, self.service, attrs]

    def evaluation(self, evaluation: str, module: str, passed: bool, explanation: str,
                   finding: str) -> list[Any]:
        return self.row(names.EVENT_EVALUATION_RESULT, module, self.agent, "",
                        f"{evaluation}:{finding}", {
                            names.ATTR_AGENT: self.agent or None,
                            names.ATTR_EVALUATION_NAME: evaluation,
                            names.ATTR_EVALUATION_SCORE_LABEL:
                                names.EVALUATION_PASS if passed else names.EVALUATION_FAIL,
                            names.ATTR_EVALUATION_SCORE_VALUE:
                                _SCORE_PASS if passed else _SCORE_FAIL,
                            names.ATTR_EVALUATION_EXPLANATION: _bounded(explanation),
                            GENAI_RESPONSE_ID: self.response_id or None,
                        })

    def evaluation_failed(self, evaluation: str, module: str, error: BaseException) -> list[Any]:
        """The evaluation of a check that could not decide, as the hooks write it: no
        label or score, ``error.type`` the exception's class (never its message, which may
        quote the span)."""
        return self.row(names.EVENT_EVALUATION_RESULT, module, self.agent, "",
                        f"{evaluation}:error", {
                            names.ATTR_AGENT: self.agent or None,
                            names.ATTR_EVALUATION_NAME: evaluation,
                            _ERROR_TYPE: type(error).__qualname__,
                            GENAI_RESPONSE_ID: self.response_id or None,
                        })


def detection_rows(attributes: Mapping[str, str], *, trace_id: str, span_id: str,
                   time_ns: int, service: str, resource: Mapping[str, str],
                   request_id: str, counts: DetectionCounts | None = None,
                   id_key: str | None = None) -> list[list[Any]]:
    """``span_events`` rows for what the detectors find in one LLM call's attributes.

    Args:
        attributes: The span's (or GenAI log record's) attributes, values as text.
        trace_id: The trace id (32 hex digits) the rows belong to.
        span_id: The LLM span's id (16 hex digits) the rows are events of.
        time_ns: The rows' timestamp (the span's end: when the reply was known).
        service: The ``service`` column (the resource's ``service.name``).
        resource: The resource attributes (read for the agent label when the call
            names no ``gen_ai.agent.name``).
        request_id: The request the call belongs to ("" : the trace id).
        counts: Where to count what was read and what could not be (a module-wide
            default when None).
        id_key: What the event ids are derived from in place of ``span_id`` (a log
            record that names no span: its record id); None: ``span_id``.

    Returns:
        Rows in :attr:`Columns.SPAN_EVENTS` order: detections and one evaluation result
        per verdict; empty for anything that is not an LLM call, or is not judged (the
        reason counted). Never raises on what the attributes hold.
    """
    exchange = read_exchange(attributes)
    if exchange is None:
        return []
    return _detect(exchange, trace_id, span_id, time_ns, service, resource, request_id,
                   counts if counts is not None else _DEFAULT_COUNTS,
                   span_id if id_key is None else id_key)


def _detect(exchange: GenAIExchange, trace_id: str, span_id: str, time_ns: int,
            service: str, resource: Mapping[str, str], request_id: str,
            counts: DetectionCounts, id_key: str) -> list[list[Any]]:
    counts.add(COUNT_LLM_SPANS)
    for kind, detail in exchange.problem_details.items():
        counts.problem(kind, detail)
    agent = shown_name(exchange.agent_name or service or resource.get("service.name", ""))
    span = _Span(trace_id, span_id, time_ns, service,
                 storable_request_id(request_id or trace_id), agent, exchange.response_id,
                 id_key)
    rows: list[list[Any]] = []
    for check, evaluation, module in (
            (_check_tools, names.EVALUATION_PLAN_TOOLS, names.MODULE_PLANNING),
            (_check_replies, names.EVALUATION_FABRICATION, names.MODULE_REPLIES)):
        try:
            rows += check(exchange, span, counts)
        except GuardInputError as exc:  # a tool definition no reader takes, ...
            counts.problem(PROBLEM_UNEXPECTED_SHAPE, f"{check.__name__}: {exc}")
            rows.append(span.evaluation_failed(evaluation, module, exc))
        except Exception as exc:  # noqa: BLE001 - a detector bug must not lose the span
            counts.problem(PROBLEM_DETECTOR_ERROR,
                           f"{check.__name__}: {type(exc).__name__}: {exc}")
            rows.append(span.evaluation_failed(evaluation, module, exc))
    counts.add(COUNT_FINDINGS, sum(row[2] != names.EVENT_EVALUATION_RESULT for row in rows))
    return rows


_allowed_cache: dict[int, tuple[Sequence[Any], AllowedTools]] = {}


def _allowed(tools: Sequence[Any]) -> AllowedTools:
    """The parsed tool list; the reader hands out one list object per distinct list."""
    hit = _allowed_cache.get(id(tools))
    if hit is not None and hit[0] is tools:
        return hit[1]
    allowed = AllowedTools.parse(tools)
    if len(_allowed_cache) >= _ALLOWED_CACHE_ENTRIES:
        _allowed_cache.clear()
    # The entry holds the list, so its id cannot be reused while it is cached.
    _allowed_cache[id(tools)] = (tools, allowed)
    return allowed


def _check_tools(exchange: GenAIExchange, span: _Span,
                 counts: DetectionCounts) -> list[list[Any]]:
    """The reply's tool calls against the tools the request showed."""
    calls = [call for message in exchange.output or () for call in message.get("tool_calls", ())]
    if not calls or exchange.tools is None:
        return []
    if not exchange.tools:
        counts.problem(PROBLEM_TOOLS_NOT_CAPTURED,
                       f"the reply calls {shown_name(calls[0]['function']['name'])!r} but "
                       f"neither the call nor a span above it in the same export request "
                       f"records tool definitions")
        return []
    result = validate_plan(calls, _allowed(exchange.tools), emit=False)
    return [*_hallucination_rows(result, span),
            span.evaluation(names.EVALUATION_PLAN_TOOLS, names.MODULE_PLANNING,
                            not result.hallucinations, _plan_explanation(result, len(calls)),
                            "")]


def _hallucination_rows(result: PlanValidationResult, span: _Span) -> list[list[Any]]:
    # As the hooks report them (validation.report_hallucinations): one event per
    # distinct invented name, its `agent` being that name.
    first_per_name: dict[str | None, PlanIssue] = {}
    for issue in result.hallucinations:
        first_per_name.setdefault(issue.tool, issue)
    rows = []
    for issue in first_per_name.values():
        capability = (issue.capability
                      if issue.error_type is PlanErrorType.HALLUCINATED_CAPABILITY else None)
        shown = "" if issue.tool is None else shown_name(issue.tool)
        rows.append(span.row(
            names.EVENT_HALLUCINATION_DETECTED, names.MODULE_PLANNING, shown, "",
            f"{issue.error_type}:{issue.tool}", {
                names.ATTR_HALLUCINATED_AGENT: shown or None,
                names.ATTR_AGENT: shown or None,
                names.ATTR_HALLUCINATED_CAPABILITY: capability,
                names.ATTR_ALLOWED_AGENT_COUNT: result.allowed.agent_count,
                names.ATTR_SUGGESTED_TOOLS: list(issue.suggested_tools),
                names.ATTR_ERROR_TYPE: str(issue.error_type),
            }))
    return rows


def _plan_explanation(result: PlanValidationResult, calls: int) -> str:
    if result.hallucinations:
        return "; ".join(issue.message for issue in result.hallucinations)
    return (f"{calls} tool call(s), none naming a tool outside the "
            f"{result.allowed.agent_count} the request listed")


def _check_replies(exchange: GenAIExchange, span: _Span,
                   counts: DetectionCounts) -> list[list[Any]]:
    """Each reply with text, judged within the conversation that came before it."""
    if exchange.messages is None or not exchange.output:
        return []
    rows: list[list[Any]] = []
    tools = exchange.tools or None  # unknown: every call counts as run
    for number, message in enumerate(exchange.output):
        verdict = judge_reply(exchange.messages, message, tools, system=exchange.system)
        if verdict is None:
            continue
        rows += _fabrication_rows(verdict, span, exchange.conversation_id, number)
        rows.append(span.evaluation(names.EVALUATION_FABRICATION, names.MODULE_REPLIES,
                                    not verdict.flagged, _reply_explanation(verdict),
                                    str(number)))
    return rows


# The tiers that cannot fire on a reply are not run: the verdict is the same, and most of
# a reply's cost is its tiers (the prefilter of judge_reply). Each test below is a
# condition without which its tier finds nothing:
# * ungrounded_result: every value it reads (money, codes, clock times, amounts of an
#   outcome) has a digit, a field stated contrary to a write's result is stated in a
#   sentence that reports an outcome (may_report_outcome), and a run's outcome holds an
#   outcome word (may_report_run_outcome);
# * text_tool_call: every written call has one of these characters (JSON, a tag, an
#   "Action:" line, a call expression);
# * repetition: a loop repeats an earlier reply with text, or makes again the calls an
#   earlier message made (that failed).
# The claim tiers (action, read) always run: a reply makes a claim in words that no test
# cheaper than finding the claim rules out.
_DIGIT_RE = re.compile(r"\d")
_TEXT_CALL_MARKS = ("{", "<", ":", "(")
_CLAIM_TIERS = (names.TIER_ACTION, names.TIER_READ)


def _may_repeat(messages: Sequence[Mapping[str, Any]], reply: Mapping[str, Any]) -> bool:
    calls = bool(reply.get("tool_calls"))
    return any(m.get("role") in ("assistant", "model") and (
        isinstance(m.get("content"), str) and m["content"].strip()
        or calls and m.get("tool_calls")) for m in messages)


def judge_reply(messages: Sequence[Mapping[str, Any]], reply: Mapping[str, Any],
                tools: Any, *, system: str = "") -> ReplyVerdict | None:
    """The fabrication verdict on ``reply`` as the last message after ``messages``.

    The same verdict as the hooks' ``FabricationDetector.detect_last`` on the
    conversation with ``reply`` last (default settings), with the tiers that cannot fire
    on this reply left out (see the comment above).

    Args:
        messages: The conversation before the reply, in OpenAI chat shape.
        reply: The assistant message judged (its ``content`` and ``tool_calls``).
        tools: The tool definitions the request showed; None when unknown.
        system: System instructions given apart from the messages.

    Returns:
        The verdict; None when the reply has no text (a reply of calls only says
        nothing to judge, and judging the last reply with text would judge an older one).
    """
    text = reply.get("content")
    if not isinstance(text, str) or not text.strip():
        return None
    tiers = list(_CLAIM_TIERS)
    if any(mark in text for mark in _TEXT_CALL_MARKS):
        tiers.append(names.TIER_TEXT_TOOL_CALL)
    if _DIGIT_RE.search(text) or may_report_outcome(text) or may_report_run_outcome(text):
        tiers.append(names.TIER_UNGROUNDED_RESULT)
    if _may_repeat(messages, reply):
        tiers.append(names.TIER_REPETITION)
    verdicts = default_detector().engine.judge([*messages, reply], tools,
                                               system=system or None, last_only=True,
                                               tiers=tiers)
    return verdicts[0] if verdicts else None


def _fabrication_rows(verdict: ReplyVerdict, span: _Span, channel: str,
                      number: int) -> list[list[Any]]:
    # As the hooks report them (fabrication.FabricationGuard._emit): one event per tier.
    return [span.row(names.EVENT_FABRICATION_DETECTED, names.MODULE_REPLIES, span.agent,
                     tier, f"{number}:{tier}", {
                         names.ATTR_TIER: tier,
                         names.ATTR_MATCHED_PHRASE: verdict.evidence(tier),
                         names.ATTR_TOOLS_FIRED: list(verdict.tools_fired),
                         names.ATTR_SIMILARITY:
                             verdict.similarity if tier == names.TIER_REPETITION else None,
                         names.ATTR_CHANNEL: channel or None,
                         names.ATTR_AGENT: span.agent or None,
                     }) for tier in verdict.tiers]


def _reply_explanation(verdict: ReplyVerdict) -> str:
    if verdict.flagged:
        return "; ".join(f"{finding.tier}: {finding.evidence}"
                         for finding in verdict.findings)
    return ("no claim of work without a tool that did it, no tool call typed as text, "
            "no value without a source, no loop")


# --- spans -----------------------------------------------------------------------------------

def detect_in_spans(rows: DecodedRows, counts: DetectionCounts | None = None) -> DecodedRows:
    """Add the detections of the LLM spans in ``rows`` (one decoded trace request).

    Each LLM span gets the rows of :func:`detection_rows`, and its own row the request id
    they carry when it had none: the span's ``request_id``, else the nearest ancestor's
    in the same request, else that of the first span of its trace in the request that
    has one, else the trace id. A span that records no tool definitions (or no
    ``gen_ai.agent.name``) is judged with those of its nearest ancestor in the same
    request that declares them (an agent's ``invoke_agent`` span).

    Args:
        rows: What :func:`~guardtrace.consumers.decode.decode_spans` returned; extended
            in place.
        counts: Where to count (a module-wide default when None).

    Returns:
        ``rows``.
    """
    counts = counts if counts is not None else _DEFAULT_COUNTS
    reported: set[tuple[str, str]] | None = None
    tree: _SpanTree | None = None
    found: list[list[Any]] = []
    for span in rows.spans:
        if span[_SPAN["scope_name"]] == names.INSTRUMENTATION_NAME:
            continue
        exchange = read_exchange(span[_SPAN["attributes"]])
        if exchange is None:
            continue  # the common case: not an LLM span (a few dict lookups)
        trace_id, span_id = span[_SPAN["trace_id"]], span[_SPAN["span_id"]]
        if reported is None:
            reported = {(e[_EVENT["trace_id"]], e[_EVENT["span_id"]]) for e in rows.span_events
                        if e[_EVENT["name"]] in _REPORTED}
        if (trace_id, span_id) in reported:
            counts.add(COUNT_REPORTED_IN_AGENT)
            continue
        request_id = span[_SPAN["request_id"]]
        if not request_id:
            tree = tree or _SpanTree(rows.spans)
            request_id = storable_request_id(tree.request_id(span) or trace_id)
            span[_SPAN["request_id"]] = request_id  # the request page finds the LLM span
        if exchange.tools == [] or not exchange.agent_name:
            tree = tree or _SpanTree(rows.spans)
            exchange = _with_enclosing_agent(exchange, tree.enclosing_agents(span), counts)
        found += _detect(exchange, trace_id, span_id, span[_SPAN["end_time"]],
                         span[_SPAN["service"]], span[_SPAN["resource_attributes"]],
                         request_id, counts, span_id)
    rows.span_events.extend(found)
    return rows


def _with_enclosing_agent(exchange: GenAIExchange, above: Iterable[EnclosingAgent],
                          counts: DetectionCounts) -> GenAIExchange:
    """``exchange`` with the tools and agent name of the nearest span above that has them."""
    tools, agent_name = exchange.tools, exchange.agent_name
    for agent in above:  # nearest first
        if tools == [] and agent.tools != []:
            tools = agent.tools
            for kind, detail in agent.problem_details.items():
                counts.problem(kind, f"a span above the call: {detail}")
        if not agent_name and agent.agent_name:
            agent_name = agent.agent_name
        if tools != [] and agent_name:
            break
    if tools is exchange.tools and agent_name == exchange.agent_name:
        return exchange
    return replace(exchange, tools=tools, agent_name=agent_name)


class _SpanTree:
    """The spans of one export request by id, for what an LLM span does not carry itself."""

    def __init__(self, spans: Sequence[list[Any]]) -> None:
        self._by_span: dict[tuple[str, str], list[Any]] = {}
        self._first: dict[str, str] = {}
        self._agents: dict[tuple[str, str], EnclosingAgent | None] = {}
        for span in spans:
            trace_id = span[_SPAN["trace_id"]]
            self._by_span[(trace_id, span[_SPAN["span_id"]])] = span
            if span[_SPAN["request_id"]]:
                self._first.setdefault(trace_id, span[_SPAN["request_id"]])

    def _ancestors(self, span: list[Any]) -> Iterator[list[Any]]:
        trace_id = span[_SPAN["trace_id"]]
        parent = span[_SPAN["parent_span_id"]]
        for _ in range(len(self._by_span)):  # a cycle of parents cannot loop forever
            above = self._by_span.get((trace_id, parent))
            if above is None:
                return
            yield above
            parent = above[_SPAN["parent_span_id"]]

    def request_id(self, span: list[Any]) -> str:
        """The nearest ancestor's request id, else the trace's first, else ""."""
        for above in self._ancestors(span):
            if above[_SPAN["request_id"]]:
                return str(above[_SPAN["request_id"]])
        return self._first.get(span[_SPAN["trace_id"]], "")

    def enclosing_agents(self, span: list[Any]) -> Iterator[EnclosingAgent]:
        """What the spans above ``span`` declare for the calls below them, nearest first."""
        for above in self._ancestors(span):
            key = (above[_SPAN["trace_id"]], above[_SPAN["span_id"]])
            if key not in self._agents:  # an agent span above many calls is read once
                self._agents[key] = read_enclosing_agent(above[_SPAN["attributes"]])
            agent = self._agents[key]
            if agent is not None:
                yield agent


class PipelineDetection:
    """A spans-topic decoder with detection: ``decode``, then :func:`detect_in_spans`.

    Args:
        decode: The spans decoder (:func:`~guardtrace.consumers.decode.decode_spans`);
            passed in, so that detection stays below the decoders it extends.
        counts: Where to count (the consumer's ``stats.pipeline_detection``).
    """

    def __init__(self, decode: Callable[[bytes], DecodedRows],
                 counts: dict[str, int] | None = None) -> None:
        self.decode = decode
        self.counts = DetectionCounts(counts)

    def __call__(self, raw: bytes) -> DecodedRows:
        """Rows of one OTLP trace request, plus what the detectors found in its LLM spans.

        Raises:
            PoisonRecord: as ``decode`` does; detection itself never raises.
        """
        rows = self.decode(raw)
        try:
            detect_in_spans(rows, self.counts)
        except Exception as exc:  # noqa: BLE001 - the span rows are kept whatever happens
            self.counts.problem(PROBLEM_DETECTOR_ERROR, f"{type(exc).__name__}: {exc}")
        return rows


_DEFAULT_COUNTS = DetectionCounts()
