"""The default redaction rules: credential families and shapes, as data.

Each rule is a pattern that finds candidates, an optional gate (literals one of which the
text must hold, or the pattern is not run), and a decision that returns the span to
replace and the marker kind, or None to keep the candidate. Rules run in the order of
:data:`DEFAULT_RULES`, specific before generic, and replace only the secret, so
``Authorization: Bearer``, ``DB_PASSWORD=`` and ``https://user:`` stay readable.

The rules cover vendor families and generic shapes, never one corpus's strings: the
vendor prefixes are the documented token formats (the families gitleaks and trufflehog
document are the place to look when adding one: a new prefix is one line of
``_PREFIXES``), and the rest are shapes (PEM blocks, JWTs, URL credentials and
``user:password`` pairs, headers, session cookies, ``NAME = VALUE`` with a secret's name,
random-looking tokens, e-mail addresses).

Linear time: every pattern starts with a literal (and is gated by it), or is a
possessive run (``{m,n}+``) that starts where the run starts; quantifiers after a
keyword are bounded and nothing is nested. Keyword rules run on a lower-cased copy of
the text (same length) instead of ``(?i)``. With google-re2 installed (the
``fast`` extra) three scans find their candidates with RE2's DFA; the
matches, and so the output, are the same without it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .secret_shapes import (
    NOT_SECRET_NAME,
    PASSWORD_SYMBOLS,
    host_after_at,
    left_ok,
    looks_random,
    looks_tokenish,
    made_up_uuid,
    name_is_secret,
    named_id_before,
    password_like,
    value_is_secret,
    wordy,
)

__all__ = ["DEFAULT_RULES", "RE2_AVAILABLE", "Decide", "SecretRule", "build_rules"]

# A decision: (match, text) -> (start, end, kind) to replace, or None to keep.
Decide = Callable[[Any, str], "tuple[int, int, str] | None"]


@dataclass(frozen=True)
class SecretRule:
    """One redaction rule.

    Attributes:
        pattern: Finds candidates (``finditer``): a compiled ``re`` pattern, or anything
            with the same ``finditer``.
        decide: Keeps or replaces each candidate (see :data:`Decide`).
        gate: Literals of which one must be in the text, or the rule is skipped.
        lowered: The pattern and gate run on the lower-cased copy of the text.
        multiline: A match can span lines (the rule sees a long text whole, not in
            line-aligned slices).
    """

    pattern: Any
    decide: Decide
    gate: tuple[str, ...] | None = None
    lowered: bool = False
    multiline: bool = False


try:  # optional: pip install guardtrace[fast]
    import re2 as _re2

    RE2_AVAILABLE = True
except ImportError:  # the stdlib patterns below, same matches, still linear
    _re2 = None
    RE2_AVAILABLE = False


def _trie(prefixes: list[str]) -> str:
    """Alternatives grouped by their first literal character, so the engine tests one
    character per position before it tries a group."""
    groups: dict[str, list[str]] = {}
    for p in prefixes:
        first = p[0] if p[0].isalnum() else ""
        groups.setdefault(first, []).append(p[1:] if first else p)
    parts = [f"{c}(?:{'|'.join(sorted(rest, key=len, reverse=True))})"
             for c, rest in groups.items() if c]
    parts += groups.get("", [])
    return "(?:" + "|".join(parts) + ")"


# -- private keys: PEM/OpenSSH/PGP blocks (BEGIN..END, or BEGIN and the body if no END) ---
_PRIVATE_KEY = re.compile(
    r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    r"(?:[A-Za-z0-9+/=\s\\:,.()]|-(?!----END))*+"
    r"(?:-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----)?"
)
_PUTTY = re.compile(r"PuTTY-User-Key-File-\d: [^\r\n]{0,200}+(?:[^P]|P(?!rivate-MAC))*+"
                    r"(?:Private-MAC: [0-9a-fA-F]{0,128}+)?")

# -- user:PASSWORD: in a URL (scheme://user:PASSWORD@host, the password only), or a pair on
# its own as ``curl -u`` and Basic auth take it (developer:yqDVtkqPECriaLRi, the whole pair:
# the user name is half of the credential). Both start at a colon; the user name of a pair
# is found by a bounded look back (_PAIR_USER_REV). A pair's password run stops at what
# passwords rarely hold and code, paths and URLs always do.
_URL_CRED = re.compile(
    r":(?://[^\s:/@\"'<>\\]{0,128}+:(?P<secret>[^\s/@\"'<>\\]{1,256}+)@"
    r"|(?P<password>[^\s:/\\\"'`<>()\[\]{},;|]{8,128}+))")
_PAIR_USER_REV = re.compile(r"[A-Za-z0-9._\-]{1,64}+")  # matched on the reversed text
# What may stand before a pair's user name (a space, a quote, ``--user=``, an opening
# bracket; not ``,`` ``{`` ``;``, after which ``key:value`` is code: {a:b,c:i?.d??!1}), and
# where its password run may end (the run also stops at ``:`` ``/`` ``(`` ``[`` ``{``
# ``<``, and then it is a path, a port list, a call or a tag, not a pair).
_PAIR_BEFORE = frozenset(" \t\r\n\"'`([=>")
_PAIR_AFTER = frozenset("\"'`\\,;)]}>|")

# -- JWT/JWE and base64-JSON tokens (eyJ = '{"'), Grafana and Sentry org tokens among them --
_JWT = re.compile(r"eyJ[A-Za-z0-9_\-]{10,}+(?:\.[A-Za-z0-9_\-=]*+){0,4}+")

# -- vendor prefixes: the documented shape of each vendor's tokens, the whole token ------
_PREFIXES = [
    # AI providers (OpenAI, Anthropic, OpenRouter, Perplexity, Hugging Face, Replicate,
    # Groq, xAI, NVIDIA, Fireworks) and payments (Stripe secret/restricted/webhook keys)
    r"sk-(?:proj|svcacct|admin|ant-(?:api|admin|sid)\d\d|or-v1|lf)-", r"sk-ant-", r"sk-", r"pplx-",
    r"hf_", r"api_org_", r"r8_", r"gsk_", r"xai-", r"nvapi-", r"fw_", r"sk_(?:live|test)_",
    r"rk_(?:live|test)_", r"whsec_", r"pk_(?:live|test)_",
    # code hosting, CI, package registries (GitHub, GitLab, npm, PyPI, RubyGems, Clojars,
    # NuGet, Sourcegraph, Atlassian/Bitbucket, Docker, Fly, Pulumi, Prefect, ReadMe,
    # Terraform Cloud, Vault, Doppler, Contentful, Databricks, Sentry, New Relic,
    # Dynatrace, Grafana, Netlify, Vercel, Notion, Linear)
    r"gh[pousr]_", r"github_pat_", r"ghsat_",
    r"gl(?:pat|ptt|dt|rt|cbt|ffct|ft|imt|agent|oas|soat|sa|c|wt)[-_]", r"GR1348941",
    r"npm_", r"pypi-AgE", r"rubygems_", r"CLOJARS_", r"oy2", r"sgp_", r"ATBB", r"ATCTT3xFfG",
    r"ATATT3xFfG", r"BBDC-", r"dckr_pat_", r"dckr_oat_", r"dckr_", r"fo1_", r"FlyV1 ", r"pul-",
    r"pnu_", r"rdme_", r"tfp_", r"atlasv1\.", r"hv[sbr]\.", r"dp\.(?:pt|st|sa|ct|scim|audit)\.",
    r"CFPAT-", r"dapi", r"ico-", r"sntry[su]_", r"NRAK-", r"NRII-", r"NRJS-", r"NRAA-",
    r"dt0[a-z]\d\d\.", r"glsa_", r"pat\.", r"sat\.", r"nfp_", r"vercel_", r"ntn_", r"secret_",
    r"lin_(?:api|oauth)_",
    # messaging and e-mail (Brevo, SendGrid, Postman, Slack, Age)
    r"xkeysib-", r"xsmtpsib-", r"SG\.", r"PMAK-", r"PMAT-", r"xox[abeposrc]-", r"xapp-",
    r"xwfp-", r"AGE-SECRET-KEY-1",
    # commerce and payments (Shopify, Shippo, EasyPost, Duffel, Flutterwave, Square,
    # Facebook/Meta, PlanetScale, Plaid, Frame.io, Heroku, Scalingo)
    r"shp(?:at|ca|pa|ss)_", r"shippo_(?:live|test)_", r"EZ[AT]K", r"duffel_(?:live|test)_",
    r"FLW(?:SECK|PUBK)(?:_TEST)?-", r"sq0(?:atp|csp)-", r"EAAA", r"EAA[A-Z]",
    r"pscale_(?:tkn|oauth|pw)_", r"access-(?:sandbox|development|production)-", r"dnkey-",
    r"HRKU-", r"fio-u-", r"sm_(?:aat|pat|sat)_", r"s-s4t2(?:ud|af)-", r"ops_eyJ",
    # webhooks whose URL is the credential (Slack, Discord, Teams, Google Chat)
    r"https?://hooks\.slack\.com/(?:services|workflows|triggers)/",
    r"https?://(?:discord(?:app)?\.com|[a-z]+\.discord\.com)/api/webhooks/",
    r"https?://[A-Za-z0-9\-]+\.webhook\.office\.com/",
    r"https?://outlook\.office(?:365)?\.com/webhook/", r"https?://chat\.googleapis\.com/v1/spaces/",
    # clouds (AWS key ids, Bedrock, Google API keys and OAuth, Azure storage, Alibaba,
    # Yandex, DigitalOcean, JFrog, Mailgun, Twilio, OpenShift, Discord bot tokens)
    "AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "AIPA", "ANPA", "ANVA", "APKA",
    r"ABSK", r"bedrock-api-key-", r"AIza", r"GOCSPX-", r"ya29\.", r"1//0", r"AccountKey=",
    r"SharedAccessSignature", r"LTAI", r"YCAJ", r"YCM", r"YCP", r"AQVN", r"t1\.", r"doo_v1_",
    r"dop_v1_", r"dor_v1_", r"AKCp", r"cmVmd", r"MTI", r"MTA", r"MTE", r"sha256~", r"v1\.0-",
    r"tk-us-", r"key-", r"pubkey-", r"SK(?=[0-9a-fA-F]{32})", r"AC(?=[0-9a-fA-F]{32})",
    # generic short prefixes (need a longer, token-like tail: _WEAK below)
    r"live_", r"test_", r"API-", r"sl\.", r"s\.", r"b\.", r"pk\.", r"sk\.", r"ext_",
]
_PROVIDER_TAIL = r"[A-Za-z0-9_\-+/.~%=]"
_PROVIDER = re.compile(_trie(_PREFIXES) + _PROVIDER_TAIL + "{6,2048}+")
# Short or ambiguous prefixes need a longer, token-like tail than distinctive ones.
_WEAK = re.compile(r"(?:SK|AC|live_|test_|key-|pubkey-|s\.|b\.|t1\.|API-|sl\.|MT[IAE]|sk-|"
                   r"secret_|pat\.|sat\.|pk\.|sk\.|ext_|dapi|AKCp|cmVmd|LTAI|YC[AMP]|AQVN|EAA[A-Z])")
# OpenAI, Anthropic (any sk-ant- key), OpenRouter and Langfuse keys: distinctive
# prefixes, unlike a bare "sk-".
_STRONG_SK = re.compile(r"sk-(?:proj|svcacct|admin|ant|or-v1|lf)-")
_TWILIO = re.compile(r"(?:SK|AC)[0-9a-fA-F]{32}")

# -- documented shapes without a prefix: Mailchimp (hex32-usN), Telegram bot tokens,
# Mailgun signing keys (hex32-hex8-hex8); and short prefixes with a tail of hex only, which
# the bare-token rule takes for a name and a digest (flash_<md5>), so they are matched whole
# at their documented length: SonarQube (sq[pua]_), Firecrawl (fc-), Supabase (sbp_), E2B
# (e2b_), LangSmith (lsv2_pt_, lsv2_sk_) -------------------------------------------------------
_SHAPES = (r"[0-9a-f]{32}-us[0-9]{1,2}|[0-9]{5,16}:A[A-Za-z0-9_\-]{34}"
           r"|[0-9a-z]{32}-[0-9a-z]{8}-[0-9a-z]{8}|sq[pua]_[0-9a-f]{40}|fc-[0-9a-f]{32}"
           r"|sbp_[0-9a-f]{40}|e2b_[0-9a-f]{40}|lsv2_(?:pt|sk)_[0-9a-f]{32}_[0-9a-f]{10}")
# For sre, only where a run starts (or right after a JSON escape): inside a long hex run
# every position would otherwise try 32 characters (linear, but 0.3 s per MB).
_SHAPES_SRE = r"(?:(?<![A-Za-z0-9_\-])|(?<=\\[nrtbf]))(?:" + _SHAPES + ")"

# -- headers (on the lower-cased copy) -------------------------------------------------------
_AUTH_LOW = re.compile(
    r"(?:proxy-)?authorization[\"']?\s{0,4}+[:=]\s{0,4}+[\"']?"
    r"(?:(?:basic|bearer|token|digest|apikey|api-key|key|sso-key|negotiate|ntlm|"
    r"aws4-hmac-sha256|sharedkey)\s{1,4}+)?"
    r"(?P<secret>[^\s\"'\\,;]{6,2048}+)"
)
_SCHEME_LOW = re.compile(r"(?:bearer|basic)\s{1,4}+(?P<secret>[a-z0-9_\-.=~+/%]{8,2048}+)")
# A Cookie (or Set-Cookie) header's value, or a session cookie's NAME=VALUE anywhere
# (_gitlab_session=, laravel_session=, sessionid=, JSESSIONID=, PHPSESSID=, connect.sid=):
# the pair is what a browser sends and all one needs to take over the session, so it is
# replaced whole. ``session_id=`` is left out: logs and agent traces use it for ids. Each
# alternative starts with a literal, so the engine skips to candidates by their first
# character (8x faster than a pattern that opens with an optional group).
_SESSION_VALUE = r"[a-z0-9%_\-.+/~=]{16,1024}+"
_COOKIE_LOW = re.compile(
    r"cookie\s{0,4}+:\s{0,4}+(?P<secret>[^\r\n\\]{1,4096}+)"
    rf"|session(?:id)?=(?P<session>{_SESSION_VALUE})|sessid=(?P<sessid>{_SESSION_VALUE})"
    rf"|\.sid=(?P<sid>{_SESSION_VALUE})")

# -- NAME <op> VALUE where NAME holds a secret word as a segment, with any prefix -----------
# (FOO_API_KEY=, client_secret:, "password": "...", apiKey:, X-Api-Key:, --token=,
# "my key is ..."). The pattern starts at the secret word; the start of the name is found
# by a bounded look back (_NAME_BACK), not by a leading [...]+ that would rescan.
_SECRET_KEYWORDS = ["pass", "pwd", "secret", "token", "key", "auth", "cred", "cookie",
                    "session", "jwt", "pat", "dsn", "sig", "salt", "seed", "mnemonic", "client",
                    "license", "webhook", "pin", "otp", "sas", "connection", "api", "access",
                    "private"]
_ASSIGN_LOW = re.compile(
    _trie(_SECRET_KEYWORDS)
    + r"(?P<rest>[a-z0-9_.\-]{0,40}+)"
    r"(?:\\?[\"'\]])?"
    r"(?P<op>(?:\s{0,4}+(?:[:=]{1,2}|=>|->)|\s{1,4}+(?:is|was|are|as)\s{1,3}+:?)\s{0,4}+)"
    r"(?:\\?[\"'`])?"
    r"(?:(?:bearer|basic|token)\s{1,4}+)?"
    r"(?P<secret>[^\s\"'`,;<>\\)\](}{\[]{1,1024}+)"
)
_ASSIGN_SCAN = (_trie(_SECRET_KEYWORDS) + r"[a-z0-9_.\-]{0,40}(?:\\?[\"'\]])?"
                r"(?:\s{0,4}(?:[:=]|=>|->)|\s{1,4}(?:is|was|are|as)\s)")
_NAME_BACK = re.compile(r"[A-Za-z0-9_.\-]{0,40}$")

# -- a bare token: a maximal run of token characters, judged in Python --------------------
_BARE = r"[A-Za-z0-9_\-+/=.~%|]"
# The longest bare token the pattern takes (a longer run is cut into several matches):
# bounds the work of one decision.
_BARE_CAP = 1024
_BARE_REST = re.compile(_BARE + "*+")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_HEXISH = re.compile(r"[0-9a-fA-F\-]+")
_UUID_CHARS = 36
_DIGIT = re.compile(r"[0-9]")
_ID_BEFORE = re.compile(
    r"(?i)(?:\bid|_id|Id|uuid|guid|sha\d*|hash|digest|checksum|etag|commit|revision|\brev|"
    r"nonce|trace|span|request|correlation|message|object|file|image|build|run|job|version)"
    r"[\"']?\s{0,3}(?:[:=]|\s)\s{0,3}[\"']?$"
)

# -- a key whose alphabet has symbols (sk_ubb4yN3mzqGR2x8#P7r5&@*xC$utE) is cut by the token
# rules at its first symbol; the rest, up to a space, quote or bracket, is the same key ---
_SYMBOL_TAIL = re.compile(r"[^\s\"'`\\<>()\[\]{},;:/=]{1,256}+")


def _through_symbols(text: str, end: int) -> int:
    """Where a token redacted up to ``end`` really ends: past a run that starts with a
    password symbol and holds another and a letter or digit. Not past a URL fragment
    (``#L12``, ``#section-2``: one symbol), a query (``&a=1``), a path or an e-mail host
    (the run stops at ``= / :``, or holds ``@host.tld``)."""
    if end >= len(text) or text[end] not in PASSWORD_SYMBOLS:
        return end
    run = _SYMBOL_TAIL.match(text, end)
    if run is None:
        return end
    stop = run.end()
    tail = run.group(0)
    if stop < len(text) and (text[stop] in "=/:" or _SYMBOL_TAIL.match(text, stop)):
        return end  # a query string, a path, or a run too long to be one key
    if (sum(c in PASSWORD_SYMBOLS for c in tail) < 2 or not any(c.isalnum() for c in tail)
            or host_after_at(tail)):
        return end
    return stop


# -- e-mail: found at the @, the local part by a bounded look back ------------------------
_EMAIL_AT = re.compile(r"@(?P<host>(?:[A-Za-z0-9\-]{1,63}+\.){1,8}+[A-Za-z]{2,24}+)"
                       r"(?![A-Za-z0-9\-.@])")
_LOCAL_REV = re.compile(r"[A-Za-z0-9._%+\-]{1,64}+")
# Service users and scp-style hosts are not someone's address (git@github.com:org/repo).
_SERVICE_USERS = frozenset({"git", "hg", "svn", "ssh", "ubuntu", "ec2-user", "root", "admin",
                            "postgres", "deploy", "noreply", "no-reply", "bitbucket", "gitlab",
                            "github"})


class _Re2Scan:
    """One RE2 pattern, located over a ``str``. On ASCII text (most of it) RE2 runs on
    the bytes, whose offsets are the characters'; otherwise the wrapper maps every match
    back to characters, 5 to 10 us each. One RE2 pass either way (the wrapper encodes the
    text per call, so never ``search()`` in a loop)."""

    def __init__(self, re2: Any, pattern: str) -> None:
        self._chars, self._bytes = re2.compile(pattern), re2.compile(pattern.encode("utf-8"))

    def spans(self, text: str) -> tuple[Iterator[tuple[int, int]], bool]:
        """The matches' ``(start, end)`` in ``text``, and whether they came from the
        bytes (cheap per match) rather than the wrapper's character offsets."""
        if text.isascii():
            return (m.span() for m in self._bytes.finditer(text.encode("ascii"))), True
        return (m.span() for m in self._chars.finditer(text)), False


class _Prefiltered:
    """``finditer`` that finds candidate starts with RE2 (a DFA, about 100 MB/s) and takes
    each match, with its groups, from the stdlib pattern at that start. A candidate costs
    microseconds, so in text dense with them (hostile, mostly) the stdlib pattern carries
    on alone after ``_PREFILTERED_CANDIDATES``: bounded, and the same matches as the
    stdlib pattern."""

    def __init__(self, re2: Any, scan: str, pattern: re.Pattern[str]) -> None:
        self.scan, self.pattern = _Re2Scan(re2, scan), pattern

    def finditer(self, text: str) -> Any:
        pos = 0
        # Candidates are short (a prefix and a few characters); one the stdlib pattern
        # rejects is tried at each of its other positions, where a real match may start
        # that RE2 stepped over.
        candidates, _ = self.scan.spans(text)
        for i, (start, end) in enumerate(candidates):
            if i >= _PREFILTERED_CANDIDATES:
                yield from self.pattern.finditer(text, max(pos, start))
                return
            for at in range(max(start, pos), end):
                m = self.pattern.match(text, at)
                if m is not None:
                    pos = m.end()
                    yield m
                    break


class _TokenRuns:
    """``finditer`` of the bare-token pattern (maximal runs of token characters, cut at
    ``_BARE_CAP``): RE2 finds the runs, and the stdlib pattern takes each run's matches.
    The stdlib engine tries the pattern at every letter; RE2's DFA skips prose about ten
    times faster and dense text (JSON of ids, code) about twice as fast. In dense text
    the stdlib pattern carries on alone (after ``_ASCII_RUNS`` runs found on bytes,
    ``_UNICODE_RUNS`` through the wrapper's offsets). The same matches as the stdlib
    pattern either way."""

    def __init__(self, re2: Any, pattern: re.Pattern[str]) -> None:
        run = _BARE + "{14}" + _BARE + "*"  # RE2 repeats at most 1,000 times
        self.scan, self.pattern = _Re2Scan(re2, run), pattern

    def finditer(self, text: str) -> Any:
        runs, on_bytes = self.scan.spans(text)
        limit = _ASCII_RUNS if on_bytes else _UNICODE_RUNS
        for i, (start, end) in enumerate(runs):
            if i >= limit:
                yield from self.pattern.finditer(text, start)
                return
            # No stdlib match starts before a run or ends past it (runs are maximal).
            yield from self.pattern.finditer(text, start, end)


# Candidates RE2 reports one by one before the stdlib pattern takes over. The stdlib
# pattern costs about as much over a 16 KB slice (a redaction call's most) as RE2 over
# some 140 runs on bytes, 30 through the wrapper's character offsets, or 100 prefilter
# candidates (each also tried by the stdlib pattern).
_ASCII_RUNS = 128
_UNICODE_RUNS = 16
_PREFILTERED_CANDIDATES = 256


# -- decisions ---------------------------------------------------------------------------------
def _whole(kind: str) -> Decide:
    return lambda m, text: (m.start(), m.end(), kind)


def _group(kind: str) -> Decide:
    def decide(m: Any, text: str) -> tuple[int, int, str] | None:
        a, b = m.span("secret")
        return None if text.startswith("[REDACTED", a) else (a, b, kind)
    return decide


def _d_provider(m: Any, text: str) -> tuple[int, int, str] | None:
    s = m.group(0)
    if not left_ok(text, m.start()):
        return None
    if s[:2] in ("SK", "AC") and not _TWILIO.match(s) and s[:4] not in ("ACCA", "SKIA"):
        return None  # RE2 has no lookahead: the Twilio SK/AC shape is checked here
    weak = None if _STRONG_SK.match(s) else _WEAK.match(s)
    if weak:
        tail = s[weak.end():]
        if len(tail) < 14 or not looks_tokenish(tail):
            return None
    return m.start(), _through_symbols(text, m.end()), "api_key"


def _d_shape(m: Any, text: str) -> tuple[int, int, str] | None:
    a, b = m.span()
    if not left_ok(text, a) or (b < len(text) and (text[b].isalnum() or text[b] in "_-")):
        return None
    return a, b, "api_key"


_d_url_password = _group("url_password")
_d_cookie_header = _group("cookie")


def _d_url_or_pair(m: Any, text: str) -> tuple[int, int, str] | None:
    if m.group("secret") is not None:
        return _d_url_password(m, text)
    colon = m.start()
    a, b = m.span("password")
    if b < len(text) and not (text[b].isspace() or text[b] in _PAIR_AFTER):
        return None  # the run stopped at a path, port, call or tag, or ran past 128
    while b > a and text[b - 1] == ".":
        b -= 1  # the full stop of a sentence
    back = _PAIR_USER_REV.match(text[max(0, colon - 64):colon][::-1])
    if back is None:
        # No user: ":password" inside quotes (curl -u ":token"), the password only.
        quote = text[colon - 1] if colon else ""
        if (quote not in ("\"", "'") or not left_ok(text, colon - 1) or b >= len(text)
                or text[b] != quote or not password_like(text[a:b])):
            return None
        return a, b, "url_password"
    start = colon - len(back.group(0))
    escaped = start >= 1 and text[start - 1] == "\\" and text[start] in "nrt"
    if escaped:
        start += 1  # the n of a JSON \n escape is not part of the user name
    if start == colon or not text[start].isalpha():
        return None
    if start and not escaped and text[start - 1] not in _PAIR_BEFORE:
        return None  # inside a word, a path (/name:tag), a chain (a:b:c) or an address
    if not password_like(text[a:b]) or named_id_before(text, a):
        return None  # named_id_before: sha256:..., commit:..., build_id:...
    return start, b, "url_password"


def _d_cookie(m: Any, text: str) -> tuple[int, int, str] | None:
    if m.lastgroup == "secret":
        return _d_cookie_header(m, text)
    a, b = m.span(m.lastgroup)
    if b < len(text) and (text[b] in "([{" or b - a == 1024):
        return None  # code (session=make_session(...)), or a run too long for a cookie
    value = text[a:b]
    if "=" in value.rstrip("="):
        return None  # more pairs in one run (a=b=c), not one cookie value
    if not value_is_secret(value, "=") or not looks_tokenish(value) or wordy(value):
        return None
    keyword = m.start()
    back = _PAIR_USER_REV.match(text[max(0, keyword - 40):keyword][::-1])
    start = keyword - len(back.group(0)) if back else keyword
    if start >= 1 and text[start - 1] == "\\" and text[start] in "nrt":
        start += 1  # the n of a JSON \n escape is not part of the name
    return start, b, "cookie"


def _d_jwt(m: Any, text: str) -> tuple[int, int, str] | None:
    return (m.start(), m.end(), "jwt") if left_ok(text, m.start()) else None


def _d_scheme(m: Any, text: str) -> tuple[int, int, str] | None:
    a, b = m.span("secret")
    if not left_ok(text, m.start()) or not any(c.isdigit() for c in text[a:b]):
        return None  # "Bearer authentication" is prose: a credential holds a digit
    return a, b, "bearer_token"


def _d_assign(m: Any, text: str) -> tuple[int, int, str] | None:
    a, b = m.span("secret")
    value, op = text[a:b], m.group("op")
    if not value_is_secret(value, op):
        return None
    keyword = m.start()
    back = _NAME_BACK.search(text, max(0, keyword - 40), keyword)
    start = back.start() if back else keyword
    name = text[start:m.end("rest")]
    if start >= 2 and text[start - 2] == "\\" and name[:1] in "nrt":
        name = name[1:]  # the n of a JSON \n escape is not part of the name
    if not name_is_secret(name):
        return None
    return a, b, "secret_assignment"


def _bare_decider(bare_ids: bool) -> Decide:
    """The decision of the ``high_entropy`` rule on a bare token; with ``bare_ids``, a
    hex string (32 digits or more) or UUID alone on its line is a secret too
    (``looks_random``). Each mode keeps its own memo of clean tokens."""
    # Tokens judged not secret by their shape alone: identifiers, field names and ids
    # come back in every tool result, and most of a bare token's decision is its shape.
    # Only clean tokens are kept (never a secret), and only short ones (names and ids; at
    # most about 1 MB in all), cleared when full.
    clean: set[str] = set()

    def decide(m: Any, text: str) -> tuple[int, int, str] | None:
        tok = m.group(0)
        start = m.start()
        if start >= 1 and text[start - 1] == "\\" and tok[0] in "nrt":
            tok = tok[1:]  # the n of an escaped newline (\n) is not part of the token
            start += 1
            if len(tok) < 14:
                return None
        if start and not left_ok(text, start) and text[start - 1] != "]":
            return None
        if "[REDACTED" in text[max(0, start - 10):m.end() + 1]:
            return None
        # Only alone on its line is a bare id taken for a secret ("session <uuid>
        # started" and "<sha256>  dist/x.tar.gz" still say what it is), so that decision
        # is made before the memo of clean tokens, which knows nothing of lines.
        alone = bare_ids and _alone_on_line(text, start, start + len(tok))
        if not alone and tok in clean:
            return None
        shape = _bare_shape(tok, bare_ids=alone)
        if shape is None or (shape[2] and named_id_before(text, start)):
            if shape is None and not alone and len(tok) <= _CLEAN_TOKEN_CHARS:
                if len(clean) >= _CLEAN_TOKENS_MAX:
                    clean.clear()
                clean.add(tok)
            return None
        return start + shape[0], _bare_end(m, text, start + shape[1]), "high_entropy"

    return decide


_CLEAN_TOKENS_MAX = 8192
_CLEAN_TOKEN_CHARS = 64
# What may stand between a token and its line's ends for it to be alone on the line:
# spaces, quotes and a trailing comma; a line ends at a newline or its JSON escape.
_LINE_PADDING = " \t\"'`,"
_MAX_LINE_PADDING = 8


def _alone_on_line(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` is alone on its line (bounded look either side)."""
    i = start
    while i > 0 and start - i < _MAX_LINE_PADDING and text[i - 1] in _LINE_PADDING:
        i -= 1
    if not (i == 0 or text[i - 1] == "\n" or text[max(0, i - 2):i] in ("\\n", "\\r")):
        return False
    j = end
    while j < len(text) and j - end < _MAX_LINE_PADDING and text[j] in _LINE_PADDING:
        j += 1
    return j == len(text) or text[j] in "\r\n" or text.startswith(("\\n", "\\r"), j)


def _bare_shape(tok: str, bare_ids: bool = False) -> tuple[int, int, bool] | None:
    """What a bare token's shape alone says: None when it is no secret, else the offsets
    of the part to redact within it, and whether an id name written before the token
    (``commit 3f2a...``) still clears it."""
    n = len(tok)
    if len(set(tok)) < 0.5 * min(n, 36) and not (
            _HEXISH.fullmatch(tok) and (
                bare_ids or (tok != tok.lower() and tok != tok.upper())
                or (n == _UUID_CHARS and made_up_uuid(tok)))):
        return None  # fast path: too little variety for a random token (hex in both
        # cases has only 22 letters to vary, a UUID 17: looks_random judges them)
    if not _DIGIT.search(tok) and (n < 20 or tok.islower() or tok.isupper()):
        return None  # fast path: words, paths, constants
    core = tok.strip(".-_~:|")
    off = tok.find(core)
    eq = core.find("=", 1)
    if 0 < eq < len(core.rstrip("=")):
        left = core[:eq]
        if _IDENT.fullmatch(left) and wordy(left):
            # name=value inside one run (trace_id=..., sha256=..., filename=...)
            value = core[eq + 1:]
            if (_ID_BEFORE.search(left + "=") or NOT_SECRET_NAME.search(left)
                    or not looks_random(value, bare_ids)):
                return None
            return off + eq + 1, off + len(core), False
    if not looks_random(core, bare_ids):
        return None
    return off, off + len(core), True


def _bare_end(m: Any, text: str, end: int) -> int:
    """Where the redaction of a bare token that ends at ``end`` stops: past a password
    symbol tail, and past the rest of its run when the pattern cut the run at
    ``_BARE_CAP`` characters (the rest is the same token, and its next match starts
    mid-word, where no token may start: left alone, it would leak)."""
    if m.end() - m.start() >= _BARE_CAP and m.end() < len(text):
        stop = _BARE_REST.match(text, m.end()).end()  # type: ignore[union-attr]
        while stop > m.end() and text[stop - 1] in ".-_~:|":
            stop -= 1  # trailing punctuation, as the token's own core drops it
        if stop > m.end():
            return _through_symbols(text, stop)
    return _through_symbols(text, end)


def _d_email(m: Any, text: str) -> tuple[int, int, str] | None:
    at = m.start()
    back = _LOCAL_REV.match(text[max(0, at - 64):at][::-1])
    if not back:
        return None
    local = back.group(0)[::-1].lstrip(".")
    end = m.end()
    if local.lower() in _SERVICE_USERS or (end < len(text) and text[end] == ":"):
        return None  # git@github.com:org/repo, ubuntu@ec2-host
    return at - len(local), end, "email"


def build_rules(use_re2: bool = RE2_AVAILABLE, bare_ids: bool = False
                ) -> dict[str, SecretRule]:
    """The default rules, in order; ``use_re2=False`` gives the stdlib-only set (the
    tests compare the two); ``bare_ids`` redacts bare hex and UUIDs too."""
    re2 = _re2 if use_re2 else None
    provider: Any = _PROVIDER
    shapes: Any = re.compile(_SHAPES_SRE)
    assign: Any = _ASSIGN_LOW
    bare_runs = re.compile(f"{_BARE}{{14,{_BARE_CAP}}}+")
    bare: Any = bare_runs
    if re2 is not None:
        # RE2 has neither lookahead nor possessive runs: drop both (decide() checks the
        # Twilio lookahead), and let RE2 only locate; sre takes the match from there.
        provider = _Prefiltered(
            re2, (_trie(_PREFIXES) + _PROVIDER_TAIL + "{6}").replace("(?=[0-9a-fA-F]{32})", ""),
            _PROVIDER)
        shapes = re2.compile(_SHAPES)
        assign = _Prefiltered(re2, _ASSIGN_SCAN, _ASSIGN_LOW)
        bare = _TokenRuns(re2, bare_runs)
    return {
        "private_key": SecretRule(_PRIVATE_KEY, _whole("private_key"), ("-----BEGIN",),
                                  multiline=True),
        "putty_key": SecretRule(_PUTTY, _whole("private_key"), ("PuTTY-User-Key-File",),
                                multiline=True),
        "url_password": SecretRule(_URL_CRED, _d_url_or_pair, (":",)),
        "jwt": SecretRule(_JWT, _d_jwt, ("eyJ",)),
        "api_key": SecretRule(provider, _d_provider),
        "api_key_shape": SecretRule(shapes, _d_shape),
        "auth_header": SecretRule(_AUTH_LOW, _group("auth_header"), ("authorization",),
                                  lowered=True),
        "bearer_token": SecretRule(_SCHEME_LOW, _d_scheme, ("bearer", "basic"), lowered=True),
        "cookie": SecretRule(_COOKIE_LOW, _d_cookie, ("cookie", "session", "sessid", ".sid"),
                             lowered=True),
        "secret_assignment": SecretRule(assign, _d_assign,
                                        (":", "=", " is ", " was ", " are ", " as "),
                                        lowered=True),
        "high_entropy": SecretRule(bare, _bare_decider(bare_ids)),
        "email": SecretRule(_EMAIL_AT, _d_email, ("@",)),
    }


DEFAULT_RULES: dict[str, SecretRule] = build_rules()


@functools.cache
def bare_id_rules() -> dict[str, SecretRule]:
    """The default rules with bare hex and UUIDs redacted too, built on first use (the
    ``GUARDTRACE_REDACT_BARE_IDS`` setting)."""
    return build_rules(bare_ids=True)
