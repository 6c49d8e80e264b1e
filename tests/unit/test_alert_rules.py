"""The alert rules file: what validates, and that every problem names its rule and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from guardtrace.alerts import AlertRulesError, load_rules, parse_rules
from guardtrace.alerts.durations import format_duration, parse_duration
from guardtrace.alerts.rules import DEFAULT_FOR_S, DEFAULT_MIN_VOLUME, DEFAULT_WINDOW_S
from guardtrace.schemas import environment_variables as env

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "deploy" / "alerts.example.toml"
EXAMPLE_ENV = {"ONCALL_SLACK_WEBHOOK_URL": "https://hooks.slack.example/services/T0/B0/s3cr3t",
               "INCIDENT_WEBHOOK_URL": "https://incidents.example/hook"}

HOOK = """
[[webhook]]
name = "chat"
url = "https://chat.example/hooks/abc"
format = "slack"
"""


def problems(text: str, environ: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(AlertRulesError) as caught:
        parse_rules(text, "rules.toml", environ or {})
    assert str(caught.value).startswith("alert rules rules.toml")
    return caught.value.problems


def rule(body: str, hooks: str = HOOK) -> str:
    return f"{hooks}\n[[rule]]\n{body}\n"


# -- what validates ------------------------------------------------------------------------
def test_the_example_file_in_deploy_validates_with_every_metric() -> None:
    rules = load_rules(EXAMPLE, EXAMPLE_ENV)
    assert {r.metric for r in rules.rules} == {
        "recovery_rate", "unrecoverable_rate", "fabrication_rate", "verification_bypass_rate",
        "dead_letters", "collector_drops", "consumer_lag"}
    by_name = {r.name: r for r in rules.rules}
    assert by_name["fabrication-spike"].condition.kind == "above_baseline"
    assert by_name["verification-bypassed"].per_module
    assert [hook.url for hook in rules.targets(by_name["plan-recovery-floor"])] == [
        EXAMPLE_ENV["ONCALL_SLACK_WEBHOOK_URL"], EXAMPLE_ENV["INCIDENT_WEBHOOK_URL"]]
    # Without the secrets, a reader that only shows the rules still reads the file.
    shown = load_rules(EXAMPLE, {}, read_urls=False)
    assert [hook.display for hook in shown.webhooks] == [
        "oncall-slack ($ONCALL_SLACK_WEBHOOK_URL)", "incidents ($INCIDENT_WEBHOOK_URL)"]


def test_defaults_and_what_a_rule_reads_as() -> None:
    rules = parse_rules(rule('name = "fab"\nmetric = "fabrication_rate"\nabove = 0.1\n'
                             'notify = ["chat"]'), "rules.toml", {})
    [fab] = rules.rules
    assert (fab.window_s, fab.for_s, fab.clear_for_s, fab.min_volume) == (
        DEFAULT_WINDOW_S, DEFAULT_FOR_S, DEFAULT_FOR_S, DEFAULT_MIN_VOLUME)
    assert fab.module is None and not fab.per_module
    assert fab.describe() == ("fabrication_rate over 5m above 0.1 "
                              "(min volume 20 requests seen)")
    [lag] = parse_rules(rule('name = "lag"\nmetric = "consumer_lag"\nabove = 10\n'
                             'for = "0s"\nclear_for = "2m"'), "r", {}).rules
    assert (lag.window_s, lag.min_volume, lag.for_s, lag.clear_for_s) == (None, None, 0, 120)
    assert lag.describe() == "consumer_lag above 10"


def test_a_webhook_url_from_the_environment_is_never_quoted() -> None:
    text = rule('name = "r"\nmetric = "dead_letters"\nabove = 0\nnotify = ["env"]', hooks="""
