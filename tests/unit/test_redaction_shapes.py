"""Secrets recognisable with no name before them, each beside the everyday text of the
same look that must stay as it is: ``user:password`` pairs, session cookies, keys whose
alphabet has symbols, hex in both cases, and short vendor prefixes with a hex tail.

A secret alone on a line of a reply has no ``api_key =`` to go by, so these shapes are
what catches it there (issue 13); their neighbours are times, ports, image tags, paths,
``module:attr``, ids and code.
"""

from __future__ import annotations

import hashlib
import uuid

import pytest

from guardtrace.collectors.emit.redaction import Redactor
from guardtrace.collectors.emit.secret_shapes import looks_random, password_like


def _redacted(text: str) -> str:
    return Redactor().redact(text)


def _untouched(text: str) -> bool:
    return Redactor().redact_counted(text) == (text, 0)


# -- user:password pairs ---------------------------------------------------------------------
@pytest.mark.parametrize(("text", "expected"), [
    ("curl -u developer:yqDVtkqPECriaLRi https://api.example.com",
     "curl -u [REDACTED:url_password] https://api.example.com"),
    ("curl --user=elastic:P@ssw0rd$1 http://localhost:9200",
     "curl --user=[REDACTED:url_password] http://localhost:9200"),
    ("log in as admin:S3cr3t!pw.", "log in as [REDACTED:url_password]."),
    # curl -u with no user name: the password only, inside its quotes
    ('curl -u ":d2LkV78zLx!t" https://x', 'curl -u ":[REDACTED:url_password]" https://x'),
    # alone on a line of a JSON-encoded reply: the n of \n is not part of the user name
    ("here:\\ndeveloper:yqDVtkqPECriaLRi\\nthanks", "here:\\n[REDACTED:url_password]\\nthanks"),
])
def test_a_user_password_pair_is_replaced_whole(text: str, expected: str) -> None:
    assert _redacted(text) == expected


@pytest.mark.parametrize("text", [
    "Note: see the docs", "Note:Remember1!", "http://host:8080/path", "localhost:8080",
    "12:30", "at 12:30:45.123456+00:00", "key:value", "std::vector<int>", "python:3.11-slim",
    "image: nginx:1.25.3-alpine", "guardtrace.cli:main", "ERROR:root:Something1! failed",
    "app.kubernetes.io/name:my-app", "fe80::1ff:fe23:4567:890a", "color:#ff00aa80",
    "ports: 8080:80", "volumes: ./data:/var/lib/data", "x:Dict[str,int]",
    "file.py:123:45: E501 line too long", ":white_check_mark: done",
    "getHTTPResponseURLForID:getHTTPResponseURLForID",
    # minified code: keys after { and , are not user names
    "{cutoffPixels:e,flipY:i?.flipY??!1}",
    # placeholders, and ids or digests named before the colon
    "user:password", "admin:changeme", "elastic:${ELASTIC_PASSWORD}", "user:<password>",
    f"commit:{hashlib.sha1(b'c').hexdigest()[:16]}", f"sha256:{hashlib.sha256(b'd').hexdigest()}",
])
def test_colon_pairs_that_are_not_credentials_are_left_alone(text: str) -> None:
    assert _untouched(text)


@pytest.mark.parametrize(("value", "is_password"), [
    ("P@ssw0rd$1", True), ("d2LkV78zLx!t", True), ("yqDVtkqPECriaLRi", True),
    # camelCase names, long ones too (entry points: module:_ParentBasedAlwaysOff)
    ("_ParentBasedAlwaysOff", False), ("getHTTPResponseURLForID", False),
    ("3.11-slim", False), ("Remember1!", False),  # a trailing ! is punctuation
    ("john.doe1@example.com", False), ("a=1&b=2#x9", False), ("$HOME1abc", False),
])
def test_what_a_password_after_a_user_name_looks_like(value: str, is_password: bool) -> None:
    assert password_like(value) is is_password


# -- session cookies -------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "expected"), [
    ("_gitlab_session=yojqtirweaku4jxogemp0j4hcrxh7hvj", "[REDACTED:cookie]"),
    ("here:\\n_gitlab_session=52zsiqd01cnwpamd0b5eeo0u8uz8bcr9\\nthanks",
     "here:\\n[REDACTED:cookie]\\nthanks"),
    ("set JSESSIONID=7F3A9C0B12D45E6F7A8B9C0D1E2F3A4B; Path=/", "set [REDACTED:cookie]; Path=/"),
    ("PHPSESSID=9ht3k1q2p7b8m4n5v6c0x1z2a3", "[REDACTED:cookie]"),
    ("connect.sid=s%3AuZ8kq2wL0pN4x7Yb.Hq3mT9vR2sK8dF1gJ6hZ0cV5bN7mX4qW", "[REDACTED:cookie]"),
    # the header form, Set-Cookie included, as before
    ("Set-Cookie: sessionid=abc; HttpOnly", "Set-Cookie: [REDACTED:cookie]"),
])
def test_a_session_cookie_is_replaced_name_and_value(text: str, expected: str) -> None:
    assert _redacted(text) == expected


@pytest.mark.parametrize("text", [
    f"session_id={uuid.UUID(int=7, version=4)}",  # an id in logs, not a cookie
    "session=requests.Session()", "session_timeout=3600", "use_session=True",
    "SESSION_COOKIE_NAME=sessionid", "sessionid=abc", "possession=nine-tenths-of-the-law",
])
def test_session_words_that_are_not_cookies_are_left_alone(text: str) -> None:
    assert _untouched(text)


