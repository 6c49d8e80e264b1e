"""The deterministic traffic model: a fleet of agents and the script of each request.

One ``random.Random(seed)`` decides everything up front, before any hook runs: which
agent serves the request, which scenario it plays, what the scripted "LLM" answers on
every attempt and turn, and how large the prompt is. The same seed therefore gives the
same sequence of scripts, whatever the hooks decide, and the hooks then decide the same.

Scenarios and their mix (per request):

==========================  ======  ====================================================
scenario                    share   what the scripted LLM does
==========================  ======  ====================================================
plan_valid                  16 %    plans with allowed tools only
plan_recovered              14 %    invents 1-2 tools, then plans validly after 1-2 retries
plan_unrecoverable           6 %    invents tools on every attempt until the budget ends
plan_regeneration_failed     2 %    invents a tool, then the retry's LLM call times out
reply_action                 8 %    claims write work; no write-class tool fired
reply_read                   6 %    narrates reading; no read-class tool fired
reply_repetition             6 %    repeats an earlier reply of the same conversation
reply_truthful              16 %    states facts, or claims work a tool really did
question_verified            7 %    hallucination-prone question; calls ``reason`` at once
question_nudged              7 %    answers first, is nudged, then calls ``reason``
question_bypassed            4 %    never calls ``reason`` (nudges run out / turn limit)
question_neutral             8 %    an ordinary question the gate leaves alone
==========================  ======  ====================================================

Invented tool names are a long tail: 40 % come from a small set of common inventions
(``web_search``, ``send_email``, ...), 60 % are new names, so over a few thousand
requests the distinct names exceed the ``agent`` label cap and ``__other__`` appears.
"""

from __future__ import annotations

import enum
import json
import random
from dataclasses import dataclass, field
from typing import Any

from . import texts
from .catalog import (
    COMMON_INVENTIONS,
    GENERIC_TOOLS,
    INVENTED_NOUNS,
    INVENTED_QUALIFIERS,
    INVENTED_VERBS,
    MODULE_TOOLS,
    Tool,
    module_names,
    tools_of,
)

__all__ = [
    "MAX_PROMPT_BYTES",
    "MIN_PROMPT_BYTES",
    "SCENARIO_WEIGHTS",
    "Fleet",
    "FleetAgent",
    "PlanScript",
    "QuestionScript",
    "ReplyScript",
    "RequestScript",
    "Scenario",
    "Turn",
]

# Prompt sizes are drawn in [1 KiB, 168 KiB], skewed small (median about 4 KiB, 90th
# percentile about 65 KiB), as long-context agents' prompts are. The hallucination hook
# stores the prompt JSON-escaped (up to 14 % longer: the tool outputs are JSON) with the
# feedback and errors around it; 168 keeps every payload within 200 KiB.
MIN_PROMPT_BYTES = 1024
MAX_PROMPT_BYTES = 168 * 1024

_COMMON_INVENTION_SHARE = 0.4
_SECRET_SHARE = 0.15
_TOOLS_PER_AGENT = (5, 8)


class Scenario(enum.StrEnum):
    """What one simulated request does; also its expected outcome label."""

    PLAN_VALID = "plan_valid"
    PLAN_RECOVERED = "plan_recovered"
    PLAN_UNRECOVERABLE = "plan_unrecoverable"
    PLAN_REGENERATION_FAILED = "plan_regeneration_failed"
    REPLY_ACTION = "reply_action"
    REPLY_READ = "reply_read"
    REPLY_REPETITION = "reply_repetition"
    REPLY_TEXT_TOOL_CALL = "reply_text_tool_call"
    REPLY_TRUTHFUL = "reply_truthful"
    QUESTION_VERIFIED = "question_verified"
    QUESTION_NUDGED = "question_nudged"
    QUESTION_BYPASSED = "question_bypassed"
    QUESTION_NEUTRAL = "question_neutral"


