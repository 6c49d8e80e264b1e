"""Redaction's measured cases, shared by benchmarks/redaction_quality.py and the unit tests
(tests/unit/test_redaction_quality.py loads this file by path).

* Recall: every secret of the shared secret-scanner corpus (read where it lives, never
  copied) in five contexts: prose, a ``.env`` line, a JSON body with the secret alone on
  a line of a reply (redacted as the hooks ship it: string by string, then encoded),
  YAML, an HTTP header. A secret counts as redacted when it no longer appears whole and
  at most 20% of its characters survive in some 8-character piece of it.
* False redactions: lines that hold no secret (real tool results and tool-call arguments
  of the dev conversations, generated ids and hashes in the places they appear, bare
  SHAs and UUIDs alone on a line); a line counts when the redactor changes it at all.
* Adversarial inputs: runs and repetitions of what each rule keys on, for the doubling
  test and the seconds-per-MB figure.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

_WORKPLACE_CORPUS = Path("/work/shared/security_corpus")
CORPUS_FILE = "secrets_gitleaks.jsonl"
CONTEXTS = ("prose", "env", "json", "yaml", "header")


def security_corpus_dir() -> Path:
    """``$GUARDTRACE_SECURITY_CORPUS``, else ``<repo>/../shared/security_corpus`` if it
    exists, else ``/work/shared/security_corpus`` (as ``_common.realdata_dir``)."""
    if os.environ.get("GUARDTRACE_SECURITY_CORPUS"):
        return Path(os.environ["GUARDTRACE_SECURITY_CORPUS"])
    beside = Path(__file__).resolve().parents[1].parent / "shared" / "security_corpus"
    return beside if beside.is_dir() or not _WORKPLACE_CORPUS.is_dir() else _WORKPLACE_CORPUS


def load_corpus(path: Path | None = None) -> list[dict[str, str]]:
    """``[{"type": kind, "secret": text}, ...]`` of the corpus file."""
    path = path or security_corpus_dir() / CORPUS_FILE
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def _env_name(kind: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", kind).upper()


def build(context: str, kind: str, secret: str) -> Any:
    """The text (or, for ``json``, the body) that carries ``secret`` in ``context``."""
    if context == "prose":
        return f"my key is {secret}, use it"
    if context == "env":
        value = f'"{secret}"' if "\n" in secret else secret
        return f"# service config\n{_env_name(kind)}={value}\nLOG_LEVEL=info\n"
    if context == "json":
        return {"reply": f"here:\n{secret}\nthanks", "model": "gpt-4o"}
    if context == "yaml":
        if "\n" in secret:
            body = "\n".join("    " + line for line in secret.splitlines())
            return f"service:\n  name: {kind}\n  api_key: |\n{body}\n  timeout: 30\n"
        return f"service:\n  name: {kind}\n  api_key: {secret}\n  timeout: 30\n"
    if context == "header":
        header = (f"X-Api-Key: {secret}" if "key" in kind and "private" not in kind
                  else f"Authorization: Bearer {secret}")
        return (f"GET /v1/items HTTP/1.1\nHost: api.example.com\n{header}\n"
                "Accept: application/json\n")
    raise ValueError(context)


def _strings(value: Any, out: list[str]) -> list[str]:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            _strings(k, out)
            _strings(v, out)
    elif isinstance(value, list):
        for v in value:
            _strings(v, out)
    return out


def survives(secret: str, outputs: list[str]) -> bool:
    """The secret leaked: whole, or more than 20% of it in 8-character pieces."""
    if any(secret in o for o in outputs):
        return True
    n = len(secret)
    if n < 8:
        return False
    covered = [False] * n
    for i in range(n - 7):
        if any(secret[i:i + 8] in o for o in outputs):
            for j in range(i, i + 8):
                covered[j] = True
    return sum(covered) > 0.2 * n


def leaked(context: str, kind: str, secret: str, ship: Callable[[Any], str]) -> bool:
    """``ship`` turns a body into the text stored (the payload path: redact, encode)."""
    out = ship(build(context, kind, secret))
    outputs = [out]
    if context == "json":
        outputs.append("\n".join(_strings(json.loads(out), [])))
    return survives(secret, outputs)


def recall(rows: list[dict[str, str]], ship: Callable[[Any], str]
           ) -> tuple[dict[str, float], dict[str, list[str]]]:
    """Share of ``rows`` redacted per context, and the kinds missed per context."""
    shares: dict[str, float] = {}
    misses: dict[str, list[str]] = {}
    for context in CONTEXTS:
        missed = [r["type"] for r in rows if leaked(context, r["type"], r["secret"], ship)]
        shares[context] = 1 - len(missed) / len(rows)
        misses[context] = missed
    return shares, misses


# -- negatives ------------------------------------------------------------------------------
_EMAIL = re.compile(r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+\.[A-Za-z]{2,}")
_GIT_HOST = re.compile(r"\bgit@")


def real_negatives(conversations: Path, per_category: int = 3000) -> dict[str, list[str]]:
    """Unique lines (6-400 characters) of tool results and tool-call arguments, by
    category: tau tool records, SWE-agent code and output, URLs and hosts. Lines with a
    person's e-mail address are left out: that is PII to redact, not a negative."""
    rng = random.Random(13)
    categories: dict[str, set[str]] = {"tau_tool_records": set(), "swe_code_and_output": set(),
                                       "urls_hosts": set()}
    with conversations.open(encoding="utf-8") as lines:
        for line in lines:
            conv = json.loads(line)
            texts = [m.get("content") or "" for m in conv["messages"] if m["role"] == "tool"]
            texts += [call["function"]["arguments"] for m in conv["messages"]
                      for call in m.get("tool_calls") or []]
            for text in texts:
                for ln in text.replace("\r", "").split("\n"):
                    ln = ln.strip()
                    if not 6 <= len(ln) <= 400:
                        continue
                    if _EMAIL.search(ln) and not _GIT_HOST.search(ln):
                        continue
                    if "://" in ln or _GIT_HOST.search(ln):
                        categories["urls_hosts"].add(ln)
                    elif conv["domain"] == "code":
                        categories["swe_code_and_output"].add(ln)
                    else:
                        categories["tau_tool_records"].add(ln)
    out = {}
    for name, found in categories.items():
        ordered = sorted(found)
        rng.shuffle(ordered)
        out[name] = ordered[:per_category]
    return out