[[webhook]]
name = "env"
url_env = "MY_HOOK"
""")
    [hook] = parse_rules(text, "r", {"MY_HOOK": "https://h.example:8443/T/secret"}).webhooks
    assert hook.url == "https://h.example:8443/T/secret"
    assert hook.display == "env (h.example:8443)"
    assert problems(text, {}) == [
        "webhook 'env' (#1), field 'url_env': the environment variable MY_HOOK is not set"]
    [bad] = problems(text, {"MY_HOOK": "ftp://user:hunter2@h/x"})
    assert bad.startswith("webhook 'env' (#1), field 'url_env': must be an http:// or https://")
    assert "hunter2" not in bad


# -- every problem names the rule and the field ----------------------------------------------
@pytest.mark.parametrize(("body", "expected"), [
    ('name = "r"\nmetric = "fabrication_rate"\nabove = 0.1\nmin_volum = 5',
     "rule 'r' (#1), field 'min_volum': unknown field (expected one of: name, metric"),
    ('metric = "fabrication_rate"\nabove = 0.1', "rule #1, field 'name': required"),
    ('name = "two words"\nmetric = "dead_letters"\nabove = 1',
     "rule 'two words' (#1), field 'name': must be 1-100 letters"),
    ('name = "r"\nabove = 1', "rule 'r' (#1), field 'metric': required, one of recovery_rate"),
    ('name = "r"\nmetric = "latency"\nabove = 1',
     "rule 'r' (#1), field 'metric': must be one of recovery_rate"),
    ('name = "r"\nmetric = "dead_letters"',
     "rule 'r' (#1), field 'above': a condition is required: above, below or above_baseline"),
    ('name = "r"\nmetric = "dead_letters"\nabove = 1\nbelow = 5',
     "rule 'r' (#1), field 'below': give one condition, not above and below"),
    ('name = "r"\nmetric = "dead_letters"\nabove = "ten"',
     "rule 'r' (#1), field 'above': expected a number, got 'ten'"),
    ('name = "r"\nmetric = "dead_letters"\nabove = true',
     "rule 'r' (#1), field 'above': expected a number, got True"),
    ('name = "r"\nmetric = "recovery_rate"\nbelow = 1.5',
     "rule 'r' (#1), field 'below': recovery_rate is at most 1, so below 1.5 always holds"),
    ('name = "r"\nmetric = "unrecoverable_rate"\nabove = 1',
     "rule 'r' (#1), field 'above': unrecoverable_rate is at most 1, so above 1 can never hold"),
    ('name = "r"\nmetric = "dead_letters"\nbelow = 0',
     "rule 'r' (#1), field 'below': below 0 can never hold"),
    ('name = "r"\nmetric = "dead_letters"\nabove = -1',
     "rule 'r' (#1), field 'above': must be 0 or more, got -1"),
    ('name = "r"\nmetric = "fabrication_rate"\nabove_baseline = 3',
     "rule 'r' (#1), field 'baseline_window': required with above_baseline"),
    ('name = "r"\nmetric = "fabrication_rate"\nabove_baseline = 0.5\nbaseline_window = "1d"',
     "rule 'r' (#1), field 'above_baseline': a factor above 1 is needed"),
    ('name = "r"\nmetric = "fabrication_rate"\nabove_baseline = 2\nbaseline_window = "5m"\n'
     'window = "10m"', "rule 'r' (#1), field 'baseline_window': must be longer than the window"),
    ('name = "r"\nmetric = "fabrication_rate"\nabove = 0.1\nbaseline_window = "1d"',
     "rule 'r' (#1), field 'baseline_window': only with above_baseline"),
    ('name = "r"\nmetric = "consumer_lag"\nabove_baseline = 2\nbaseline_window = "1d"',
     "rule 'r' (#1), field 'above_baseline': consumer_lag is read as it is now"),
    ('name = "r"\nmetric = "consumer_lag"\nabove = 5\nwindow = "5m"',
     "rule 'r' (#1), field 'window': consumer_lag is read as it is now, over no window"),
    ('name = "r"\nmetric = "fabrication_rate"\nabove = 0.1\nwindow = "5 minutes"',
     "rule 'r' (#1), field 'window': expected a duration such as 90s, 15m, 1h or 1d, "
     "got '5 minutes'"),
    ('name = "r"\nmetric = "fabrication_rate"\nabove = 0.1\nwindow = 300',
     "rule 'r' (#1), field 'window': expected a duration in quotes"),
    ('name = "r"\nmetric = "fabrication_rate"\nabove = 0.1\nwindow = "30s"',
     "rule 'r' (#1), field 'window': must be at least 1m, got '30s'"),
    ('name = "r"\nmetric = "fabrication_rate"\nabove = 0.1\nfor = "soon"',
     "rule 'r' (#1), field 'for': expected a duration"),
    ('name = "r"\nmetric = "fabrication_rate"\nabove = 0.1\nclear_for = "-5m"',
     "rule 'r' (#1), field 'clear_for': expected a duration"),
    ('name = "r"\nmetric = "fabrication_rate"\nabove = 0.1\nmin_volume = 0',
     "rule 'r' (#1), field 'min_volume': must be at least 1, got 0"),
    ('name = "r"\nmetric = "fabrication_rate"\nabove = 0.1\nmin_volume = 2.5',
     "rule 'r' (#1), field 'min_volume': expected a whole number, got 2.5"),
    ('name = "r"\nmetric = "dead_letters"\nabove = 1\nmin_volume = 5',
     "rule 'r' (#1), field 'min_volume': applies to the rate metrics only"),
    ('name = "r"\nmetric = "collector_drops"\nabove = 1\nmodule = "replies"',
     "rule 'r' (#1), field 'module': applies to the rate metrics only"),
    ('name = "r"\nmetric = "fabrication_rate"\nabove = 0.1\nmodule = ""',
     "rule 'r' (#1), field 'module': expected a module label (the hooks' defaults are "
     "planning, replies, verification; an agent may set its own), got ''"),
    ('name = "r"\nmetric = "fabrication_rate"\nabove = 0.1\nmodule = "replies"\n'
     'per_module = true', "rule 'r' (#1), field 'per_module': give module (one module) or"),
    ('name = "r"\nmetric = "fabrication_rate"\nabove = 0.1\nper_module = "yes"',
     "rule 'r' (#1), field 'per_module': expected true or false, got 'yes'"),
    ('name = "r"\nmetric = "dead_letters"\nabove = 1\nnotify = "chat"',
     "rule 'r' (#1), field 'notify': expected a list of names"),
    ('name = "r"\nmetric = "dead_letters"\nabove = 1\nnotify = ["pager"]',
     "rule 'r' (#1), field 'notify': names webhook 'pager', which no [[webhook]] defines "
     "(defined: chat)"),
    ('name = "r"\nmetric = "dead_letters"\nabove = 1\nnotify = ["chat", "chat"]',
     "rule 'r' (#1), field 'notify': names a webhook more than once"),
    ('name = "r"\nmetric = "dead_letters"\nabove = 1\ndescription = 5',
     "rule 'r' (#1), field 'description': expected a string, got 5"),
])
def test_each_problem_names_the_rule_and_the_field(body: str, expected: str) -> None:
    found = problems(rule(body))
    assert any(p.startswith(expected) for p in found), found


def test_every_problem_of_every_rule_is_reported_at_once_by_name_or_position() -> None:
    text = rule('name = "ok"\nmetric = "dead_letters"\nabove = 1') + """
