"""The criticality gate on real user messages, and on the benchmark's question sets.

The real messages are third-party data and stay in ``shared/realdata``
(``GUARDTRACE_REALDATA``, by default ``<repo>/../shared/realdata``); these tests read them
from there and fail, naming the path, when they are missing. What counts as a real user
message, and the character-level and ordinary questions, are defined once, in
``benchmarks/_gate_quality.py``, which these tests load by path.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

from guardtrace.collectors.questions.criticality import (
    DEFAULT_PATTERNS,
    CriticalityGate,
    default_gate,
)
from tests.support.realdata import REPO, realdata_dir

# Real messages the gate fires on, each read by hand and found to be a character-level
# task (BFCL items, by item id): a list of fruit filtered by the letter they start with,
# and the string 'Hello, World!' to be reversed. Any other fire must be read before it
# is added here.
REVIEWED_FIRES = {"parallel_multiple_function_94", "parallel_multiple_function_79"}


@cache
def gate_quality() -> ModuleType:
    """``benchmarks/_gate_quality.py`` (the benchmarks folder is not a package)."""
    spec = importlib.util.spec_from_file_location(
        "guardtrace_benchmarks_gate_quality", REPO / "benchmarks" / "_gate_quality.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@cache
def real_messages() -> tuple:  # type: ignore[type-arg]
    try:
        return tuple(gate_quality().real_user_messages(realdata_dir()))
    except FileNotFoundError as exc:
        pytest.fail(str(exc))


def test_the_gate_fires_on_at_most_0_2_percent_of_real_user_messages() -> None:
    messages = real_messages()
    # 2,123 user messages with text in conversations.jsonl, 1,377 distinct BFCL questions.
    assert len(messages) == 3_500
    fires = [m for m in messages if default_gate().assess(m.text).should_reason]
    assert len(fires) <= gate_quality().TARGET_REAL_FIRE_RATE * len(messages)
    unreviewed = [(m.source, m.text[:200]) for m in fires
                  if m.source.rsplit("|", 1)[-1] not in REVIEWED_FIRES]
    assert not unreviewed, f"the gate fires on real messages no one has read: {unreviewed}"


def test_default_anchors_never_change_a_decision_on_real_text() -> None:
    # The anchors only skip regexes that cannot match: the bank without them decides
    # every real message and every question of the benchmark's sets the same way.
    quality = gate_quality()
    unanchored = CriticalityGate([dataclasses.replace(p, anchors=()) for p in DEFAULT_PATTERNS])
    texts = [m.text for m in real_messages()]
    texts += [q for questions in quality.POSITIVES.values() for q in questions]
    texts += list(quality.HARD_NEGATIVES)
    differ = [t[:120] for t in texts if default_gate().assess(t) != unanchored.assess(t)]
    assert not differ


def _halves(items: tuple[str, ...]) -> tuple[list[str], list[str]]:
    held = gate_quality().is_held_back
    return ([q for i, q in enumerate(items) if not held(i)],
            [q for i, q in enumerate(items) if held(i)])


def test_the_question_sets_are_large_and_cover_every_family() -> None:
    quality = gate_quality()
    assert set(quality.POSITIVES) == {"spelling", "counting", "containment", "length",
                                      "wordplay"}
    assert sum(map(len, quality.POSITIVES.values())) >= 80
    assert len(quality.HARD_NEGATIVES) >= 80
    for questions in (*quality.POSITIVES.values(), quality.HARD_NEGATIVES):
        tuning, held_back = _halves(questions)
        assert len(held_back) * 3 >= len(questions) - 2 and tuning


@pytest.mark.parametrize("half", [0, 1], ids=["tuning", "held back"])
def test_the_gate_meets_the_benchmark_targets_on_the_question_sets(half: int) -> None:
    quality = gate_quality()
    gate = default_gate()
    caught = asked = 0
    for family, questions in quality.POSITIVES.items():
        items = _halves(questions)[half]
        missed = [q for q in items if not gate.assess(q).should_reason]
        assert 1 - len(missed) / len(items) >= quality.TARGET_FAMILY_RECALL, (family, missed)
        caught += len(items) - len(missed)
        asked += len(items)
    assert caught / asked >= quality.TARGET_RECALL
    negatives = _halves(quality.HARD_NEGATIVES)[half]
    fired = [q for q in negatives if gate.assess(q).should_reason]
    assert len(fired) / len(negatives) <= quality.TARGET_HARD_NEGATIVE_FIRE_RATE, fired


def test_missing_real_data_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"conversations\.jsonl.*GUARDTRACE_REALDATA"):
        gate_quality().real_user_messages(tmp_path)
