"""The criticality gate on character-level questions and on real user messages.

``measure(report, realdata_dir, progress)`` is called by ``benchmarks/detection_quality.py``;
it adds tables, figures and targets to the report. The question sets below are the
project's own; the real user messages are third-party data read from ``realdata_dir``
(``shared/realdata``), never copied into this repository.

What is measured, exactly
-------------------------

* **Recall** on :data:`POSITIVES`: character-level questions in five families (spelling,
  counting, containment, length, wordplay), phrased as users write them (questions and
  imperatives, quoted and bare words, lower case, typos). A question counts as caught
  when the gate fires, whatever family it reports.
* **False fires** on :data:`HARD_NEGATIVES`: ordinary which/what/how-many questions and
  requests that share the vocabulary ("which flight is cheapest", "what letter grade
  did I get", "reverse the charge", "spell out the policy").
* **Tuning and held-back halves.** Both sets were written before the patterns; every
  third item (positions 2, 5, 8, ... of each list, :func:`is_held_back`) was held back:
  only its counts, never its misses, were looked at while the patterns were tuned. The
  same person wrote both, so the held-back figure is an estimate, not a blind test.
* **Real user messages** (:func:`real_user_messages`): the text of every ``user``
  message of ``conversations.jsonl`` (tau-bench, tau2-bench, SWE-agent) and every
  distinct ``question`` of ``bfcl.jsonl.gz``. None of them is a trick question, but a
  few are genuinely character-level tasks for a tool ("filter out the fruits that start
  with the letter 'b'"); every message the gate fires on is listed to be read.
* **Adversarial input**: the gate on 1 MB built from fragments of its own patterns
  (best of three runs); the patterns are linear, the gate reads a bounded window.

Targets, and why these limits
-----------------------------

* Real-message fire rate <= 0.002 (issue 11): on agent traffic the gate costs a forced
  ``reason`` call per fire, and noise there is what made the old bank useless.
* Recall >= 0.9 overall and >= 0.8 per family, on each half: a miss is a confident wrong
  answer to exactly the question the gate exists for. 0.8 of a held-back family of 7
  allows one miss.
* Hard-negative false-fire rate <= 0.03 on each half (one fire in the 34 held back).
* 1 MB of adversarial text <= 1000 ms (issue 11: "under 1 s" for any detector).

Long because the question sets it measures are data written out here, in the open.
"""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from guardtrace.collectors.questions.criticality import (
    CriticalityDecision,
    CriticalityGate,
    default_gate,
)

if TYPE_CHECKING:  # the tests load this module by path, without benchmarks/ on sys.path
    from _common import Report

__all__ = [
    "HARD_NEGATIVES",
    "POSITIVES",
    "RealMessage",
    "is_held_back",
    "measure",
    "real_user_messages",
]

TARGET_REAL_FIRE_RATE = 0.002
TARGET_RECALL = 0.9
TARGET_FAMILY_RECALL = 0.8
TARGET_HARD_NEGATIVE_FIRE_RATE = 0.03
TARGET_ADVERSARIAL_MS = 1000.0
_ADVERSARIAL_BYTES = 1 << 20
_EXCERPT_CHARS = 100

