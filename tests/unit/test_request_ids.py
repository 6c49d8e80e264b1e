"""The one request-id rule: what the hooks store is what the readers accept, and a bad id
read back is an error that names the problem."""

from __future__ import annotations

import pytest

from guardtrace.collectors import (
    FabricationGuard,
    VerificationLoop,
    generate_validated_plan,
    validate_plan,
)
from guardtrace.collectors.testing import capture
from guardtrace.schemas import names
from guardtrace.schemas.request_ids import (
    MAX_LENGTH,
    InvalidRequestId,
    is_valid_request_id,
    storable_request_id,
    validate_request_id,
)
from guardtrace.store import queries

VALID = ["3f2b8c1e-9d4a-4c2b-8f1e-0a1b2c3d4e5f", "0af7651916cd43dd8448eb211c80319c",
         "sim-1a2b-000042", "tenant/42:order@eu+retry=1", "a", "a" * MAX_LENGTH]
HOSTILE = ["[Sign in](https://evil.example/login)", "order 42", "\x1b[31mred\x1b[0m",
           "line\r\nInjected: yes", "\ud800", "-leading-dash", "a" * (MAX_LENGTH + 1),
           "<script>alert(1)</script>", "emoji-\U0001f600", "\u202eevil"]


@pytest.mark.parametrize("request_id", VALID)
def test_valid_ids_are_stored_and_read_as_given(request_id: str) -> None:
    assert storable_request_id(request_id) == request_id
    assert validate_request_id(request_id) == request_id
    # Whitespace around a pasted id is no part of it, on either side.
    assert storable_request_id(f" {request_id}\n") == request_id
    assert validate_request_id(f"\t{request_id} ") == request_id


@pytest.mark.parametrize("request_id", HOSTILE)
def test_an_invalid_id_is_stored_as_a_valid_one_the_readers_accept(request_id: str) -> None:
    assert not is_valid_request_id(request_id)
    stored = storable_request_id(request_id)
    assert validate_request_id(stored) == stored
    assert len(stored) <= MAX_LENGTH
    assert storable_request_id(request_id) == stored  # the same id every time


def test_two_invalid_ids_never_become_the_same_stored_id() -> None:
    stored = {storable_request_id(text) for text in
              ["order 42", "order/42", "order_42 ", "order\t42", "a" * 300, "a" * 301]}
    assert len(stored) == 6
    # The readable part of the id is kept.
    assert storable_request_id("order 42").startswith("order_42-")


@pytest.mark.parametrize("request_id", HOSTILE)
def test_reading_an_invalid_id_names_the_problem_and_where_a_hook_stored_it(
        request_id: str) -> None:
    with pytest.raises(InvalidRequestId) as raised:
        validate_request_id(request_id)
    message = str(raised.value)
    assert message.startswith("not a request id: ")
    assert repr(storable_request_id(request_id)) in message
    # Quoted with repr: no control character reaches a terminal or a log line raw.
    assert not any(ord(c) < 32 or c in "\x7f\u202e" for c in message)


def test_reading_names_each_kind_of_problem() -> None:
    with pytest.raises(InvalidRequestId, match="a request id is required"):
        validate_request_id("  ")
    with pytest.raises(InvalidRequestId, match=f"{MAX_LENGTH + 1} characters, more than"):
        validate_request_id("a" * (MAX_LENGTH + 1))
    with pytest.raises(InvalidRequestId, match=r"unexpected characters ' \(\)\[\]'"):
        validate_request_id("[Sign in](x)")
    with pytest.raises(InvalidRequestId, match="it starts with '-'"):
        validate_request_id("-abc")


def test_the_store_reads_by_the_same_rule() -> None:
    assert queries.validate_request_id is validate_request_id


def test_every_hook_stores_an_invalid_id_by_the_rule() -> None:
    given = "[Sign in](https://evil.example) \x1b[2J"
    invented, valid = [{"id": "s1", "tool": "invented_tool"}], [{"id": "s1", "tool": "real_tool"}]
    plans = iter([invented, valid])
    with capture() as cap:
        FabricationGuard().check("I'm deploying the patch now.", [], request_id=given)
        validate_plan(invented, ["real_tool"], request_id=given)
        generate_validated_plan("book it", lambda _attempt: next(plans), ["real_tool"],
                                request_id=given)
        with VerificationLoop("Which month of the year is spelled with an X?",
                              request_id=given) as loop:
            loop.on_model_turn(wants_to_finish=True)  # a required check, skipped: events
    events = cap.events()
    assert {names.EVENT_FABRICATION_DETECTED, names.EVENT_HALLUCINATION_DETECTED,
            names.EVENT_HALLUCINATION_RECOVERED, names.EVENT_VERIFICATION_BYPASSED} <= \
        {event.name for event in events}
    stored = {event.attributes[names.ATTR_REQUEST_ID] for event in events}
    assert stored == {storable_request_id(given)}
    assert {payload.request_id for payload in cap.payloads} == stored
