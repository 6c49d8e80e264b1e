"""The alert rules file: ``[[rule]]`` and ``[[webhook]]`` tables in one TOML file.

.. code-block:: toml

    [[webhook]]
    name = "oncall"
    url_env = "ONCALL_SLACK_WEBHOOK"   # or url = "https://..."
    format = "slack"                   # {"text": ...}; "json" (the default): every field

    [[rule]]
    name = "fabrications-up"
    metric = "fabrication_rate"
    module = "replies"
    above = 0.2                        # or below = ..., or above_baseline = 3.0
    window = "10m"
    min_volume = 50
    for = "5m"
    notify = ["oncall"]

The whole file is validated when it is loaded, before anything runs: every problem is
collected, each naming the rule (by name, and by position when the name itself is the
problem) or the webhook and the field, and an unknown field is a problem, not ignored
(a misspelt ``min_volum`` would otherwise let one request fire an alert).
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import urlparse

from ..schemas.environment_variables import ConfigError
from .durations import format_duration, parse_duration
from .metrics import METRICS, MODULES, RATE_BOUNDED, MetricSpec

__all__ = ["DEFAULT_FOR_S", "DEFAULT_MIN_VOLUME", "DEFAULT_WINDOW_S", "AlertRulesError",
           "Condition", "Rule", "RuleSet", "Webhook", "load_rules", "parse_rules"]

DEFAULT_WINDOW_S: Final = 300.0
DEFAULT_FOR_S: Final = 300.0
DEFAULT_MIN_VOLUME: Final = 20
# The rates come from a per-minute rollup: a shorter window would still count whole minutes.
_MIN_WINDOW_S: Final = 60.0

ConditionKind = Literal["above", "below", "above_baseline"]
WebhookFormat = Literal["slack", "json"]
_CONDITIONS: Final[tuple[ConditionKind, ...]] = ("above", "below", "above_baseline")
_FORMATS: Final[tuple[WebhookFormat, ...]] = ("slack", "json")
_RULE_FIELDS: Final = ("name", "metric", "description", "module", "per_module", *_CONDITIONS,
                       "baseline_window", "window", "min_volume", "for", "clear_for", "notify")
_WEBHOOK_FIELDS: Final = ("name", "url", "url_env", "format", "headers")
# Rule and webhook names appear in messages, notifications and the dashboard: plain ones.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,199}")
# A module label as agents set it: any printable text but blank, within a sane length.
_MODULE = re.compile(r"[^\x00-\x1f\x7f]{1,200}")


class AlertRulesError(ConfigError):
    """The rules file cannot be used; every problem names its rule or webhook and field.

    Attributes:
        source: The file (or what the text came from).
        problems: One line per problem.
    """

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = list(problems)
        if len(problems) == 1:
            text = f"alert rules {source}: {problems[0]}"
        else:
            text = (f"alert rules {source} have {len(problems)} problems:\n  "
                    + "\n  ".join(problems))
        super().__init__(text)


@dataclass(frozen=True)
class Webhook:
    """Where notifications go: a URL, and the body's shape.

    Attributes:
        format: ``slack`` posts ``{"text": ...}`` (Slack, Mattermost, Google Chat and
            most chat tools take it); ``json`` posts every field of the notification.
        headers: Sent with every request (an ``Authorization`` header, say).
    """

    name: str
    url: str
    format: WebhookFormat = "json"
    headers: tuple[tuple[str, str], ...] = ()
    url_env: str = ""  # the variable the URL was read from, if any

    @property
    def display(self) -> str:
        """The name and host, never the whole URL (a Slack URL's path is its secret)."""
        if not self.url:
            return f"{self.name} (${self.url_env})"
        parsed = urlparse(self.url)
        host = parsed.hostname or "?"
        return f"{self.name} ({host}{f':{parsed.port}' if parsed.port else ''})"


@dataclass(frozen=True)
class Condition:
    """When a rule's metric is bad.

    Attributes:
        kind: ``above`` or ``below`` a fixed bound, or ``above_baseline``: above
            ``value`` times the metric over the ``baseline_window_s`` before the window.
        value: The bound, or the factor.
    """

    kind: ConditionKind
    value: float
    baseline_window_s: float | None = None

    def describe(self) -> str:
        if self.kind == "above_baseline":
            return (f"above {self.value:g}x its baseline (the "
                    f"{format_duration(self.baseline_window_s or 0)} before)")
        return f"{self.kind} {self.value:g}"

    def threshold(self, baseline: float | None) -> float | None:
        """The bound the value is compared with (None: a baseline that is not known)."""
        if self.kind != "above_baseline":
            return self.value
        return None if baseline is None else self.value * baseline

    def holds(self, value: float, threshold: float) -> bool:
        return value < threshold if self.kind == "below" else value > threshold


@dataclass(frozen=True)
class Rule:
    """One alert rule, validated.

    Attributes:
        window_s: Seconds the metric is measured over (None for a gauge).
        module: One module's events only (rates), or None for all together. A module is
            the ``module`` label the hooks set: the guard family's name (planning,
            replies, verification) unless the agent names its own.
        per_module: One alert per module (rates): each module seen is its own label set.
        min_volume: The rate's denominator must reach this before the condition can hold
            (None for counts and gauges).
        for_s: How long the condition must hold before the alert fires.
        clear_for_s: How long it must stay clear before a firing alert resolves.
        notify: Names of the webhooks told when it fires and when it resolves.
    """

    name: str
    metric: str
    condition: Condition
    window_s: float | None = DEFAULT_WINDOW_S
    module: str | None = None
    per_module: bool = False
    min_volume: int | None = None
    for_s: float = DEFAULT_FOR_S
    clear_for_s: float = DEFAULT_FOR_S
    notify: tuple[str, ...] = ()
    description: str = ""

    @property
    def spec(self) -> MetricSpec:
        return METRICS[self.metric]

    def describe(self) -> str:
        """``fabrication_rate over 10m above 0.2 (min volume 50 requests seen)``."""
        text = self.metric
        if self.window_s is not None:
            text += f" over {format_duration(self.window_s)}"
        text += f" {self.condition.describe()}"
        if self.min_volume is not None:
            text += f" (min volume {self.min_volume} {self.spec.volume})"
        return text


@dataclass(frozen=True)
class RuleSet:
    """Every rule and webhook of one file."""

    rules: tuple[Rule, ...]
    webhooks: tuple[Webhook, ...]
    source: str

    def targets(self, rule: Rule) -> list[Webhook]:
        """The webhooks ``rule`` notifies (validated to exist)."""
        by_name = {hook.name: hook for hook in self.webhooks}
        return [by_name[name] for name in rule.notify]


def load_rules(path: str | os.PathLike[str], environ: Mapping[str, str] | None = None,
               *, read_urls: bool = True) -> RuleSet:
    """Read and validate the rules file at ``path``.

    Args:
        environ: Where a webhook's ``url_env`` is looked up (default: this process's
            environment).
        read_urls: Look ``url_env`` up (False: a reader that only shows the rules, such as
            the dashboard, which need not hold the webhooks' secrets; those webhooks then
            have an empty ``url``).

    Raises:
        AlertRulesError: the file cannot be read, is not TOML, or has problems (all of
            them listed).
    """
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AlertRulesError(source, [f"cannot be read: {exc}"]) from None
    return parse_rules(text, source, environ, read_urls=read_urls)


def parse_rules(text: str, source: str = "<text>", environ: Mapping[str, str] | None = None,
                *, read_urls: bool = True) -> RuleSet:
    """Validate rules given as TOML text (see :func:`load_rules`)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise AlertRulesError(source, [f"is not valid TOML: {exc}"]) from None
    problems: list[str] = []
    for key in data:
        if key not in ("rule", "webhook"):
            problems.append(f"top level, field {key!r}: unknown (a rules file holds [[rule]] "
                            "and [[webhook]] tables)")
    raw_hooks = _tables(data, "webhook", problems)
    webhooks = tuple(hook for index, raw in enumerate(raw_hooks, 1)
                     if (hook := _webhook(raw, index, problems, environ, read_urls)) is not None)
    # Named even when the webhook has a problem of its own: a rule that notifies it is
    # not wrong too.
    names = _unique_names("webhook", [raw["name"] for raw in raw_hooks if isinstance(raw, dict)
                                      and isinstance(raw.get("name"), str)], problems)
    raw_rules = _tables(data, "rule", problems)
    if not raw_rules and "rule" not in data:
        problems.append("no [[rule]] tables: the file defines no alerts")
    rules = tuple(rule for index, raw in enumerate(raw_rules, 1)
                  if (rule := _rule(raw, index, problems, names)) is not None)
    _unique_names("rule", [rule.name for rule in rules], problems)
    if problems:
        raise AlertRulesError(source, problems)
    return RuleSet(rules, webhooks, source)


def _tables(data: dict[str, Any], key: str, problems: list[str]) -> list[Any]:
    found = data.get(key, [])
    if not isinstance(found, list):
        problems.append(f"top level, field {key!r}: write [[{key}]] (a list of tables), "
                        f"not [{key}] or {key} = ...")
        return []
    return found


def _unique_names(what: str, found: list[str], problems: list[str]) -> set[str]:
    seen: set[str] = set()
    for name in found:
        if name in seen:
            problems.append(f"{what} {name!r}: the name is used by more than one {what}")
        seen.add(name)
    return seen


class _Fields:
    """One table's fields, read with their problems named: ``rule 'x' (#2), field 'y': ...``."""

    def __init__(self, kind: str, index: int, raw: dict[str, Any], allowed: tuple[str, ...],
                 problems: list[str]) -> None:
        self.raw = raw
        self.problems = problems
        name = raw.get("name")
        self.where = (f"{kind} {name!r} (#{index})" if isinstance(name, str) and name
                      else f"{kind} #{index}")
        for key in raw:
            if key not in allowed:
                self.problem(key, f"unknown field (expected one of: {', '.join(allowed)})")

    def problem(self, field: str, message: str) -> None:
        self.problems.append(f"{self.where}, field {field!r}: {message}")

    def given(self, field: str) -> bool:
        return field in self.raw

    def name(self) -> str | None:
        value = self.raw.get("name")
        if value is None:
            self.problem("name", "required")
        elif not isinstance(value, str) or not _NAME.fullmatch(value):
            self.problem("name", "must be 1-100 letters, digits and . _ : - (starting with a "
                         f"letter or digit), got {value!r}")
        else:
            return value
        return None

    def text(self, field: str, default: str | None = None) -> str | None:
        value = self.raw.get(field, default)
        if value is not None and not isinstance(value, str):
            self.problem(field, f"expected a string, got {value!r}")
            return None
        return value

    def choice(self, field: str, choices: tuple[str, ...], default: str | None = None,
               ) -> str | None:
        value = self.text(field, default)
        if value is not None and value not in choices:
            self.problem(field, f"must be one of {', '.join(choices)}, got {value!r}")
            return None
        return value

    def number(self, field: str) -> float | None:
        value = self.raw.get(field)
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value):
            self.problem(field, f"expected a number, got {value!r}")
            return None
        return float(value)

    def integer(self, field: str, default: int, minimum: int) -> int | None:
        value = self.raw.get(field, default)
        if isinstance(value, bool) or not isinstance(value, int):
            self.problem(field, f"expected a whole number, got {value!r}")
            return None
        if value < minimum:
            self.problem(field, f"must be at least {minimum}, got {value}")
            return None
        return value

    def boolean(self, field: str) -> bool | None:
        value = self.raw.get(field, False)
        if not isinstance(value, bool):
            self.problem(field, f"expected true or false, got {value!r}")
            return None
        return value

    def duration(self, field: str, default: float, minimum: float = 0.0) -> float | None:
        value = self.raw.get(field)
        if value is None:
            return default
        if not isinstance(value, str):
            self.problem(field, f"expected a duration in quotes such as \"90s\", \"15m\", "
                         f"\"1h\" or \"1d\", got {value!r}")
            return None
        try:
            seconds = parse_duration(value)
        except ValueError as exc:
            self.problem(field, str(exc))
            return None
        if seconds < minimum:
            self.problem(field, f"must be at least {format_duration(minimum)}, got {value!r}")
            return None
        return seconds

    def names(self, field: str) -> tuple[str, ...] | None:
        value = self.raw.get(field, [])
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            self.problem(field, f"expected a list of names such as [\"oncall\"], got {value!r}")
            return None
        return tuple(value)

    def not_for(self, fields: tuple[str, ...], why: str) -> None:
        for field in fields:
            if self.given(field):
                self.problem(field, why)