# -- the question sets (written for this benchmark) --------------------------------------
POSITIVES: dict[str, tuple[str, ...]] = {
    "spelling": (
        "How do you spell 'necessary'?",
        "how do u spell accommodate",
        'whats the correct spelling of "embarrass"',
        "Is it spelled 'definately' or 'definitely'?",
        "Which month is spelt with an X?",
        "spell rhythm for me",
        'Can you spell "onomatopoeia" letter by letter?',
        "What is the 4th letter of the word 'elephant'?",
        "what's the last letter of 'Mississippi'",
        "Tell me the second letter in the word queue.",
        "how is 'liaison' spelled",
        "What are the first three letters of 'xylophone'?",
        "Spell out 'Worcestershire' one letter at a time.",
        "Which weekday is spelled with a 'u'?",
        "how would you spell the plural of cactus",
        "is recieve spelled right?",
        "whats the 7th letter of supercalifragilisticexpialidocious",
        'Give me the middle letter of the word "level".',
        "what letter comes third in 'strength'?",
        "How do I spell Czechoslovakia?",
        "Spell the word 'bureaucracy'.",
    ),
    "containment": (
        "Is there any month whose name contains a Z?",
        "Which US state names start and end with the same letter?",
        "Does the word 'rhythm' have any vowels?",
        "which planets have the letter u in their name",
        "name a fruit that starts with Q",
        'Does "February" have an r in it?',
        "Is there a 'q' in Iraq?",
        "List the days of the week that contain the letter 'r'.",
        'Which countries end in the letter "y"?',
        "give me an animal whose name begins with x",
        "Which of these words doesn't contain an E: table, chair, sofa, lamp?",
        "Write a sentence without the letter e.",
        "Which number from one to ten has the letter 'o' in it?",
        'Are there any English words that end with "mt"?',
        'What letter does "pneumonia" start with?',
        "Which word has a double letter: cat, book, pen?",
        "what month names have no letter r",
        "Which planet's name begins with a vowel?",
        "Find me a 5-letter word that starts with 'cr' and ends with 'e'.",
        'Does the letter k appear in "knight"?',
        "name every US state that has a Z in it",
    ),
    "counting": (
        "How many r's are in strawberry?",
        "how many Rs in strawbery",
        'Count the letters in "antidisestablishmentarianism".',
        "how many vowels does 'rhythm' have",
        'How many syllables are there in "necessarily"?',
        'How many words are in this sentence: "the quick brown fox jumps over the lazy dog"?',
        "how many times does the letter s appear in mississippi",
        'count the number of e\'s in "excellence"',
        'What\'s the character count of "hello, world"?',
        "How many consonants are in the word 'strengths'?",
        "how many letters in the longest month name",
        'Can you count how many a\'s are in "banana"?',
        'How many characters is "supercalifragilistic"?',
        "number of vowels in 'encyclopedia'?",
        'How many times does the word "the" occur in this paragraph? '
        "The cat sat on the mat by the door.",
        'how many double letters are in "bookkeeper"',
        'Count the words in: "To be or not to be, that is the question."',
        "how many i's in 'Mississippi'?",
        'How many letter \'l\'s are in "parallel"?',
        "tally the vowels in 'queueing'",
        "what is the syllable count of 'February'?",
    ),
    "length": (
        "Which of these words has the most letters: apple, banana, kiwi?",
        "Which country has the longest name?",
        "what's the shortest word in this list: cat, elephant, ox, giraffe",
        'Is "Mississippi" longer than "Massachusetts"?',
        "Which month has the fewest letters?",
        "Which planet has the shortest name?",
        "Of red, orange, yellow and green, which has more letters?",
        "Name a US state with more than 12 letters.",
        "Sort these words by length: pear, pineapple, fig.",
        "how long is the word 'pneumonoultramicroscopicsilicovolcanoconiosis'",
        "Which day of the week has the longest name?",
        'Do "listen" and "silent" have the same number of letters?',
        "give me a 7-letter word for happy",
        "what's the longest word you can type with only the left hand",
        "Which of the following has the most vowels: education, sequoia, rhythm?",
        "is 'queue' shorter than 'quiet' in letters?",
        "Name the US state with the shortest name.",
        "Which word has more syllables, 'banana' or 'orange'?",
        "How many letters long is 'Constantinople'?",
        "What's the longest English word without a vowel?",
        "list three words that are exactly 9 letters long",
    ),
    "wordplay": (
        "Spell 'necessary' backwards",
        'what is "stressed" spelled backwards?',
        "Reverse the word 'desserts'.",
        "write hello world in reverse letter order",
        'Is "racecar" a palindrome?',
        "give me an anagram of listen",
        "Unscramble these letters: t-a-c-o-l",
        "Put these words in alphabetical order: zebra, apple, mango, kiwi.",
        'Which comes first alphabetically, "Zambia" or "Zaire"?',
        "alphabetize: banana, Apple, cherry",
        "What letter comes after P in the alphabet?",
        'Can you reverse the string "OpenAI"?',
        "What do you get if you read 'drawer' backwards?",
        "are 'dormitory' and 'dirty room' anagrams?",
        'Write the first letter of each word in "portable network graphics".',
        "rot13 encode 'hello'",
        "what's the 10th letter of the alphabet",
        'Rearrange the letters of "earth" to make another word.',
        "Replace every vowel in 'banana' with an x.",
        "find the palindromes in this list: level, lever, noon, moon",
        "List the US states in reverse alphabetical order.",
    ),
}