SCENARIO_WEIGHTS: dict[Scenario, float] = {
    Scenario.PLAN_VALID: 0.16,
    Scenario.PLAN_RECOVERED: 0.14,
    Scenario.PLAN_UNRECOVERABLE: 0.06,
    Scenario.PLAN_REGENERATION_FAILED: 0.02,
    Scenario.REPLY_ACTION: 0.08,
    Scenario.REPLY_READ: 0.06,
    Scenario.REPLY_REPETITION: 0.06,
    Scenario.REPLY_TEXT_TOOL_CALL: 0.03,
    Scenario.REPLY_TRUTHFUL: 0.13,
    Scenario.QUESTION_VERIFIED: 0.07,
    Scenario.QUESTION_NUDGED: 0.07,
    Scenario.QUESTION_BYPASSED: 0.04,
    Scenario.QUESTION_NEUTRAL: 0.08,
}


@dataclass(frozen=True)
class FleetAgent:
    """One simulated agent.

    Attributes:
        name: ``agent-07``; the ``agent`` label of its reply and question guards.
        module: The ``module`` label of everything it emits.
        tools: The tools its planner is shown (a subset of its module's catalog).
        max_retries: Its plan retry budget (1 or 2).
    """

    name: str
    module: str
    tools: tuple[Tool, ...]
    max_retries: int

    @property
    def allowed(self) -> list[dict[str, Any]]:
        """Its tools as OpenAI tool definitions, the form its planner is shown."""
        return [{"type": "function", "function": {"name": name, "description": description}}
                for name, _kind, description in self.tools]


@dataclass(frozen=True)
class PlanScript:
    """A planning request.

    Attributes:
        request: The user's request.
        plans: The plan the scripted LLM returns on attempt 0, 1, ... (JSON-ready).
        invented: The invented names, per attempt.
        fails_on_retry: The attempt whose LLM call fails (None: none fails).
    """

    request: str
    plans: tuple[list[dict[str, Any]], ...]
    invented: tuple[tuple[str, ...], ...]
    fails_on_retry: int | None = None


@dataclass(frozen=True)
class ReplyScript:
    """A reply to check: the text, the tools that fired this turn, the conversation."""

    reply: str
    tools_fired: tuple[str, ...]
    channel: str


@dataclass(frozen=True)
class Turn:
    """One scripted model turn: call ``tools``, or (with none) give ``answer`` and finish."""

    tools: tuple[str, ...] = ()
    answer: str = ""

    @property
    def finishes(self) -> bool:
        """True when the model tries to give its final answer on this turn."""
        return not self.tools


@dataclass(frozen=True)
class QuestionScript:
    """A question answered in a ReAct loop of at most ``len(turns)`` turns."""

    question: str
    turns: tuple[Turn, ...]
    max_nudges: int


@dataclass(frozen=True)
class RequestScript:
    """Everything one simulated request will do.

    Attributes:
        sequence: 0, 1, 2, ... in the order the fleet produced them.
        scenario: What it plays; the outcome the hooks are expected to report.
        agent: The agent serving it.
        step: The planning, reply or question script.
        prompt: The prompt sent to the LLM (its size is the drawn payload size).
        response: The LLM's final response text.
        has_secret: The prompt (or reply) carries a fake credential.
    """

    sequence: int
    scenario: Scenario
    agent: FleetAgent
    step: PlanScript | ReplyScript | QuestionScript
    prompt: str = field(repr=False)
    response: str = field(repr=False)
    has_secret: bool

    def exchange(self) -> str:
        """The debug payload body the agent records: prompt, then response."""
        return f"{self.prompt}\nresponse:\n{self.response}\n"