def _rule(raw: Any, index: int, problems: list[str], webhooks: set[str]) -> Rule | None:
    if not isinstance(raw, dict):
        problems.append(f"rule #{index}: expected a table of fields, got {raw!r}")
        return None
    fields = _Fields("rule", index, raw, _RULE_FIELDS, problems)
    count = len(problems)
    name = fields.name()
    metric = fields.choice("metric", tuple(METRICS))
    if metric is None and not fields.given("metric"):
        fields.problem("metric", f"required, one of {', '.join(METRICS)}")
    description = fields.text("description", "") or ""
    notify = fields.names("notify")
    for target in notify or ():
        if target not in webhooks:
            fields.problem("notify", f"names webhook {target!r}, which no [[webhook]] defines"
                           + (f" (defined: {', '.join(sorted(webhooks))})" if webhooks else ""))
    if notify is not None and len(set(notify)) != len(notify):
        fields.problem("notify", "names a webhook more than once")
    for_s = fields.duration("for", DEFAULT_FOR_S)
    clear_for_s = fields.duration("clear_for", for_s if for_s is not None else DEFAULT_FOR_S)
    if metric is None:
        # Still read what can be judged without the metric, so one run names it all.
        fields.duration("window", DEFAULT_WINDOW_S, minimum=_MIN_WINDOW_S)
        for kind in _CONDITIONS:
            if fields.given(kind):
                fields.number(kind)
        return None
    spec = METRICS[metric]
    window_s = _window(fields, spec)
    condition = _condition(fields, spec, window_s)
    module, per_module, min_volume = _scope(fields, spec)
    if len(problems) > count or name is None or condition is None:
        return None
    assert for_s is not None and clear_for_s is not None and notify is not None
    return Rule(name=name, metric=metric, condition=condition, window_s=window_s,
                module=module, per_module=bool(per_module), min_volume=min_volume,
                for_s=for_s, clear_for_s=clear_for_s, notify=notify, description=description)


