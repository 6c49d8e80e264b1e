"""`guardtrace scan`: the offline scanner's stable contract, through the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from guardtrace.cli import main

FABRICATION = [
    {"id": "lie", "reply": "I'm deploying the patch now.", "tools_fired": [], "history": []},
    {"id": "truth", "reply": "I'm running Claude Sonnet 4.5 through OpenRouter.",
     "tools_fired": []},
    {"id": "done", "reply": "I've written the file.", "tools_fired": ["write_file"]},
    {"id": "loop", "reply": "The deployment is blocked on the missing credentials file.",
     "tools_fired": [], "history": ["The deployment is blocked on the missing credentials file!"]},
]


def run_scan(capsys: pytest.CaptureFixture[str], kind: str, path: Path,
             *extra: str) -> tuple[int, list[dict], str]:
    code = main(["scan", kind, str(path), *extra])
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines()], err


def write_jsonl(path: Path, records: list) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n")
    return path


def test_fabrication_scan_outputs_one_verdict_per_line_in_order(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_scan(capsys, "fabrication", write_jsonl(tmp_path / "f.jsonl", FABRICATION))
    assert code == 0
    assert [o["id"] for o in out] == ["lie", "truth", "done", "loop"]
    assert [o["flagged"] for o in out] == [True, False, False, True]
    assert out[0]["tiers"] == ["action"] and out[0]["similarity"] is None
    assert out[3]["tiers"] == ["repetition"] and out[3]["similarity"] > 0.7
    assert set(out[1]) == {"id", "flagged", "tiers", "matches", "similarity"}


def test_questions_and_plans_scans(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_scan(capsys, "questions", write_jsonl(tmp_path / "q.jsonl", [
        {"id": 1, "question": "Which month of the year is spelled with an X?"},
        {"id": 2, "question": "Write a poem about October."}]))
    assert code == 0
    assert [(o["id"], o["should_reason"]) for o in out] == [(1, True), (2, False)]
    assert out[1]["trigger_pattern"] is None and out[0]["depth"] != "none"

    code, out, _ = run_scan(capsys, "plans", write_jsonl(tmp_path / "p.jsonl", [
        {"id": "p1", "allowed_tools": ["organize_files", "compose_email"],
         "plan": [{"id": "step_1", "tool": "organise_file", "inputs": {}}]},
        {"id": "p2", "allowed_tools": ["organize_files"], "plan": []}]))
    assert code == 0
    assert out[0]["valid"] is False
    assert out[0]["errors"][0]["error_type"] == "hallucinated_tool"
    assert out[0]["errors"][0]["suggested_tools"][0] == "organize_files"
    assert out[1] == {"id": "p2", "valid": True, "errors": []}


def test_malformed_lines_yield_errors_and_exit_2_but_the_scan_goes_on(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_jsonl(tmp_path / "bad.jsonl", [
        FABRICATION[0], "{not json", "[1, 2]", {"id": 9, "reply": 42}, "", FABRICATION[1]])
    code, out, err = run_scan(capsys, "fabrication", path, "--summary")
    assert code == 2
    assert [o["id"] for o in out] == ["lie", None, None, 9, "truth"]
    assert "not JSON" in out[1]["error"] and "line 2" in out[1]["error"]
    assert "object" in out[2]["error"]
    assert "'reply' must be a string" in out[3]["error"]
    summary = json.loads(err.strip().splitlines()[-1])
    assert summary == {"kind": "fabrication", "lines": 5, "errors": 3, "flagged": 1}


def test_stdin_and_unreadable_path(tmp_path: Path) -> None:
    cli = [sys.executable, "-m", "guardtrace.cli"]
    done = subprocess.run([*cli, "scan", "questions", "-"], input='{"id": "x", "question": '
                          '"How many r\'s are in strawberry?"}\n', capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["should_reason"] is True
    missing = subprocess.run([*cli, "scan", "plans", str(tmp_path / "nope.jsonl")],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1
    assert "cannot read" in missing.stderr and "Traceback" not in missing.stderr


CATALOG = [{"type": "function", "function": {"name": "cancel_reservation", "parameters": {}}},
           {"type": "function", "function": {"name": "get_user_details", "parameters": {}}}]


def test_conversations_scan_prints_one_verdict_per_assistant_reply(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conversation = {
        "id": "c1", "tools": CATALOG, "model": "ignored", "messages": [
            {"role": "system", "content": "policy"},
            {"role": "assistant", "content": "Hi! How can I help?", "x-canned": True},
            {"role": "user", "content": "Cancel ABC123."},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "t1", "type": "function",
                 "function": {"name": "cancel_reservation", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "t1", "content": '{"status": "cancelled"}'},
            {"role": "assistant", "content": "I've cancelled ABC123 for you."},
            {"role": "user", "content": "And my other booking?"},
            {"role": "assistant", "content": "I've cancelled that one too, ref ZZ99XK."},
        ]}
    code, out, err = run_scan(capsys, "conversations",
                              write_jsonl(tmp_path / "c.jsonl", [conversation]), "--summary")
    assert code == 0
    assert out == [
        {"conv_id": "c1", "msg_index": 1, "tiers": [], "evidence": {}},
        {"conv_id": "c1", "msg_index": 5, "tiers": [], "evidence": {}},
        {"conv_id": "c1", "msg_index": 7, "tiers": ["action", "ungrounded_result"],
         "evidence": {"action": "I've cancelled", "ungrounded_result": "ZZ99XK"}}]
    assert json.loads(err.strip().splitlines()[-1]) == {
        "kind": "conversations", "lines": 1, "replies": 3, "flagged": 1}


def test_conversations_scan_reports_bad_lines_and_goes_on(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = {"id": "ok", "messages": [{"role": "user", "content": "hi"},
                                     {"role": "assistant", "content": "Hello!"}]}
    path = write_jsonl(tmp_path / "bad.jsonl", [
        "{oops", {"id": "n", "messages": "hi"}, {"id": "m"},
        {"id": "t", "tools": 5, "messages": []},
        {"id": "r", "messages": [{"role": "robot", "content": "x"}]}, good])
    code, out, _ = run_scan(capsys, "conversations", path)
    assert code == 2
    assert [o["conv_id"] for o in out] == [None, "n", "m", "t", "r", "ok"]
    assert "not JSON" in out[0]["error"]
    assert out[1]["error"] == "conversation 'n': 'messages' must be a list, got str"
    assert out[2]["error"] == "conversation 'm': missing 'messages'"
    assert out[3]["error"].startswith("conversation 't': ")
    assert out[4]["error"] == "conversation 'r': message 0: unknown role 'robot'"
    assert out[5] == {"conv_id": "ok", "msg_index": 1, "tiers": [], "evidence": {}}


def test_a_lone_surrogate_in_an_id_is_written_as_its_escape(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Found by hand: a JSON "\ud800" in an id ended the scan with UnicodeEncodeError.
    path = tmp_path / "surrogate.jsonl"
    path.write_text('{"id": "\\ud800", "question": "Which month is spelled with an X?"}\n'
                    '{"id": "\\udfff-\\u00e9", "question": "\\ud83d alone in the text"}\n'
                    '{"id": "ok", "question": "Write a poem about October."}\n')
    code = main(["scan", "questions", str(path)])
    out, _ = capsys.readouterr()
    assert code == 0
    out.encode("utf-8")  # valid UTF-8: no lone surrogate reached the stream
    lines = out.splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["\ud800", "\udfff-\u00e9", "ok"]
    assert lines[0].startswith('{"id": "\\ud800"')
    # Lines without a surrogate keep their text as it is (no escaping of é there).
    assert '"ok"' in lines[2]


def test_a_line_that_is_not_utf8_is_that_lines_error_and_the_scan_goes_on(
        tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"id": "caf\xe9", "question": "x"}\n{"id": "ok", "question": "y"}\n')
    cli = [sys.executable, "-m", "guardtrace.cli", "scan", "questions"]
    for done in (subprocess.run([*cli, str(path)], capture_output=True, timeout=60),
                 subprocess.run([*cli, "-"], input=path.read_bytes(), capture_output=True,
                                timeout=60)):
        assert done.returncode == 2, done.stderr
        first, second = (json.loads(line) for line in done.stdout.splitlines())
        assert first == {"id": None, "error": "line 1: not UTF-8 text (column 12)"}
        assert second["id"] == "ok"
        assert b"Traceback" not in done.stderr


def test_an_output_that_is_not_utf8_gets_ascii_json(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "emoji.jsonl", [{"id": "\U0001f600", "question": "x"}])
    done = subprocess.run([sys.executable, "-m", "guardtrace.cli", "scan", "questions",
                           str(path)], capture_output=True, timeout=60,
                          env={**os.environ, "PYTHONIOENCODING": "ascii"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(b'{"id": "\\ud83d\\ude00"')
    assert json.loads(done.stdout)["id"] == "\U0001f600"