[[rule]]
name = "fab"
metric = "fabrication_rate"
above = 0.1
window = "1 hour"
notify = ["nobody"]

[[rule]]
metric = "recovery_rate"
below = 0.5
colour = "red"
"""
    assert problems(text) == [
        "rule 'fab' (#2), field 'notify': names webhook 'nobody', which no [[webhook]] "
        "defines (defined: chat)",
        "rule 'fab' (#2), field 'window': expected a duration such as 90s, 15m, 1h or 1d, "
        "got '1 hour'",
        "rule #3, field 'colour': unknown field (expected one of: name, metric, description, "
        "module, per_module, above, below, above_baseline, baseline_window, window, "
        "min_volume, for, clear_for, notify)",
        "rule #3, field 'name': required",
    ]


@pytest.mark.parametrize(("hooks", "expected"), [
    ('[[webhook]]\nurl = "https://a.example/x"', "webhook #1, field 'name': required"),
    ('[[webhook]]\nname = "w"', "webhook 'w' (#1), field 'url': give url (the address) or "
     "url_env"),
    ('[[webhook]]\nname = "w"\nurl = "https://a.example/x"\nurl_env = "X"',
     "webhook 'w' (#1), field 'url': give url (the address) or url_env"),
    ('[[webhook]]\nname = "w"\nurl = "hooks.slack.com/T/B/secret"',
     "webhook 'w' (#1), field 'url': must be an http:// or https:// URL with a host"),
    ('[[webhook]]\nname = "w"\nurl_env = "not a name"',
     "webhook 'w' (#1), field 'url_env': 'not a name' is not an environment variable name"),
    ('[[webhook]]\nname = "w"\nurl = "https://a.example/x"\nformat = "teams"',
     "webhook 'w' (#1), field 'format': must be one of slack, json, got 'teams'"),
    ('[[webhook]]\nname = "w"\nurl = "https://a.example/x"\nheaders = { "Bad Header" = "x" }',
     "webhook 'w' (#1), field 'headers': 'Bad Header' is not a header name"),
    ('[[webhook]]\nname = "w"\nurl = "https://a.example/x"\nheaders = "Authorization: x"',
     "webhook 'w' (#1), field 'headers': expected a table of header names and values"),
    ('[[webhook]]\nname = "w"\nurl = "https://a.example/x"\nsecret = "x"',
     "webhook 'w' (#1), field 'secret': unknown field (expected one of: name, url, url_env, "
     "format, headers)"),
    ('[[webhook]]\nname = "w"\nurl = "https://a.example/x"\n'
     '[[webhook]]\nname = "w"\nurl = "https://b.example/x"',
     "webhook 'w': the name is used by more than one webhook"),
])
def test_each_webhook_problem_names_the_webhook_and_the_field(hooks: str,
                                                              expected: str) -> None:
    found = problems(rule('name = "r"\nmetric = "dead_letters"\nabove = 1', hooks=hooks))
    assert any(p.startswith(expected) for p in found), found


@pytest.mark.parametrize(("text", "expected"), [
    ("", "no [[rule]] tables: the file defines no alerts"),
    ('[rule]\nname = "r"', "top level, field 'rule': write [[rule]] (a list of tables)"),
    (rule('name = "r"\nmetric = "dead_letters"\nabove = 1') + '\n[settings]\nx = 1',
     "top level, field 'settings': unknown (a rules file holds [[rule]] and [[webhook]]"),
    (rule('name = "r"\nmetric = "dead_letters"\nabove = 1')
     + rule('name = "r"\nmetric = "dead_letters"\nabove = 2', hooks=""),
     "rule 'r': the name is used by more than one rule"),
    ("[[rule]\nname =", "is not valid TOML: "),
])
def test_file_level_problems(text: str, expected: str) -> None:
    found = problems(text)
    assert any(p.startswith(expected) for p in found), found


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(AlertRulesError, match=r"alert rules .*nowhere\.toml: cannot be read"):
        load_rules(tmp_path / "nowhere.toml")
    # A ConfigError: the CLI reports it as one line and exits 1.
    assert issubclass(AlertRulesError, env.ConfigError)


@pytest.mark.parametrize(("text", "seconds"), [
    ("90s", 90), ("15m", 900), ("1h", 3600), ("1d", 86400), (" 2.5M ", 150), ("0s", 0)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5", "m", "5 minutes", "1h30m", "-5m", "1e3s"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="expected a duration"):
        parse_duration(text)


def test_durations_read_back_in_their_largest_unit() -> None:
    assert [format_duration(s) for s in (0, 45, 90, 300, 7200, 86400, 1.5)] == [
        "0s", "45s", "90s", "5m", "2h", "1d", "1.5s"]