def _window(fields: _Fields, spec: MetricSpec) -> float | None:
    if not spec.windowed:
        fields.not_for(("window",), f"{spec.name} is read as it is now, over no window")
        return None
    return fields.duration("window", DEFAULT_WINDOW_S, minimum=_MIN_WINDOW_S)


def _condition(fields: _Fields, spec: MetricSpec, window_s: float | None) -> Condition | None:
    given = [kind for kind in _CONDITIONS if fields.given(kind)]
    if not given:
        fields.problem("above", "a condition is required: above, below or above_baseline")
        return None
    if len(given) > 1:
        fields.problem(given[1], f"give one condition, not {' and '.join(given)}")
        return None
    kind = given[0]
    value = fields.number(kind)
    baseline_window_s = None
    if kind == "above_baseline":
        if not spec.windowed:
            fields.problem(kind, f"{spec.name} is read as it is now and has no history to "
                           "compare with: use above or below")
            return None
        if value is not None and value <= 1:
            fields.problem(kind, f"a factor above 1 is needed (the rule holds when the metric "
                           f"is above this many times its baseline), got {value:g}")
            value = None
        if not fields.given("baseline_window"):
            fields.problem("baseline_window", "required with above_baseline: how far back the "
                           "baseline is measured, e.g. \"1d\"")
            return None
        baseline_window_s = fields.duration("baseline_window", 0.0)
        if baseline_window_s is not None and window_s is not None \
                and baseline_window_s <= window_s:
            fields.problem("baseline_window", f"must be longer than the window "
                           f"({format_duration(window_s)})")
            baseline_window_s = None
        if baseline_window_s is None:
            return None
    else:
        fields.not_for(("baseline_window",), "only with above_baseline")
        if value is not None and value < 0:
            fields.problem(kind, f"must be 0 or more, got {value:g}")
            value = None
        elif value is not None and kind == "below" and value == 0:
            fields.problem(kind, "below 0 can never hold")
            value = None
        elif value is not None and kind == "above" and spec.name in RATE_BOUNDED \
                and value >= 1:
            fields.problem(kind, f"{spec.name} is at most 1, so above {value:g} can never hold")
            value = None
        elif value is not None and kind == "below" and spec.name in RATE_BOUNDED \
                and value > 1:
            fields.problem(kind, f"{spec.name} is at most 1, so below {value:g} always holds")
            value = None
    if value is None:
        return None
    return Condition(kind, value, baseline_window_s)