HARD_NEGATIVES: tuple[str, ...] = (
    "How many bags can I bring?",
    "Which flight is cheapest?",
    "What letter grade did I get in chemistry?",
    "Which file is the config?",
    "What year was the tower built?",
    "which flight is cheaper?",
    "How many passengers are on my reservation?",
    "What's the longest flight you have to Tokyo?",
    "Which seat has the most legroom?",
    "Can you reverse the charge on my card?",
    "Please spell out the cancellation policy for me.",
    "How many words should my cover letter be?",
    "What is the first name on the booking?",
    "Which planet is closest to the sun?",
    "How many times do I have to call before someone helps me?",
    "Count the number of open tickets assigned to me.",
    "what state is denver in",
    "Which of these hotels has the most reviews?",
    "What's the shortest route from Boston to Miami?",
    "How many characters can a tweet have?",
    "Send a letter to the customer about the refund.",
    "Which letters do I need to bring to the embassy?",
    "Does my reservation contain travel insurance?",
    "My confirmation code starts with a lot of numbers, is that normal?",
    "The meeting starts with a demo, then Q&A.",
    "How long is the layover in Denver?",
    "What is the name of the longest river in Africa?",
    "Sort the tickets by priority.",
    "Which word processor should I use for my thesis?",
    'What does the word "nonrefundable" mean on my ticket?',
    "How many users signed up yesterday?",
    "Which one is better?",
    "Reverse the last transaction on account 4471.",
    "Can you go back to the previous page?",
    "Which reservation has the earliest departure?",
    "What is the capital of Australia?",
    "How many items are in my cart?",
    "Count the rows in the orders table.",
    "How many lines of code is the repo?",
    "Which function returns the user id?",
    "What's the reservation number for my trip to Seattle?",
    "Which of my flights has the longest layover?",
    "Please add my middle initial to the ticket.",
    "how many checked bags are free for gold members",
    "What color is the sky on Mars?",
    "Which month has 31 days?",
    "What day of the week is Christmas this year?",
    "How many weeks until my flight?",
    "Which payment method did I use?",
    "Update the passenger name to match the passport.",
    "My last name is Smith.",
    "What's the word on the delay?",
    "Give me a word of advice on packing.",
    "Spell check is broken in the editor, can you fix it?",
    "Which character in the show is the villain?",
    "What is the character limit for the bio field?",
    "How many players are on a soccer team?",
    "What is the order of operations in math?",
    "List the employees in order of seniority.",
    "Can you undo the cancellation?",
    "How many stops does the flight make?",
    "Which terminal does my flight leave from?",
    "What's the maximum number of passengers per booking?",
    "How many times has my flight been delayed this month?",
    "What's the fastest way to get to JFK?",
    "what is the status of my order",
    "Which of these three laptops has the most RAM?",
    "What are the first three steps to reset my router?",
    "Restart the phone and tell me if the signal comes back.",
    "How many bars of signal do I need for data?",
    "What's the name of the agent who helped me?",
    "Which airline has the most on-time flights?",
    "The story starts with a bang.",
    "We start with the basics and end with a quiz.",
    "What does the letter of credit cover?",
    "Please send me a cover letter template.",
    "Is this word document saved?",
    "Which words in the contract are legally binding?",
    "How many pages is the report?",
    "Count me in for the trip.",
    "What is the longest-running show on Broadway?",
    "How many calories are in a banana?",
    "what's the shortest time to get a passport renewed",
    "which version of python has f-strings",
    "In what order should I install the packages?",
    "Can you put the meeting notes in chronological order?",
    "How many emails did I get today?",
    "Which name should I put on the ticket, my maiden name or married name?",
    "What is the first item on the agenda?",
    "what was the last thing I ordered",
    "Cancel all reservations that start after May 20.",
    "Find all flights that end in Chicago.",
    "Which of your plans has the most data?",
    "What's the airport code for Seattle?",
    "How many miles is it from New York to Boston?",
    "Which is bigger, the Pacific or the Atlantic?",
    "Name three famous painters from Spain.",
    "What time does the store open?",
    "Which city has the largest population in Texas?",
    "Does the hotel have a pool?",
    "Can you reverse engineer this binary?",
    "What are the terms of the letter agreement?",
)


def is_held_back(position: int) -> bool:
    """Whether the item at ``position`` of a list was held back from tuning."""
    return position % 3 == 2


def _halves(items: Sequence[str]) -> tuple[list[str], list[str]]:
    tuning = [q for i, q in enumerate(items) if not is_held_back(i)]
    held = [q for i, q in enumerate(items) if is_held_back(i)]
    return tuning, held