def generated_negatives(count: int = 500, seed: int = 13) -> dict[str, list[str]]:
    """Ids and hashes in the places they appear, and bare SHAs/UUIDs alone on a line."""
    rng = random.Random(seed)
    lines = []
    for i in range(count):
        u = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        h1 = hashlib.sha1(f"{seed}-{i}".encode()).hexdigest()
        h256 = hashlib.sha256(f"{seed}-{i}".encode()).hexdigest()
        b64 = base64.urlsafe_b64encode(rng.randbytes(12)).decode()
        lines += [
            f'{{"request_id": "{u}", "status": "ok"}}', f"trace_id={u.replace('-', '')}",
            f"commit {h1}", f"{h1[:7]} Fix off-by-one in pagination",
            f"HEAD is now at {h1[:12]}", f"sha256:{h256}", f'"checksum": "{h256}"',
            f"  {h256}  dist/guardtrace-0.{i}.tar.gz", f'{{"file_id": "file-{b64}"}}',
            f"session {u} started", f"docker image id: sha256:{h256[:12]}",
            f'etag: "{hashlib.md5(str(i).encode()).hexdigest()}"',
            "git@github.com:org/repo.git", f"git clone git@github.com:team/svc-{i}.git",
        ]
    bare = [hashlib.sha1(f"bare-{i}".encode()).hexdigest() for i in range(count // 2)]
    bare += [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(count // 2)]
    return {"generated_ids_hashes": lines, "bare_hashes_uuids": bare}


def false_redactions(redact: Callable[[str], str], categories: dict[str, list[str]]
                     ) -> dict[str, tuple[int, int, list[str]]]:
    """Per category: (lines changed, lines, a few examples)."""
    out = {}
    for name, lines in categories.items():
        changed = [ln for ln in lines if redact(ln) != ln]
        out[name] = (len(changed), len(lines), changed[:5])
    return out


# -- adversarial ----------------------------------------------------------------------------
def adversarial(n: int) -> dict[str, str]:
    """Inputs of ``n`` characters built to make a rule backtrack or decide often."""
    rng = random.Random(7)
    b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

    def rep(unit: str) -> str:
        return (unit * (n // len(unit) + 1))[:n]

    return {
        "a_run": "a" * n,
        "base64_run": "".join(rng.choice(b64) for _ in range(n)),
        "hex_run": "".join(rng.choice("0123456789abcdef") for _ in range(n)),
        "tok_chars": rep("aB3_-.=~+/"), "a=": rep("a="), "key=": rep("key="),
        "API_KEY_": rep("API_KEY_"), "password: ": rep("password: "),
        "token is ": rep("token is "), "@": rep("@"), "a.a@b": rep("a.a@b"),
        "BEGIN_no_END": "-----BEGIN RSA PRIVATE KEY-----\n" + rep("QUJD\n")[: n - 40],
        "BEGIN_chain": rep("-----BEGIN "), "BEGIN_PK_chain": rep("-----BEGIN PRIVATE KEY-----"),
        "://": rep("://"), "a://b:c": rep("a://b:c"), "Bearer ": rep("Bearer "),
        "Bearer_tok": rep("Bearer a1"), "Authorization: ": rep("Authorization: "),
        "X-Api-Key:": rep("X-Api-Key:"), "Cookie": "Cookie: " + rep("a=b; "),
        "eyJ": rep("eyJ"), "eyJ.": rep("eyJabcdefghijk."), "sk-": rep("sk-"),
        "ghp_": rep("ghp_a"), "escaped_newlines": rep("\\n"), "\\nA1": rep("\\nA1b2"),
        "dash_dot": rep("a-b.c_"), "spaces": rep("a1 "), "quotes": rep('"a":"'),
        "many_tokens": rep("aB3dE5fG7hJ9kL1m "), "many_assign": rep("api_key=a1b2c3d4e5 "),
        "many_emails": rep("ab.cd@ex.com "), "backticks": rep("` a"),
        "curly_quotes": rep("\u201c a"),
    }