def _scope(fields: _Fields, spec: MetricSpec) -> tuple[str | None, bool | None, int | None]:
    if spec.kind != "rate":
        rates = ", ".join(name for name, other in METRICS.items() if other.kind == "rate")
        fields.not_for(("module", "per_module", "min_volume"),
                       f"applies to the rate metrics only ({rates}), not {spec.name}")
        return None, False, None
    module = fields.text("module")
    if module is not None and (not module.strip() or not _MODULE.fullmatch(module)):
        # Agents name their modules; the hooks' defaults are the guard families'.
        fields.problem("module", f"expected a module label (the hooks' defaults are "
                       f"{', '.join(MODULES)}; an agent may set its own), got {module!r}")
        module = None
    per_module = fields.boolean("per_module")
    if module is not None and per_module:
        fields.problem("per_module", "give module (one module) or per_module (each module), "
                       "not both")
    min_volume = fields.integer("min_volume", DEFAULT_MIN_VOLUME, minimum=1)
    return module, per_module, min_volume


def _webhook(raw: Any, index: int, problems: list[str], environ: Mapping[str, str] | None,
             read_urls: bool) -> Webhook | None:
    if not isinstance(raw, dict):
        problems.append(f"webhook #{index}: expected a table of fields, got {raw!r}")
        return None
    fields = _Fields("webhook", index, raw, _WEBHOOK_FIELDS, problems)
    count = len(problems)
    name = fields.name()
    form = fields.choice("format", _FORMATS, "json")
    url = _url(fields, os.environ if environ is None else environ, read_urls)
    headers: list[tuple[str, str]] = []
    raw_headers = raw.get("headers", {})
    if not isinstance(raw_headers, dict):
        fields.problem("headers", f"expected a table of header names and values, got "
                       f"{type(raw_headers).__name__}")
    else:
        for key, value in raw_headers.items():
            if not _HEADER_NAME.fullmatch(key):
                fields.problem("headers", f"{key!r} is not a header name")
            elif not isinstance(value, str) or "\n" in value or "\r" in value:
                fields.problem("headers", f"the value of {key} must be one line of text")
            else:
                headers.append((key, value))
    if len(problems) > count or name is None or url is None or form is None:
        return None
    url_env = raw.get("url_env", "")
    return Webhook(name, url, "slack" if form == "slack" else "json", tuple(headers),
                   url_env if isinstance(url_env, str) else "")


def _url(fields: _Fields, environ: Mapping[str, str], read_urls: bool) -> str | None:
    if fields.given("url") == fields.given("url_env"):
        fields.problem("url", "give url (the address) or url_env (the environment variable "
                       "that holds it), one of the two")
        return None
    if fields.given("url"):
        field, url = "url", fields.text("url")
    else:
        field = "url_env"
        variable = fields.text("url_env")
        if variable is None:
            return None
        if not _ENV_NAME.fullmatch(variable):
            fields.problem(field, f"{variable!r} is not an environment variable name")
            return None
        if not read_urls:
            return ""
        url = environ.get(variable, "").strip()
        if not url:
            fields.problem(field, f"the environment variable {variable} is not set")
            return None
    if url is None:
        return None
    try:
        parsed = urlparse(url)
        parsed.port  # noqa: B018 - parsing the port is the check
    except ValueError:
        parsed = None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.hostname:
        # Not quoted: a webhook URL often holds its secret.
        fields.problem(field, "must be an http:// or https:// URL with a host (not shown: "
                       "webhook URLs often hold a secret)")
        return None
    return url