class Fleet:
    """Produces the request scripts of a fleet of agents, deterministically from a seed.

    Args:
        seed: Seeds the one random source behind every choice.
        agents: Number of agents (at least 1).
        modules: Number of modules the agents are spread over (1..agents).

    Raises:
        ValueError: ``agents`` below 1, or ``modules`` outside 1..agents.
    """

    def __init__(self, seed: int, *, agents: int = 50, modules: int = 5) -> None:
        if agents < 1:
            raise ValueError(f"agents must be at least 1, got {agents}")
        if not 1 <= modules <= agents:
            raise ValueError(f"modules must be between 1 and the agent count ({agents}), "
                             f"got {modules}")
        self.seed = seed
        self._rng = random.Random(seed)
        self.modules = module_names(modules)
        self.agents = [self._make_agent(i) for i in range(agents)]
        self._scenarios = list(SCENARIO_WEIGHTS)
        self._weights = list(SCENARIO_WEIGHTS.values())
        self._sequence = 0
        self._invented: set[str] = set()
        self._reserved = {t[0] for tools in MODULE_TOOLS.values() for t in tools} | {
            t[0] for t in GENERIC_TOOLS} | set(COMMON_INVENTIONS)
        # Per agent: the channel and text of its last quiet reply, and what fired with
        # it; a repetition repeats that reply (and fires the same tools) on that channel.
        self._last_quiet: dict[str, tuple[str, str, tuple[str, ...]]] = {}

    # -- the fleet ---------------------------------------------------------------------
    def _make_agent(self, index: int) -> FleetAgent:
        rng = self._rng
        module = self.modules[index % len(self.modules)]
        catalog = tools_of(module)
        count = min(len(catalog), rng.randint(*_TOOLS_PER_AGENT))
        tools = tuple(sorted(rng.sample(catalog, count)))
        return FleetAgent(f"agent-{index + 1:02d}", module, tools, rng.choice((1, 2)))

    # -- requests ----------------------------------------------------------------------
    def next_request(self) -> RequestScript:
        """The script of the next request."""
        rng = self._rng
        agent = rng.choice(self.agents)
        scenario = rng.choices(self._scenarios, self._weights)[0]
        if scenario is Scenario.REPLY_REPETITION and agent.name not in self._last_quiet:
            # Nothing said yet that could be repeated: this agent answers truthfully
            # instead (the fleet, not the hook, decides the scenario).
            scenario = Scenario.REPLY_TRUTHFUL
        size = int(MIN_PROMPT_BYTES * (MAX_PROMPT_BYTES / MIN_PROMPT_BYTES) ** (rng.random() ** 2))
        has_secret = rng.random() < _SECRET_SHARE
        sequence, self._sequence = self._sequence, self._sequence + 1
        step: PlanScript | ReplyScript | QuestionScript
        if scenario.value.startswith("plan_"):
            step, request, response = self._plan(agent, scenario)
        elif scenario.value.startswith("reply_"):
            step, request, response = self._reply(agent, scenario, sequence, has_secret)
        else:
            step, request, response = self._question(scenario)
        prompt = texts.build_prompt(rng, agent=agent.name, module=agent.module,
                                    tools=agent.tools, request=request, size=size,
                                    with_secret=has_secret)
        return RequestScript(sequence, scenario, agent, step, prompt, response, has_secret)

    # -- family 1 ----------------------------------------------------------------------
    def _invented_name(self) -> str:
        rng = self._rng
        if rng.random() < _COMMON_INVENTION_SHARE:
            return rng.choice(COMMON_INVENTIONS)
        verb, noun, qualifier = (rng.choice(INVENTED_VERBS), rng.choice(INVENTED_NOUNS),
                                 rng.choice(INVENTED_QUALIFIERS))
        style = rng.randrange(3)
        base = "_".join(p for p in (verb, noun, qualifier) if p)
        if style == 1:
            base = base.replace("_", "-")
        elif style == 2:
            base = "".join(w.capitalize() for w in base.split("_"))
        name, version = base, 2
        while name in self._invented or name in self._reserved:
            name, version = f"{base}_{version}", version + 1
        self._invented.add(name)
        return name

    def _steps(self, agent: FleetAgent, invented: tuple[str, ...]) -> list[dict[str, Any]]:
        rng = self._rng
        names = [t[0] for t in rng.sample(agent.tools, rng.randint(1, min(3, len(agent.tools))))]
        for name in invented:
            names.insert(rng.randint(0, len(names)), name)
        steps = []
        for i, name in enumerate(names, start=1):
            step: dict[str, Any] = {"id": f"s{i}", "tool": name,
                                    "instruction": f"use {name.replace('_', ' ')} for the "
                                                   f"user's request"}
            if i > 1:
                step["depends_on"] = [f"s{i - 1}"]
            steps.append(step)
        return steps

    def _plan(self, agent: FleetAgent, scenario: Scenario,
              ) -> tuple[PlanScript, str, str]:
        rng = self._rng
        request = texts.neutral_question(rng)
        if scenario is Scenario.PLAN_VALID:
            failing = 0
        elif scenario is Scenario.PLAN_REGENERATION_FAILED:
            failing = 1
        elif scenario is Scenario.PLAN_RECOVERED:
            failing = rng.randint(1, agent.max_retries)
        else:
            failing = agent.max_retries + 1  # every attempt the budget allows
        invented = tuple(tuple(self._invented_name() for _ in range(rng.choice((1, 1, 2))))
                         for _ in range(failing))
        plans = [self._steps(agent, names) for names in invented]
        fails_on_retry = None
        if scenario is Scenario.PLAN_REGENERATION_FAILED:
            fails_on_retry = 1
        elif scenario is not Scenario.PLAN_UNRECOVERABLE:
            plans.append(self._steps(agent, ()))
        response = json.dumps({"steps": plans[-1]})
        return PlanScript(request, tuple(plans), invented, fails_on_retry), request, response

    # -- family 2 ----------------------------------------------------------------------
    def _reply(self, agent: FleetAgent, scenario: Scenario, sequence: int,
               has_secret: bool) -> tuple[ReplyScript, str, str]:
        rng = self._rng
        reads = [t[0] for t in agent.tools if t[1] == "read"]
        writes = [t[0] for t in agent.tools if t[1] == "write"]
        neutral = [t[0] for t in agent.tools if not t[1]]
        # A new conversation per reply, except for a repetition: only then do two
        # replies share a channel, so only a loop is ever compared with its original.
        channel = f"{agent.name}/conversation-{sequence}"
        tools: tuple[str, ...] = ()
        if scenario is Scenario.REPLY_ACTION:
            reply = texts.action_reply(rng, with_secret=has_secret)
            if reads and rng.random() < 0.5:
                tools = (rng.choice(reads),)  # it looked something up, then claimed more
        elif scenario is Scenario.REPLY_READ:
            reply = texts.read_reply(rng)
            if neutral and rng.random() < 0.5:
                tools = (rng.choice(neutral),)
        elif scenario is Scenario.REPLY_TEXT_TOOL_CALL:
            # The call is typed into the reply instead of made: nothing runs.
            reply = texts.typed_tool_call(rng, rng.choice(agent.tools)[0])
        elif scenario is Scenario.REPLY_REPETITION:
            # A loop says the same again with nothing new: no tool ran since.
            channel, earlier, _ = self._last_quiet[agent.name]
            reply = texts.repeat_of(rng, earlier)
        else:
            if writes and rng.random() < 0.35:
                reply, tools = texts.honest_claim(rng), (rng.choice(writes),)
            else:
                reply = texts.statement(rng)
                if reads and rng.random() < 0.6:
                    tools = (rng.choice(reads),)
                # Only statements are repeated later: a repeated claim of work would
                # also be a claim with no tool behind it this time.
                self._last_quiet[agent.name] = (channel, reply, tools)
        request = texts.neutral_question(rng)
        return ReplyScript(reply, tools, channel), request, reply

    # -- family 3 ----------------------------------------------------------------------
    def _question(self, scenario: Scenario) -> tuple[QuestionScript, str, str]:
        rng = self._rng
        max_nudges = 2
        if scenario is Scenario.QUESTION_NEUTRAL:
            question = texts.neutral_question(rng)
            turns = [Turn(answer=texts.statement(rng))]
        else:
            question = texts.prone_question(rng)
            answer = texts.verified_answer(question)
            if scenario is Scenario.QUESTION_VERIFIED:
                turns = [Turn(tools=("reason",)), Turn(answer=answer)]
            elif scenario is Scenario.QUESTION_NUDGED:
                early = [Turn(answer=texts.wrong_answer(rng))
                         for _ in range(rng.randint(1, max_nudges))]
                turns = [*early, Turn(tools=("reason",)), Turn(answer=answer)]
            elif rng.random() < 0.5:
                # Keeps answering unverified until the nudges run out.
                turns = [Turn(answer=texts.wrong_answer(rng))] * (max_nudges + 1)
            else:
                # Searches instead of reasoning until the loop's turn limit.
                turns = [Turn(tools=("web_search",))] * 3
        response = next((t.answer for t in reversed(turns) if t.answer), "")
        return QuestionScript(question, tuple(turns), max_nudges), question, response
