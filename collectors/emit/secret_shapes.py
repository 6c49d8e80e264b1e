"""What a secret looks like when nothing names it, and which names say "secret".

The shape tests the redaction rules (secret_rules.py) call once a pattern has found a
candidate: a bare token is redacted only if it looks random and not like an id, a hash,
a path or an identifier; a ``NAME = VALUE`` pair only if the name is a secret's name and
the value is not code or a placeholder; a ``user:password`` pair only if what follows the
colon looks like a password (a symbol inside letters and digits, random case, a token).
Everything here runs on one candidate at a time (at most 1024 characters), so its cost is
bounded per match.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter

__all__ = ["NOT_SECRET_NAME", "PASSWORD_SYMBOLS", "host_after_at", "left_ok",
           "looks_random", "looks_tokenish", "made_up_uuid", "name_is_secret", "named_id_before",
           "password_like", "value_is_secret", "wordy"]

# A bare hex string or UUID with no name before it is taken for a hash or an id by
# default (git SHAs, sha256 sums and request ids fill agent traces; redacting them makes
# a stored trace useless). Secrets of that shape are still caught when a name is next to
# them (``HEROKU_API_KEY=<uuid>``, ``{"api_key": "<hex>"}``). With ``bare_ids`` (the
# ``GUARDTRACE_REDACT_BARE_IDS`` setting; the rules apply it to a token alone on its
# line) they are redacted bare too: recall up, and such SHAs and UUIDs become markers.

_RUNS = re.compile(r"[a-z]+|[A-Z]+|[0-9]+")
_HEX = re.compile(r"[0-9a-fA-F]+")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_WORDY_PART = re.compile(r"[A-Za-z]+|[0-9]{1,8}|[A-Za-z][a-z]+[0-9]{1,4}|[0-9]{1,4}[A-Za-z]{1,3}|")
_SPLIT = re.compile(r"[_\-./:~=+|%<>#@!{}]+")
_DIGITS = re.compile(r"[0-9]")
_LOWERS = re.compile(r"[a-z]")
_UPPERS = re.compile(r"[A-Z]")
_CAMEL_STEP = re.compile(r"[A-Z](?=[a-z])")
_PLACEHOLDER = re.compile(
    r"(?i)(?:x{4,}|\*{3,}|<[^>]*>|\$\{?[A-Za-z_]|%\(?[A-Za-z_]|\{\{|your[_-]?|change[_-]?me|"
    r"redacted|example|dummy|placeholder|none|null|true|false|undefined|str|int|bytes|optional)"
)
# Schema words and code keywords in a value's place (``key=lambda r: ...``).
_PLACEHOLDER_WORDS = frozenset({"required", "optional", "string", "secret", "password",
                                "token", "hidden", "masked", "empty", "lambda", "function",
                                "return", "await", "async", "default"})


def left_ok(text: str, start: int) -> bool:
    """A token may start here: the text's start, a non-word character before it, or
    right after a JSON escape such as ``\\n`` (a secret alone on a line of a reply that
    was JSON-encoded: the token follows the ``n`` of ``\\n``)."""
    if start == 0:
        return True
    prev = text[start - 1]
    if not (prev.isalnum() or prev == "_"):
        return True
    return start >= 2 and text[start - 2] == "\\" and prev in "nrtbf"


def _transitions(tok: str) -> int:
    """Changes between lower case, upper case and digits (other characters break runs)."""
    return len(_RUNS.findall(tok)) - 1


def _entropy(s: str) -> float:
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


def wordy(s: str) -> bool:
    """Every part of ``s`` is a word, a short number or word+digits: an identifier."""
    parts = [p for p in _SPLIT.split(s) if p]
    return bool(parts) and all(
        _WORDY_PART.fullmatch(p) and (len(p) <= 12 or not any(c.isdigit() for c in p))
        for p in parts)


def looks_random(tok: str, bare_ids: bool = False) -> bool:
    """The shape test for a bare token (no name around it); with ``bare_ids``, hex of 32
    digits or more and UUIDs count as random too (see the note above)."""
    n = len(tok)
    if n < 14 or n > 1024:
        return False
    core = tok.rstrip("=")
    if _HEX.fullmatch(core) and _mixed_case_hex(core):
        return True
    if _UUID.fullmatch(core) and made_up_uuid(core):
        return True
    if _HEX.fullmatch(core) or _UUID.fullmatch(core):
        # hashes, SHAs, UUIDs, numbers: ids when bare, unless told otherwise
        return bare_ids and (_UUID.fullmatch(core) is not None
                             or (len(core) >= 32 and not core.isdigit()))
    if tok.startswith(("/", "./", "../", "~/", "http", "www.")):
        return False  # paths and URLs
    if "/" in tok and all(wordy(seg) or not seg for seg in tok.split("/")):
        return False  # relative paths: src/marshmallow/fields.py
    digits = len(_DIGITS.findall(tok))
    lowers = len(_LOWERS.findall(tok))
    uppers = len(_UPPERS.findall(tok))
    if lowers + uppers < 4:
        return False  # dates, times, versions, numbers
    parts = [p for p in _SPLIT.split(tok) if p]
    # identifiers and file names: every part a word, a short number, word+digits or hex
    # (credit_card_4421486, marshmallow.fields.Nested, PTR_FUN_00401bf0, flash_<md5>.zip)
    if all((_WORDY_PART.fullmatch(p) and (len(p) <= 12 or not any(c.isdigit() for c in p))
            and _transitions(p) <= max(2, len(p) // 4))
           or (len(parts) > 1 and _HEX.fullmatch(p)) for p in parts):
        return False
    if digits == 0 and not (uppers >= 3 and lowers >= 3 and n >= 20):
        return False
    # variety: distinct characters (a C-level stand-in for Shannon entropy)
    if len(set(tok)) < 0.55 * min(n, 36):
        return False
    return _transitions(tok) >= max(4, n // 6)


def made_up_uuid(core: str) -> bool:
    """A UUID's shape without a UUID's bits: every generator (RFC 9562, versions 1 to 8)
    writes the version in the 13th hex digit and the variant (8, 9, a or b) in the 17th,
    so an id in this shape has both. A key drawn as random hex in UUID form (gitleaks'
    Heroku, HubSpot, Kucoin, Squarespace ... samples) mostly has not: it is redacted even
    bare. The nil UUID, Microsoft's well-known class ids and other forms with little
    variety are left alone; a key that happens to carry the bits stays an id (unless
    bare ids are redacted: ``looks_random(..., bare_ids=True)``)."""
    if core[14] in "12345678" and core[19] in "89abAB":
        return False
    return len(set(core.lower())) >= _MADE_UP_UUID_VARIETY


# Distinct characters of a made-up UUID: random hex in 36 places shows 12 or more of the
# 17 (hex digits and the dash) all but always; "00000000-0000-0000-C000-000000000046" 5.
_MADE_UP_UUID_VARIETY = 10


def _mixed_case_hex(core: str) -> bool:
    """Hex written in both cases, each several times and switching often: no hash or id
    tool writes that (each writes one case), so it is a key drawn from hex letters of both
    cases (Sourcegraph's legacy tokens). Its 22-letter alphabet is too small for the
    variety test that other tokens pass, so this is judged on its own. Not camelCase words
    of hex letters (DeadBeefCafe0123): there nearly every capital starts a lower-case run,
    where in a random draw about a quarter do."""
    if len(core) < 20:
        return False
    uppers = len(_UPPERS.findall(core))
    lowers = len(_LOWERS.findall(core))
    if uppers < 4 or lowers < 4 or len(_CAMEL_STEP.findall(core)) > 0.6 * uppers:
        return False
    return _transitions(core) >= max(4, len(core) // 6)


def looks_tokenish(tail: str) -> bool:
    """The part after a short or generic vendor prefix (``live_``, ``key-``) is random."""
    tail = tail[:256]
    letters = sum(c.isalpha() for c in tail)
    if letters < 2:
        return False
    if not any(c.isdigit() for c in tail) and not (
            any(c.isupper() for c in tail) and any(c.islower() for c in tail)):
        return False
    parts = [p for p in _SPLIT.split(tail) if p]
    if parts and all(p.isalpha() and len(p) <= 12 for p in parts):
        return False
    return _entropy(tail) >= 3.0


# -- names ------------------------------------------------------------------------------
# A name is a secret's name when its last segment is a secret word (FOO_API_KEY,
# clientSecret, x-api-key, db.password), not when a secret word is only part of what it
# names (token_count, key_name, password_hash, max_tokens, *_path).
_STRONG = re.compile(
    r"(?i)passw(?:or)?d|passphrase|secret|token|api_?key|credential|private_?key|access_?key|"
    r"auth(?!or)|cookie|jwt|webhook|connection_?string"
)
_SEGMENT = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
_WEAK_SEGMENTS = frozenset({"key", "keys", "pwd", "pass", "pat", "dsn", "sig", "signature",
                            "salt", "seed", "mnemonic", "session", "sid", "pin", "otp", "sas",
                            "license", "bearer"})
_ID_PAIR = frozenset({("client", "id"), ("access", "id"), ("api", "id"), ("app", "id"),
                      ("account", "id"), ("secret", "id"), ("key", "id"), ("auth", "user")})
NOT_SECRET_NAME = re.compile(
    r"(?i)(?:^|_|-)(?:max|min|num|count|len|length|size|type|kind|name|names|file|path|dir|"
    r"url_?path|expir\w*|ttl|timeout|limit|prefix|suffix|format|field|fields|header|"
    r"id_?token_?hint|usage|hash|hashed|sha\d*|md5|checksum|digest|etag|fingerprint|public|"
    r"pub|input|index|indices|error|errors|status|encoding|enabled|required|policy|"
    r"rotation|version|label|scope|provider|manager|store|class|schema|ref|env|var|tokens|"
    r"tokenizer)(?:$|_|-)"
)


# Names repeat (attribute keys, body keys): each short one is judged once, in a cache
# bounded in entries and, through the length cut, in bytes (a body's keys are anyone's).
_NAME_MEMO_MAX_CHARS = 128
_NAME_MEMO_ENTRIES = 4096


def name_is_secret(name: str) -> bool:
    """``name`` (a variable, key, flag or header) names a secret."""
    if len(name) > _NAME_MEMO_MAX_CHARS:
        return _judge_name(name)
    return _judge_short_name(name)


def _judge_name(name: str) -> bool:
    base = name.rsplit(".", 1)[-1].strip("-_")
    low = base.lower()
    if NOT_SECRET_NAME.search(base) and not _STRONG.search(
            low.replace("-", "_").rsplit("_", 1)[-1]):
        return False
    if _STRONG.search(low):
        return True
    segs = [s.lower() for s in _SEGMENT.findall(base)]
    if not segs:
        return False
    if segs[-1] in _WEAK_SEGMENTS:
        return True
    return len(segs) >= 2 and (segs[-2], segs[-1]) in _ID_PAIR


_judge_short_name = functools.lru_cache(maxsize=_NAME_MEMO_ENTRIES)(_judge_name)


_PY_LITERAL_VALUE = re.compile(
    r"(?:self|cls|os|sys|request|settings|config|kwargs|args|params|data|ctx|env)\b[.\[]"
    r"|[A-Za-z_][A-Za-z0-9_]*\(|[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*$"
)
_LETTERS = re.compile(r"[A-Za-z_]+")


def value_is_secret(value: str, op: str) -> bool:
    """The value assigned to a secret's name is a secret, not code or a placeholder."""
    v = value.rstrip(".")
    if len(v) < 6:
        return False
    low = v.lower()
    if _PLACEHOLDER.match(low) or low in _PLACEHOLDER_WORDS or v.startswith("[REDACTED"):
        return False
    if _PY_LITERAL_VALUE.match(v):
        return False  # code: api_key = os.environ["X"], token = get_token(), key = self.key
    if v.isalpha() and v.islower() and len(v) < 12 and " " in op and ":" in op:
        return False  # "key: value" in prose, YAML schema words
    if _LETTERS.fullmatch(v) and "=" in op and " " in op:
        return False  # python: password = password_input
    return not (v.isdigit() and len(v) < 8)


# -- passwords with no name before them ------------------------------------------------------
# Symbols that passwords hold and identifiers, numbers and paths do not (``-_./+=%`` are
# in ids, versions, URLs and base64 too).
PASSWORD_SYMBOLS = frozenset("!#$&*?@^~")
_PASSWORD_SYMBOL = re.compile("[" + re.escape("".join(sorted(PASSWORD_SYMBOLS))) + "]")
_HOST_AFTER_AT = re.compile(r"@[A-Za-z0-9\-]+\.[A-Za-z]")
_CASE_RUNS = re.compile(r"[a-z]+|[A-Z]+")
_PASSWORD_MIN, _PASSWORD_MAX = 8, 128


def host_after_at(value: str) -> bool:
    """``value`` holds ``@`` and a dotted name after it: an e-mail address or a host."""
    return "@" in value and _HOST_AFTER_AT.search(value) is not None


def _random_case(value: str) -> bool:
    """Letters whose case flips as a coin does: three or more upper-case runs, two of them
    two letters or longer, and three or more lower-case runs averaging three letters at
    most. camelCase has single capitals before long lower-case words, and acronyms
    (``XMLHttpRequest``) come one or two to a name."""
    runs = _CASE_RUNS.findall(value)
    upper = [r for r in runs if r.isupper()]
    lower = [r for r in runs if r.islower()]
    return (len(upper) >= 3 and sum(len(r) >= 2 for r in upper) >= 2 and len(lower) >= 3
            and sum(map(len, lower)) <= 3 * len(lower))


def password_like(value: str) -> bool:
    """The part after ``user:`` in a pair no name announces (``developer:yqDVtkqPECriaLRi``,
    ``elastic:P@ssw0rd$1``) is a password: a symbol inside letters and digits, letters of
    randomly mixed case, or a random-looking token. Times, ports, versions, paths, image
    tags, ``module:attr`` and ``key:value`` have none of these."""
    n = len(value)
    if n < _PASSWORD_MIN or n > _PASSWORD_MAX or value[0] in PASSWORD_SYMBOLS:
        return False  # $VAR, #fff, @decorator, *args, ~/path
    if not value_is_secret(value, ":"):
        return False  # placeholders: changeme, <password>, ${PASS}, xxxx
    has_digit = _DIGITS.search(value) is not None
    if (has_digit and _PASSWORD_SYMBOL.search(value, 1, n - 1) is not None
            and sum(map(str.isalpha, value)) >= 2 and not host_after_at(value)
            and not ("=" in value and "&" in value)):  # a query string: a=1&b=2
        return True
    # looks_random alone would take a long CamelCase name (module:_ParentBasedAlwaysOff in
    # an entry point) for a token: a password of that kind holds a digit.
    return (n >= 12 and _random_case(value)) or (has_digit and looks_random(value))


# -- ids named just before a token ---------------------------------------------------------
_NONWORD = re.compile(r"[^A-Za-z0-9_\-]")
_ID_WORDS = frozenset({
    "id", "ids", "uuid", "guid", "sha", "sha1", "sha256", "sha512", "md5", "hash", "digest",
    "checksum", "etag", "commit", "revision", "rev", "nonce", "trace", "span", "request",
    "correlation", "message", "object", "file", "image", "build", "run", "job", "version",
    "index", "head", "tree", "parent", "blob", "ref"})


def named_id_before(text: str, start: int) -> bool:
    """The token at ``start`` follows a name that says id, hash or digest
    (``request_id=``, ``commit ``, ``sha256:``, ``"checksum": "``)."""
    window = text[max(0, start - 40):start].rstrip(" \t\"':=")
    word = _NONWORD.split(window)[-1].lower() if window else ""
    if not word:
        return False
    last = word.replace("-", "_").rsplit("_", 1)[-1]
    return word in _ID_WORDS or last in _ID_WORDS or word.endswith("id")
