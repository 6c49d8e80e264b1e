"""Scripted LLM text for the simulated fleet: replies, questions and prompts.

Every function takes the fleet's ``random.Random`` so the same seed writes the same text.
All text is ASCII, so a string's length is its size in bytes, which is how prompts are cut
to an exact payload size.

The reply phrasings are chosen for what the guards must decide: fabricated claims use
first-person present or perfect forms ("I've sent", "I'm restarting"), read narration
uses "let me check"-style forms, and truthful replies either state facts or make a claim
together with the tool that did the work.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Sequence
from typing import Any

from .catalog import Tool

__all__ = [
    "action_reply",
    "build_prompt",
    "honest_claim",
    "neutral_question",
    "prone_question",
    "read_reply",
    "repeat_of",
    "secret",
    "statement",
    "typed_tool_call",
    "verified_answer",
    "wrong_answer",
]

_PEOPLE = ("Dana", "Priya", "Marco", "Lea", "Tom", "Aiko", "Sam", "Jonas", "Fatima", "Owen")
_CITIES = ("Lisbon", "Chicago", "Rotterdam", "Osaka", "Nairobi", "Lyon", "Austin", "Oslo")
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
_THINGS = ("itinerary", "credit note", "offer letter", "incident report", "quote",
           "summary report", "NDA draft", "refund confirmation", "release notes")
_SERVICES = ("checkout", "payments", "search", "auth", "notifications", "inventory")
_SOURCES = ("logs", "order history", "contract", "invoice lines", "deployment history",
            "policy handbook", "ticket thread", "paper", "price list")

_FACTS = (
    "Order {n} left the {city} warehouse on {day} and should arrive by {day2}.",
    "The invoice total is {amount} EUR including VAT, due on the {d}th.",
    "The p95 latency of the {service} service is {ms} ms over the last hour.",
    "Your remaining leave balance is {d} days for this year.",
    "The contract renews on the {d}th of next month with a 60-day notice period.",
    "The cheapest direct flight to {city} departs at {hh}:{mm} and costs {amount} EUR.",
    "There are {d} open opportunities on the account, worth {amount} EUR in total.",
    "The paper reports {pct}% accuracy on the held-out set, {d} points above the baseline.",
    "Ticket {n} is assigned to {person} and marked as high priority.",
    "The forecast for {city} on {day} is {d} degrees with light rain in the evening.",
)
_CLOSERS = ("Let me know if you want changes.", "Should I go ahead with anything else?",
            "Happy to help with the next step.", "Do you want me to prepare a summary?")
_MODEL_TRUTHS = ("I'm running Claude Sonnet 4.5 through OpenRouter, so answers take a moment.",
                 "I'm running as a read-only assistant in this workspace.",
                 "I'm running a local model, so very long documents are summarised in parts.")

_ACTION_CLAIMS = (
    "I've sent the {thing} to {person}.",
    "I'm deploying the fix to staging now.",
    "I'm restarting the {service} service now.",
    "Let me create the {thing} for you.",
    "I've emailed {person} the {thing}.",
    "I've updated the record and saved the {thing}.",
    "I'm writing the {thing} to the shared drive.",
    "I've created the {thing} and shared it with {person}.",
    "I'm pushing the change to the {service} repository.",
    "I'm kicking off the {service} pipeline.",
)
_READ_CLAIMS = (
    "Let me check the {source} first.",
    "I'm looking at the {source} for {person}.",
    "I've reviewed the {source} and it looks consistent.",
    "Let me take a closer look at the {source}.",
    "I'm reading the {source} now.",
    "I'll look at the {source} and come back with the numbers.",
    "Let me examine the {source} for anything unusual.",
    "I'm going through the {source} line by line.",
)
_HONEST_CLAIMS = (
    "I've sent the {thing} to {person}.",
    "I've updated the record as requested.",
    "I've created the {thing} and shared it with {person}.",
    "I'm restarting the {service} service now.",
)
_REPEAT_PREFIXES = ("", "As I said, ", "To repeat: ", "Again: ")

_WORDS = ("strawberry", "raspberry", "bookkeeper", "mississippi", "committee",
          "onomatopoeia", "necessary", "embarrass", "occurrence", "banana", "parallel",
          "rhythm", "queue", "accommodation", "millennium")
_ORDINALS = ("first", "second", "third", "fourth", "fifth", "last")
_PRONE = (
    "How many {c}'s are in {word}?",
    "How many letters are in the word {word}?",
    "How many vowels are in {word}?",
    "What is the {ordinal} letter of {word}?",
    "Does {word} contain the letter {c}?",
    "Which month is spelled with an X?",
    "Which weekday is spelled with the letter {C}?",
    "Which planet has the letter {c} in its name?",
)
_NEUTRAL = (
    "Summarise the refund policy for customers in the EU.",
    "Draft a short reply to {person} about the delayed order {n}.",
    "Give me the status of order {n}.",
    "Translate the release notes into German.",
    "When does the contract with Northwind renew?",
    "Book a meeting with {person} on {day} afternoon.",
    "Prepare the agenda for the {service} incident review.",
    "List the open tickets assigned to {person}.",
)

_SYSTEM = ("You are {agent}, an assistant of the {module} team. Use only the tools listed "
           "below, exactly as named. Plan before you act, cite tool results, and never claim "
           "an action that no tool performed. Answer in the user's language.\n")
_USER_TURNS = (
    "user: Can you check on order {n}? {person} says it has not arrived in {city}.",
    "user: We need this before {day}, the client in {city} is waiting.",
    "user: Please use the numbers from last quarter, not the draft ones.",
    "user: {person} asked for a shorter version, one page at most.",
    "user: Thanks, that helps. One more thing about ticket {n}.",
)
_ASSISTANT_TURNS = (
    "assistant: I found {d} matching records; the most recent one is from {day}.",
    "assistant: The totals differ by {amount} EUR between the two exports.",
    "assistant: Here is the summary you asked for, in three bullet points.",
)
_SECRET_TURN = "user: Here is the staging credential for the integration: {secret}"
_SECRETS = ("sk-live-{token}", "Bearer {token}")


def _fill(rng: random.Random, template: str, **extra: Any) -> str:
    values = {
        "n": rng.randint(1000, 99999), "d": rng.randint(2, 28), "ms": rng.randint(40, 900),
        "amount": f"{rng.randint(20, 9000)}.{rng.randint(0, 99):02d}",
        "pct": rng.randint(61, 97), "hh": f"{rng.randint(5, 22):02d}",
        "mm": f"{rng.choice((0, 10, 25, 40, 55)):02d}",
        "city": rng.choice(_CITIES), "day": rng.choice(_DAYS), "day2": rng.choice(_DAYS),
        "person": rng.choice(_PEOPLE), "thing": rng.choice(_THINGS),
        "service": rng.choice(_SERVICES), "source": rng.choice(_SOURCES),
    }
    values.update(extra)
    return template.format(**values)


def statement(rng: random.Random) -> str:
    """A truthful, factual reply of two sentences (no claim that needs a tool)."""
    if rng.random() < 0.15:
        return f"{rng.choice(_MODEL_TRUTHS)} {_fill(rng, rng.choice(_FACTS))}"
    return f"{_fill(rng, rng.choice(_FACTS))} {_fill(rng, rng.choice(_FACTS))} " \
           f"{rng.choice(_CLOSERS)}"


def honest_claim(rng: random.Random) -> str:
    """A claim of write work, truthful when sent with a write-class tool fired."""
    return f"{_fill(rng, rng.choice(_HONEST_CLAIMS))} {_fill(rng, rng.choice(_FACTS))}"


def action_reply(rng: random.Random, with_secret: bool) -> str:
    """A reply claiming write/execute work (fabricated when no write tool fired)."""
    text = f"{_fill(rng, rng.choice(_FACTS))} {_fill(rng, rng.choice(_ACTION_CLAIMS))}"
    if with_secret:
        # Agents paste credentials into replies too; the payload must arrive redacted.
        text += f" The config now uses api_key={secret(rng, 'sk-live-{token}')}."
    return text


def read_reply(rng: random.Random) -> str:
    """A reply narrating reading (fabricated when no read tool fired)."""
    return f"{_fill(rng, rng.choice(_READ_CLAIMS))} {_fill(rng, rng.choice(_FACTS))}"


def typed_tool_call(rng: random.Random, tool: str) -> str:
    """A tool call written out as text, as models do that lose their tool interface."""
    body = f'{{"name": "{tool}", "arguments": {{"id": "{rng.randint(1000, 99999)}"}}}}'
    return rng.choice((f"<tool_call>{body}</tool_call>", f"```json\n{body}\n```", body))


def repeat_of(rng: random.Random, earlier: str) -> str:
    """An earlier reply said again, as a looping agent does."""
    return rng.choice(_REPEAT_PREFIXES) + earlier


def prone_question(rng: random.Random) -> str:
    """A question of a family the criticality gate must flag (spelling, counting, ...)."""
    word = rng.choice(_WORDS)
    c = rng.choice(word)
    return _fill(rng, rng.choice(_PRONE), word=word, c=c, C=c.upper(),
                 ordinal=rng.choice(_ORDINALS))


def neutral_question(rng: random.Random) -> str:
    """An ordinary request the gate must leave alone."""
    return _fill(rng, rng.choice(_NEUTRAL))


def wrong_answer(rng: random.Random) -> str:
    """The confident unverified answer a model gives first."""
    return rng.choice(("October.", "There are 2.", "It is the letter e.", "Yes, it does.",
                       "Nine letters.", "Saturn."))


def verified_answer(question: str) -> str:
    """The answer after the reason tool ran (text for the exchange payload only)."""
    return (f"Verified step by step for {question!r}: I spelled the word out letter by "
            f"letter, counted explicitly and checked the obvious answer before replying.")


def secret(rng: random.Random, template: str | None = None) -> str:
    """A fake credential in a shape the default redaction rules recognise."""
    alphabet = string.ascii_letters + string.digits
    # The bearer rule wants a digit in the token: prose like "Bearer authentication"
    # must stay readable, so a token without one would not be redacted.
    token = "".join(rng.choice(alphabet) for _ in range(31)) + rng.choice(string.digits)
    return (template or rng.choice(_SECRETS)).format(token=token)


def _tool_doc(tool: Tool) -> str:
    name, _kind, description = tool
    schema = {"type": "object", "properties": {
        "query": {"type": "string", "description": f"What {name} should work on."},
        "limit": {"type": "integer", "minimum": 1, "maximum": 100}},
        "required": ["query"]}
    return f"- {name}: {description}\n  parameters: {json.dumps(schema)}\n"


def _tool_output(rng: random.Random, tools: Sequence[Tool]) -> str:
    name = rng.choice(tools)[0]
    records = [{"id": rng.randint(1000, 99999), "city": rng.choice(_CITIES),
                "owner": rng.choice(_PEOPLE), "amount": rng.randint(10, 9000),
                "status": rng.choice(("open", "closed", "pending"))}
               for _ in range(rng.randint(1, 4))]
    header = ""
    if rng.random() < 0.03:
        header = f"GET /v1/{name} -> 200 (Authorization: {secret(rng, 'Bearer {token}')}) "
    return f"tool({name}): {header}{json.dumps(records)}"


def build_prompt(rng: random.Random, *, agent: str, module: str, tools: Sequence[Tool],
                 request: str, size: int, with_secret: bool) -> str:
    """The prompt an agent sends: system text, tool docs, conversation, then the request.

    Args:
        rng: The fleet's random source.
        agent: The agent's name (in the system text).
        module: The agent's module (in the system text).
        tools: The tools shown to the model; their docs are repeated as the prompt grows,
            as long-context agents resend them every turn.
        request: The user's request; it always ends the prompt, whole.
        size: Exact length of the result (ASCII, so bytes). Small sizes cut the
            conversation, never the request.
        with_secret: The user pastes a fake credential with the request.

    Returns:
        The prompt, exactly ``size`` characters long (or the request alone if longer).
    """
    tail = f"\nuser request: {request}\n"
    if with_secret:
        # Pasted into the current turn, so even the smallest prompt keeps it to redact.
        tail = "\n" + _fill(rng, _SECRET_TURN, secret=secret(rng)) + tail
    parts = [_SYSTEM.format(agent=agent, module=module), "tools:\n",
             *(_tool_doc(t) for t in tools), "conversation:\n"]
    length = sum(map(len, parts))
    budget = size - len(tail)
    while length < budget:
        roll = rng.random()
        if roll < 0.35:
            line = _fill(rng, rng.choice(_USER_TURNS))
        elif roll < 0.6:
            line = _fill(rng, rng.choice(_ASSISTANT_TURNS))
        elif roll < 0.9:
            line = _tool_output(rng, tools)
        else:
            line = "tools (resent):\n" + "".join(_tool_doc(t) for t in tools)
        parts.append(line + "\n")
        length += len(line) + 1
    return "".join(parts)[:max(0, budget)] + tail
