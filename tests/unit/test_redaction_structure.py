"""Structured bodies: a value under a secret's key is redacted every time it is seen."""

from __future__ import annotations

import json

from guardtrace.collectors.emit.redaction import Redactor


def test_a_secret_under_its_key_is_redacted_again_when_the_memo_answers() -> None:
    redactor = Redactor()
    for _ in range(3):
        # json.loads builds a new string object each time; the memo returns the first.
        body = json.loads(json.dumps({"password": "hunter2hunter2"}))
        assert redactor.redact_structure(body) == (
            {"password": "[REDACTED:secret_assignment]"}, 1)