# -- keys whose alphabet has symbols ---------------------------------------------------------
@pytest.mark.parametrize(("text", "expected"), [
    ("sk_ubb4yN3mzqGR2x8#P7r5&@*xC$utE", "[REDACTED:high_entropy]"),
    ("key sk_ubb4yN3mzqGR2x8#P7r5&@*xC$utE, use it", "key [REDACTED:high_entropy], use it"),
    # what follows a random token and is not the key: a query, a fragment, an anchor
    ("token aB3dE5fG7hJ9kL1mN2pQ&page=2", "token [REDACTED:high_entropy]&page=2"),
    ("aB3dE5fG7hJ9kL1mN2pQ#section-2 done", "[REDACTED:high_entropy]#section-2 done"),
    ("aB3dE5fG7hJ9kL1mN2pQ#L12", "[REDACTED:high_entropy]#L12"),
])
def test_a_key_is_redacted_through_its_symbols_and_no_further(text: str, expected: str) -> None:
    assert _redacted(text) == expected


# -- hex in both cases ---------------------------------------------------------------------
def test_hex_in_random_mixed_case_is_a_key() -> None:
    assert _redacted("6d2FabeB6ADd229Bc199FabA28fD3efb57dF0bD3") == "[REDACTED:high_entropy]"


@pytest.mark.parametrize("text", [
    hashlib.sha1(b"e").hexdigest(), hashlib.sha1(b"e").hexdigest().upper(),  # Get-FileHash
    str(uuid.UUID(int=11, version=4)).upper(),
    "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",  # an EIP-55 address: public
    "DeadBeefCafeBabe0123",  # camelCase words of hex letters
])
def test_hashes_ids_and_hex_words_stay(text: str) -> None:
    assert _untouched(text)
    assert not looks_random(text)


# -- UUID-shaped keys: random hex in UUID form, without a UUID's version and variant --------
def _random_uuid_shape(seed: int) -> str:
    # As the corpora's keys are drawn: 32 random hex digits, dashed as a UUID.
    digits = hashlib.sha256(str(seed).encode()).hexdigest()[:32]
    return "-".join((digits[:8], digits[8:12], digits[12:16], digits[16:20], digits[20:]))


@pytest.mark.parametrize("key", [
    "9e6930b7-a1da-e296-60b7-41a968e73671",  # gitleaks' Heroku sample: version e, variant 6
    "23008A4F-C91F-53BB-F47F-0D7169C3BC94",  # HubSpot's: version 5, variant F
    *[k for k in map(_random_uuid_shape, range(40))
      if not (k[14] in "12345678" and k[19] in "89ab")][:8],
])
def test_a_uuid_shaped_key_no_uuid_generator_made_is_redacted_even_alone(key: str) -> None:
    assert _redacted(key) == "[REDACTED:high_entropy]"
    body = '"here:\\n' + key + '\\nthanks"'  # alone on a line of a JSON-encoded reply
    assert key not in _redacted(body)


@pytest.mark.parametrize("text", [
    str(uuid.uuid1()), str(uuid.uuid3(uuid.NAMESPACE_DNS, "a")), str(uuid.uuid4()),
    str(uuid.uuid5(uuid.NAMESPACE_URL, "b")), str(uuid.UUID(int=7 << 76 | 1 << 63 | 12345)),
    str(uuid.uuid4()).upper(),
    "00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff",
    "00000000-0000-0000-C000-000000000046",  # IUnknown's class id
])
def test_uuids_every_generator_makes_stay(text: str) -> None:
    assert _untouched(text)


# -- bare ids, when the deployment asks for them redacted -----------------------------------
@pytest.mark.parametrize("token", [
    hashlib.sha1(b"k").hexdigest(), hashlib.sha256(b"k").hexdigest(),
    str(uuid.UUID(int=99, version=4)), hashlib.md5(b"k").hexdigest(),
])
def test_bare_hex_and_uuids_alone_are_redacted_only_with_bare_ids(token: str) -> None:
    line = f"here:\\n{token}\\nthanks"  # alone on a line of a JSON-encoded reply
    assert Redactor().redact(line) == line
    assert token not in Redactor(bare_ids=True).redact(line)
    assert token not in Redactor(bare_ids=True).redact(f'"{token}",\n')
    # Not alone on its line, a name or the words around it say what it is; short ids
    # stay either way.
    for named in (f"commit {token}", f"request_id: {token}", token[:12],
                  f"session {token} started", f"{token}  dist/guardtrace-0.1.tar.gz"):
        assert Redactor(bare_ids=True).redact(named) == named
    # The memo of clean tokens does not carry a verdict from one line to another.
    redactor = Redactor(bare_ids=True)
    assert redactor.redact(f"session {token} started") == f"session {token} started"
    assert token not in redactor.redact(f"ok\n{token}\n")


# -- short vendor prefixes with a tail of hex ------------------------------------------------
@pytest.mark.parametrize("token", [
    "squ_4b78f8494075e310d62dfdcaeb14be2c78fca2fc",  # SonarQube
    "fc-7da8b1ca1d2150c496e91440d777fea8",  # Firecrawl
    "sbp_bdd0a1b2c3d4e5f60718293a4b5c6d7e8f904f23",  # Supabase
    "e2b_0123456789abcdef0123456789abcdef01234567",  # E2B
    "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",  # LangSmith
])
def test_a_hex_tailed_vendor_key_alone_on_a_line_is_redacted(token: str) -> None:
    assert _redacted(f"here:\n{token}\nthanks") == "here:\n[REDACTED:api_key]\nthanks"


@pytest.mark.parametrize("text", [
    "fc-toolbar-chunk", "sbp_reading=120",
    "fc-7da8b1ca1d2150c496e91440d777fea",  # one hex digit short of the documented length
    f"flash_{hashlib.md5(b'f').hexdigest()}.zip",
])
def test_the_same_prefixes_in_names_stay(text: str) -> None:
    assert _untouched(text)
