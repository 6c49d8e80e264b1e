"""Every redaction rule, and the fabrication detector's quoted-region mask, runs in time
linear in its input: four times the adversarial input must not cost sixteen times.

Ratios only, no absolute times: each input is timed at n and 4n characters, best of a
few runs, and t(4n)/t(n) must stay under 8 (linear is 4, quadratic 16: a factor of 2
either side, so the noise of a shared 2-core machine does not decide it; at 2n the two
sat too close, and a loaded run failed a linear rule). A pair too fast to time (under a
millisecond at 4n) is linear as far as this machine can tell; a ratio over the bound is
timed again, more times, before it fails.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from guardtrace.collectors.emit import redaction
from guardtrace.collectors.emit.redaction import Redactor
from guardtrace.collectors.emit.secret_rules import RE2_AVAILABLE, build_rules
from guardtrace.collectors.replies.claims import mask_quoted
from tests.support.timing import cpu_seconds
from tests.unit.test_redaction_quality import cases

N = 64 * 1024
GROWTH = 4
RATIO_BOUND = 8.0
MEASURABLE_S = 0.001


def _best(fn: Callable[[str], object], text: str, repeats: int) -> float:
    return cpu_seconds(lambda: fn(text), repeats)


def _ratio(fn: Callable[[str], object], small: str, large: str, repeats: int) -> float | None:
    t_small, t_large = _best(fn, small, repeats), _best(fn, large, repeats)
    if t_large < MEASURABLE_S:
        return None
    return t_large / max(t_small, 1e-9)


def _assert_linear(fn: Callable[[str], object], label: str) -> None:
    small, large = cases().adversarial(N), cases().adversarial(GROWTH * N)
    for name in small:
        ratio = _ratio(fn, small[name], large[name], 3)
        if ratio is not None and ratio >= RATIO_BOUND:
            ratio = _ratio(fn, small[name], large[name], 7)
        assert ratio is None or ratio < RATIO_BOUND, (
            f"{label} on {name!r}: x{ratio:.2f} time for x{GROWTH} input")


def _rule_runner(rule_name: str, use_re2: bool) -> Callable[[str], object]:
    rules = build_rules(use_re2)
    redactor = Redactor(rules={rule_name: rules[rule_name]})
    one = redactor._rule_set()
    # The rule over the whole text, without the slicing that bounds long texts.
    return lambda text: redactor._run(text, one)


@pytest.mark.parametrize("rule", list(build_rules(False)))
def test_each_default_rule_is_linear_stdlib(rule: str) -> None:
    _assert_linear(_rule_runner(rule, False), rule)


# Inputs aimed at paths the shared adversarial set reaches little or not at all: a decision
# for every user:password pair, session cookie, symbol tail or mixed-case hex token, runs
# cut at their length bound, and look backs at their bound.
PATH_INPUTS = {
    "url_password": ["ab:Pa55w0rd!x ", "a:bbbbbbbb:", "a:" + "b" * 130 + " ", '":d2LkV78zLx!t" ',
                     "a" * 70 + ":Pa55w0rd!x "],
    "cookie": ["_session=", "x_session=a1b2c3d4e5f6g7h8 ", "sessid=" + "a1" * 600 + " "],
    "high_entropy": ["aB3dE5fG7hJ9kL1mN#", "aB3dE5fG7hJ9kL1mN#x!1 ", "6d2FabeB6ADd229Bc199 "],
    "api_key_shape": ["e2b_" + "0a" * 20 + " ", "lsv2_pt_" + "0a" * 40],
}


def _repeat(unit: str, n: int) -> str:
    return (unit * (n // len(unit) + 1))[:n]


@pytest.mark.parametrize(("rule", "unit"),
                         [(rule, unit) for rule, units in PATH_INPUTS.items() for unit in units])
def test_pair_cookie_symbol_and_hex_paths_are_linear(rule: str, unit: str) -> None:
    run = _rule_runner(rule, False)
    small, large = _repeat(unit, N), _repeat(unit, GROWTH * N)
    ratio = _ratio(run, small, large, 3)
    if ratio is not None and ratio >= RATIO_BOUND:
        ratio = _ratio(run, small, large, 7)
    assert ratio is None or ratio < RATIO_BOUND, (
        f"{rule} on {unit[:20]!r}...: x{ratio:.2f} time for x{GROWTH} input")


@pytest.mark.skipif(not RE2_AVAILABLE, reason="google-re2 not installed")
@pytest.mark.parametrize("rule", ["api_key", "api_key_shape", "secret_assignment", "high_entropy"])
def test_rules_located_by_re2_are_linear(rule: str) -> None:
    _assert_linear(_rule_runner(rule, True), rule)


@pytest.mark.parametrize("bare_ids", [False, True])
def test_whole_redactor_is_linear(bare_ids: bool) -> None:
    _assert_linear(Redactor(bare_ids=bare_ids).redact_counted, "Redactor")


def test_slices_bound_a_quadratic_user_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    # A backtracking rule is quadratic in what it sees; sliced, it sees SLICE_CHARS at
    # most, so a long text costs linear time (smaller slices keep the test quick).
    monkeypatch.setattr(redaction, "SLICE_CHARS", 2048)
    redactor = Redactor(rules={"backtracking": r"a*b"})
    small, large = "a" * (16 * 2048), "a" * (GROWTH * 16 * 2048)
    ratio = _ratio(redactor.redact_counted, small, large, 3)
    if ratio is not None and ratio >= RATIO_BOUND:
        ratio = _ratio(redactor.redact_counted, small, large, 7)
    assert ratio is None or ratio < RATIO_BOUND


def test_quoted_region_mask_is_linear() -> None:
    _assert_linear(mask_quoted, "mask_quoted")