# -- real user messages --------------------------------------------------------------------
@dataclass(frozen=True)
class RealMessage:
    """One real user message: where it comes from, and its text.

    Attributes:
        source: ``conversations:<conv id>#<message index>`` or ``bfcl:<first output id>``.
        text: The message text.
    """

    source: str
    text: str


def _data_file(realdata_dir: Path, name: str) -> Path:
    path = realdata_dir / name
    if not path.is_file():
        raise FileNotFoundError(f"real agent data not found at {path}: set GUARDTRACE_REALDATA "
                                f"to the folder holding {name}")
    return path


def _conversation_messages(path: Path) -> Iterator[RealMessage]:
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            conversation = json.loads(line)
            for index, message in enumerate(conversation["messages"]):
                # tau2 telecom users operate their phone: those messages are tool calls
                # with no text, and there is no question in them.
                if message.get("role") == "user" and isinstance(message.get("content"), str):
                    yield RealMessage(f"conversations:{conversation['id']}#{index}",
                                      message["content"])


def _bfcl_questions(path: Path) -> Iterator[RealMessage]:
    seen: set[str] = set()
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            # 41 models answered the same questions: each question is one message.
            if record["question"] not in seen:
                seen.add(record["question"])
                yield RealMessage(f"bfcl:{record['id']}", record["question"])


def real_user_messages(realdata_dir: Path) -> list[RealMessage]:
    """Every real user message of the dev data, in file order.

    The text of every ``user`` message of ``conversations.jsonl`` (2,123; the 86 without
    text are tau2 telecom users' own tool calls) and every distinct ``question`` of
    ``bfcl.jsonl.gz`` (1,377): 3,500 messages.

    Raises:
        FileNotFoundError: A file is missing, named with the variable that sets the folder.
    """
    conversations = _data_file(realdata_dir, "conversations.jsonl")
    bfcl = _data_file(realdata_dir, "bfcl.jsonl.gz")
    return [*_conversation_messages(conversations), *_bfcl_questions(bfcl)]


# -- adversarial input -------------------------------------------------------------------
# Fragments of the gate's own patterns: openings that make a pattern start matching and
# then fail, quotes and apostrophes, letters that end clauses, whitespace runs.
_ADVERSARIAL_FRAGMENTS = (
    "how many ", "how many letters are in the ", "count the ", "number of ", "spell ",
    "how do you ", "spelled ", "the letter a ", "letters ", "starts with ", "with a ",
    "first letter is ", "'a' ", "'a", "'abc'x", "\"", "'s ", "a-", "1st ", "words by ",
    "reverse the ", "backwards ", "swap 'a' and ", "in the alphabet ", "is there a ",
    "the word ", "to start with ", "id ", "longest ", "how often does ", "\n", "\t  ",
    "x", "?", ".",
)


def _adversarial_text(size: int) -> str:
    """``size`` characters of the fragments above, repeated in turn."""
    unit = "".join(_ADVERSARIAL_FRAGMENTS)
    return (unit * (size // len(unit) + 1))[:size]


def _best_of_three_ms(gate: CriticalityGate, text: str) -> float:
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        gate.assess(text)
        best = min(best, time.perf_counter() - started)
    return best * 1000.0


# -- the measurement -----------------------------------------------------------------------
_HALVES = ("tuning", "held back")


def _key(half: str) -> str:
    return half.replace(" ", "_")


def _measure_positives(report: Report, gate: CriticalityGate) -> None:
    rows: list[list[object]] = []
    missed: list[list[object]] = []
    caught = dict.fromkeys(_HALVES, 0)
    asked = dict.fromkeys(_HALVES, 0)
    for family, questions in POSITIVES.items():
        row: list[object] = [family]
        for half, items in zip(_HALVES, _halves(questions), strict=False):
            hits = [gate.assess(q).should_reason for q in items]
            missed += [[f"missed ({family}, {half})", q] for q, hit in zip(items, hits, strict=False) if not hit]
            recall = sum(hits) / len(items)
            row += [f"{sum(hits)}/{len(items)}", recall]
            caught[half] += sum(hits)
            asked[half] += len(items)
            report.figures[f"gate_recall_{family}_{_key(half)}"] = round(recall, 4)
            report.target(f"gate recall, {family}, {half}", recall, ">=", TARGET_FAMILY_RECALL)
        rows.append(row)
    total: list[object] = ["all families"]
    for half in _HALVES:
        recall = caught[half] / asked[half]
        total += [f"{caught[half]}/{asked[half]}", recall]
        report.figures[f"gate_recall_{_key(half)}"] = round(recall, 4)
        report.target(f"gate recall, all families, {half}", recall, ">=", TARGET_RECALL)
    report.table("criticality gate: character-level questions caught",
                 ["family", "tuning", "recall", "held back", "recall"], [*rows, total])
    if missed:
        report.table("criticality gate: positives missed", ["what", "question"], missed)


def _measure_hard_negatives(report: Report, gate: CriticalityGate) -> None:
    rows: list[list[object]] = []
    fired: list[list[object]] = []
    for half, items in zip(_HALVES, _halves(HARD_NEGATIVES), strict=False):
        fires = [q for q in items if gate.assess(q).should_reason]
        fired += [[f"fired ({half})", q] for q in fires]
        rate = len(fires) / len(items)
        rows.append([half, len(items), len(fires), rate])
        report.figures[f"gate_hard_negative_fire_rate_{_key(half)}"] = round(rate, 4)
        report.target(f"gate hard-negative fire rate, {half}", rate, "<=",
                      TARGET_HARD_NEGATIVE_FIRE_RATE)
    report.table("criticality gate: hard negatives (ordinary questions)",
                 ["half", "questions", "fired", "rate"], rows)
    if fired:
        report.table("criticality gate: hard negatives fired on", ["what", "question"], fired)


def _excerpt(gate: CriticalityGate, decision: CriticalityDecision, text: str) -> str:
    """The text around what the trigger pattern matched, on one line (from the start
    when curly quotes, which the gate straightens first, keep the raw text from matching)."""
    pattern = next(p for p in gate.patterns if p.regex == decision.trigger_pattern)
    match = pattern.compiled.search(text)
    start = max(0, match.start() - _EXCERPT_CHARS // 2) if match else 0
    return " ".join(text[start:start + _EXCERPT_CHARS].split())


def _measure_real_messages(report: Report, gate: CriticalityGate,
                           messages: Sequence[RealMessage]) -> int:
    counts: dict[str, list[int]] = {}  # source -> [messages, fires]
    fires: list[list[object]] = []
    for message in messages:
        source = message.source.split(":", 1)[0]
        tally = counts.setdefault(source, [0, 0])
        tally[0] += 1
        decision = gate.assess(message.text)
        if decision.should_reason:
            tally[1] += 1
            fires.append([message.source, decision.family, _excerpt(gate, decision, message.text)])
    rate = len(fires) / len(messages)
    report.table("criticality gate: real user messages", ["source", "messages", "fired", "rate"],
                 [[source, n, f, f / n] for source, (n, f) in counts.items()]
                 + [["all", len(messages), len(fires), rate]])
    if fires:
        # To be read by hand: a fire on a message that truly is a character-level task
        # (a list filtered by first letter, a string reversed) is right.
        report.table("criticality gate: the real messages it fired on",
                     ["message", "family", "text"], fires)
    report.figures["gate_real_messages"] = len(messages)
    report.figures["gate_real_fires"] = len(fires)
    report.figures["gate_real_fire_rate"] = round(rate, 5)
    report.target("gate fire rate on real user messages", rate, "<=", TARGET_REAL_FIRE_RATE)
    return len(fires)


def measure(report: Report, realdata_dir: Path, progress: Callable[[str], None]) -> None:
    """Measure the criticality gate; add tables, figures and targets to ``report``.

    Args:
        report: The benchmark report to add to.
        realdata_dir: The folder holding ``conversations.jsonl`` and ``bfcl.jsonl.gz``.
        progress: Called with a progress message after each stage.

    Raises:
        FileNotFoundError: A data file is missing.
    """
    gate = default_gate()
    _measure_positives(report, gate)
    _measure_hard_negatives(report, gate)
    progress(f"gate: {sum(map(len, POSITIVES.values()))} positives and "
             f"{len(HARD_NEGATIVES)} hard negatives assessed")

    messages = real_user_messages(realdata_dir)
    fires = _measure_real_messages(report, gate, messages)
    progress(f"gate: fired on {fires} of {len(messages):,} real user messages")

    adversarial_ms = _best_of_three_ms(gate, _adversarial_text(_ADVERSARIAL_BYTES))
    report.figures["gate_adversarial_1mb_ms"] = round(adversarial_ms, 1)
    report.target("gate on 1 MB of adversarial text", adversarial_ms, "<=",
                  TARGET_ADVERSARIAL_MS, "ms")
    progress(f"gate: 1 MB of adversarial text in {adversarial_ms:.0f} ms")
