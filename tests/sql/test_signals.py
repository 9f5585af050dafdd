"""External signals for SIGNAL steps (05-signals, S-1..S-17), through the procedures and the test clock."""

from __future__ import annotations

import datetime as dt
import functools
import itertools
import json
import os

import pymysql
import pytest

from procedures import db as dbmod
from procedures import errors, invariants, jsontext, routines, signals
from tests.support.server import drop_user
from tests.support.signals import (
    HOUR,
    NAME,
    VERSION,
    digest,
    reactivate,
    send,
    signal_flow,
    signal_row,
    signal_step,
    specified_digest,
)

# Accepted but not settled at acceptance: the signal waits for a runner (the candidate path).
queued = functools.partial(send, queued=True)


def parse(ts: str) -> dt.datetime:
    return dt.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ")


def started(world, orch, doc=None, input=None, **start) -> str:
    """Publish (once), start and drain: the SIGNAL wait of `approval` is active."""
    doc = doc or signal_flow()
    if doc["name"] not in world.published:
        world.publish(doc)
    wf = world.start(doc["name"], input or {"order_id": "o-1"}, **start)
    orch.drain()
    return wf


def stored(world) -> dict:
    return {"signals": world.db.scalar("SELECT COUNT(*) FROM weave_signals"),
            "count": world.db.scalar("SELECT COALESCE(SUM(signal_count), 0) FROM weave_instances"),
            "audit": world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'signal.accept'"),
            "events": world.db.scalar("SELECT COUNT(*) FROM weave_events")}


def rejected(world, wf, code, **fields):
    """The send fails with the validation sub-code and stores nothing (S-1)."""
    before = stored(world)
    with pytest.raises(errors.ValidationFailed) as info:
        send(world, wf, **fields)
    assert info.value.field_code == code
    assert stored(world) == before
    return info.value


# --- S-1: input and limits ----------------------------------------------------------------------------------------
EDGE_NAME = "n" * 128
EDGE_VERSION = "v" * 32
EDGE_STEP = "s" * 64


@pytest.fixture
def edge_flow(world, orch):
    """A definition whose contract sits at every limit, so each field can be sent at its edge."""
    doc = {"name": "edges", "steps": [signal_step(EDGE_STEP, name=EDGE_NAME, version=EDGE_VERSION,
                                                   payload_type="any")]}
    world.publish(doc)
    wf = world.start("edges", {"order_id": "é" * 256})  # 512 bytes of UTF-8
    orch.drain()
    base = {"name": EDGE_NAME, "payload_version": EDGE_VERSION, "target_step_key": EDGE_STEP,
            "correlation_key": "é" * 256}
    return wf, base


@pytest.mark.parametrize("field, at_edge, one_past, code", [
    ("name", EDGE_NAME, EDGE_NAME + "n", "NAME_TOO_LONG"),
    ("payload_version", EDGE_VERSION, EDGE_VERSION + "v", "PAYLOAD_VERSION_INVALID"),
    ("target_step_key", EDGE_STEP, EDGE_STEP + "s", "TARGET_STEP_INVALID"),
    ("correlation_key", "é" * 256, "é" * 256 + "x", "CORRELATION_KEY_TOO_LONG"),
    ("payload", '"' + "p" * (256 * 1024 - 2) + '"', '"' + "p" * (256 * 1024 - 1) + '"', "PAYLOAD_TOO_LARGE"),
    ("reason", "ü" * 1024, "ü" * 1025, "REASON_INVALID"),
    ("evidence_ref", "e" * 512, "e" * 513, "EVIDENCE_REF_INVALID"),
    ("idempotency_key", "k" * 128, "k" * 129, "IDEMPOTENCY_KEY_INVALID"),
])
def test_S1_each_limit_passes_at_its_edge_and_fails_one_past(world, edge_flow, field, at_edge, one_past, code):
    wf, base = edge_flow
    if field == "idempotency_key":
        receipt = send(world, wf, at_edge, **base)
        rejected(world, wf, code, key=one_past, **base)
    else:
        receipt = send(world, wf, **{**base, field: at_edge})
        rejected(world, wf, code, **{**base, field: one_past})
    assert receipt["status"] == "PENDING" and receipt["disposition"] is None


def test_S1_limits_count_bytes_for_correlation_and_payload_but_chars_for_reason(world, edge_flow):
    wf, base = edge_flow
    # 256 two-byte characters are 512 bytes; 257 would be 514.
    rejected(world, wf, "CORRELATION_KEY_TOO_LONG", **{**base, "correlation_key": "é" * 257})
    assert len(("ü" * 1024).encode()) == 2048
    assert queued(world, wf, **{**base, "reason": "ü" * 1024})["status"] == "PENDING"
    big = '"' + "é" * (128 * 1024 - 1) + '"'  # 131,071 chars, 262,144 bytes
    assert len(big.encode()) == 256 * 1024
    assert queued(world, wf, **{**base, "payload": big})["status"] == "PENDING"
    rejected(world, wf, "PAYLOAD_TOO_LARGE", **{**base, "payload": big[:-1] + 'é"'})


@pytest.mark.parametrize("field, value, code", [
    ("name", "", "NAME_INVALID"),
    ("name", "approval.décidé", "NAME_INVALID"),
    ("name", None, "NAME_INVALID"),
    ("payload_version", "", "PAYLOAD_VERSION_INVALID"),
    ("payload_version", "v\u00e9", "PAYLOAD_VERSION_INVALID"),
    ("target_step_key", "", "TARGET_STEP_INVALID"),
    ("target_activation_sequence", 0, "ACTIVATION_SEQUENCE_INVALID"),
    ("target_activation_sequence", -1, "ACTIVATION_SEQUENCE_INVALID"),
    ("target_activation_sequence", None, "ACTIVATION_SEQUENCE_INVALID"),
    ("correlation_key", "", "CORRELATION_KEY_MISSING"),
    ("correlation_key", None, "CORRELATION_KEY_MISSING"),
    ("correlation_key", b"o-\xff", "CORRELATION_KEY_INVALID"),
    ("payload", None, "PAYLOAD_MISSING"),
    ("payload", "", "PAYLOAD_INVALID"),
    ("payload", '{"approved": tru}', "PAYLOAD_INVALID"),
    ("payload", b'"\xff"', "PAYLOAD_INVALID"),
    ("reason", "", "REASON_INVALID"),
    ("reason", None, "REASON_INVALID"),
    ("evidence_ref", "", "EVIDENCE_REF_INVALID"),
    ("evidence_ref", "s3://bucket/a b", "EVIDENCE_REF_INVALID"),
    ("evidence_ref", "s3://bucket/a\tb", "EVIDENCE_REF_INVALID"),
    ("evidence_ref", "s3://bucket/a\x07b", "EVIDENCE_REF_INVALID"),
    ("evidence_ref", "s3://bucket/a\u00a0b", "EVIDENCE_REF_INVALID"),
])
def test_S1_invalid_fields_are_rejected_with_their_code_and_nothing_is_stored(world, orch, field, value, code):
    wf = started(world, orch)
    rejected(world, wf, code, **{field: value})


@pytest.mark.parametrize("key", ["", "has space", "ключ", "tab\tkey", None])
def test_S1_idempotency_key_must_be_printable_ascii(world, orch, key):
    wf = started(world, orch)
    before = stored(world)
    with pytest.raises(errors.ValidationFailed) as info:
        signals.send(world.db.conn, world.token, world.namespace, wf, idempotency_key=key, name=NAME,
                     payload_version=VERSION, target_step_key="approval", target_activation_sequence=1,
                     correlation_key="o-1", payload="{}", reason="r")
    assert info.value.field_code == "IDEMPOTENCY_KEY_INVALID" and stored(world) == before


@pytest.mark.parametrize("field, value, code", [
    ("key", "k\n", "IDEMPOTENCY_KEY_INVALID"),
    ("key", "k" * 128 + "\n", "IDEMPOTENCY_KEY_INVALID"),  # its column would have dropped the newline
    ("name", NAME + "\n", "NAME_INVALID"),
    ("payload_version", VERSION + "\n", "PAYLOAD_VERSION_INVALID"),
])
def test_S1_a_final_newline_is_not_printable_ascii(world, orch, field, value, code):
    """A pattern anchored with $ also matched before a final newline: such a key was stored (a 129-character one cut
    to 128 by its column, so it replayed as another key) and a name or version got CONTRACT_MISMATCH."""
    wf = started(world, orch, signal_flow(before_timer_ms=HOUR))  # the step is not active: a send stays PENDING
    before = stored(world)
    with pytest.raises(errors.ValidationFailed) as info:
        send(world, wf, value) if field == "key" else send(world, wf, **{field: value})
    assert info.value.field_code == code and stored(world) == before


def test_S1_trailing_spaces_in_correlation_keys_are_kept_and_compared(world, orch):
    wf = started(world, orch)
    spaced = send(world, wf, correlation_key="o-1 ")
    assert spaced["status"] == "REJECTED" and spaced["disposition"] == "CORRELATION_MISMATCH"
    assert signal_row(world, spaced["signal_id"])["correlation_key"] == b"o-1 "
    exact = send(world, wf, correlation_key="o-1")
    assert exact["status"] == "PENDING"
    # A wait that pins the trailing space takes only the spaced key.
    other = started(world, orch, input={"order_id": "o-1 "})
    assert send(world, other, correlation_key="o-1")["disposition"] == "CORRELATION_MISMATCH"
    winner = send(world, other, correlation_key="o-1 ")
    orch.drain()
    assert world.step(other, "approval")["wait"]["winner_signal_id"] == winner["signal_id"]


def test_S1_multibyte_correlation_keys_match_byte_for_byte(world, orch):
    key = "订单-42-\U0001f600"
    wf = started(world, orch, input={"order_id": key})
    nfd = started(world, orch, input={"order_id": "cafe\u0301"})
    assert send(world, wf, correlation_key=key)["status"] == "PENDING"
    # NFC and NFD spell the same text with different bytes: exactness means they differ.
    assert send(world, nfd, correlation_key="caf\u00e9")["disposition"] == "CORRELATION_MISMATCH"
    assert send(world, nfd, correlation_key="cafe\u0301")["status"] == "PENDING"
    orch.drain()
    assert world.step(wf, "approval")["status"] == "SUCCEEDED"
    assert world.step(nfd, "approval")["status"] == "SUCCEEDED"
    got = signals.get(world.db.conn, world.token, world.namespace, wf,
                      world.step(wf, "approval")["wait"]["winner_signal_id"])
    assert got["correlation_key"] == key


def test_S1_explicit_null_payload_is_a_payload_and_missing_is_rejected(world, orch):
    doc = signal_flow("null-flow", payload_type="null")
    wf = started(world, orch, doc)
    rejected(world, wf, "PAYLOAD_MISSING", payload=None)
    receipt = send(world, wf, payload="null")
    assert receipt["status"] == "PENDING"
    orch.drain()
    step = world.step(wf, "approval")
    assert step["status"] == "SUCCEEDED" and step["output"] is None
    assert world.db.scalar("SELECT output FROM weave_steps WHERE step_key = 'approval'") == "null"


@pytest.mark.parametrize("payload", ['{"a": 1.}', '{"a": 1.e5}', '{"a": 1.5e}', '{"a": 2e+}', '{"a": [-]}',
                                     '{"a": "\\x"}', '{"a": "\\\'"}', "[1.]", '{"a": 1, "a": 2}'])
def test_S1_a_payload_that_is_not_json_is_refused_even_where_the_server_would_take_it(world, orch, payload):
    """MariaDB's JSON_VALID passes these; a signal stored with one could not be read back (GET answered 500), or,
    with a key twice, would be read back otherwise (Python keeps the last, the server the first)."""
    with pytest.raises(jsontext.InvalidJson):
        jsontext.parse_strict(payload)
    wf = started(world, orch, signal_flow("any-flow", payload_type="any"))
    rejected(world, wf, "PAYLOAD_INVALID", payload=payload)


BEYOND_A_DOUBLE = ["1e400", "-1e309", "1.7976931348623159e308", "2E+308", "0.5e309", "1" * 310 + ".0",
                   "12345.6789e305", "1" * 200 + "e150"]
WITHIN_A_DOUBLE = ["1.7976931348623157e308", "1.7976931348623158e308", "1e-400", "0.0000e99999", "1" * 400,
                   "1" * 120 + ".5e-100", "0." + "0" * 150 + "1e300", "0." + "1" * 320 + "e5", "1." + "1" * 320 + "e-5"]


def test_S1_a_number_beyond_a_double_is_refused_as_the_http_api_and_every_worker_refuse_it(world, orch):
    """Python reads a number with a fraction or an exponent as a double, and one past the largest as infinity: the
    HTTP API refused it, but a signal sent through SQL took it, and the successor's task input that froze it failed
    at the worker (INPUT_INVALID, no retry). The bound is the one Python reads by, to the last digit; an integer of
    any length, a number too small for a double and one written inside a string still pass. In an array, and in an
    object of scalars alone (the usual payload, whose check is made without the functions that read a document)."""
    wf = started(world, orch, signal_flow("any-flow", payload_type="any"))
    shapes = ('{{"amount": [1, {}], "note": "1e400"}}', '{{"amount": {}, "note": "1e400"}}')
    for number, shape in itertools.product(BEYOND_A_DOUBLE, shapes):
        payload = shape.format(number)
        with pytest.raises(jsontext.InvalidJson):
            jsontext.parse_strict(payload)
        rejected(world, wf, "PAYLOAD_INVALID", payload=payload)
    rejected(world, wf, "PAYLOAD_INVALID", payload="1e400")  # the document itself a number
    for n, (number, shape) in enumerate(itertools.product(WITHIN_A_DOUBLE, shapes)):
        payload = shape.format(number)
        jsontext.parse_strict(payload)
        receipt = send(world, wf, key=f"within-{n}", payload=payload)  # accepted, stored
        assert signal_row(world, receipt["signal_id"])["payload"] == payload.encode()


def test_S1_an_ordinary_payload_is_checked_for_large_numbers_by_one_pattern_and_no_table(world, orch):
    """The check of numbers beyond a double first looked for an exponent anywhere in the text: an id such as
    "o-9e512" in a string sent every such payload (a fifth of random hex ids) to the reading of all its values,
    which materialises them in a temporary table on disk, a file per send. It walks the text token by token: only a
    number that large outside a string is read, and a string never."""
    wf = started(world, orch, signal_flow("any-flow", payload_type="any"))

    def disk_tables() -> int:
        return int(world.db.row("SHOW SESSION STATUS LIKE 'Created_tmp_disk_tables'")["Value"])

    before = disk_tables()
    send(world, wf, "ids", payload='{"ref": "o-9e512", "psp": "3fe512ab9e123", "amount": 1e99, "n": 12}')
    assert disk_tables() == before
    send(world, wf, "large", payload='{"amount": 1e300}')  # a number that large is read: that one costs the table
    assert disk_tables() > before


def test_S1_a_payload_nested_deeper_than_the_server_reads_is_refused_saying_so(world, orch):
    """The server reads no JSON nested deeper than 32 levels: 32 arrays, one inside the other, were refused as
    "payload must be one JSON value, with no key twice in one object", which named neither; 31 pass."""
    wf = started(world, orch, signal_flow("any-flow", payload_type="any"))
    refused = rejected(world, wf, "PAYLOAD_INVALID", payload="[" * 32 + "]" * 32)
    assert "nested at most 31 levels" in refused.detail
    assert send(world, wf, payload="[" * 31 + "]" * 31)["status"] == "PENDING"


def test_S1_every_json_spelling_of_numbers_escapes_and_literals_is_still_a_payload(world, orch):
    payload = ('{"n": [-0, -0.5, 1.25e-3, 1E+05, 2e5, 0.0], "s": ["1.", "-", "e+", "\\\\x", '
               '"\\"\\/\\b\\f\\n\\r\\t\\u00e9"], "l": [true, false, null], "e": {"eE-.": "true-false."}}')
    json.loads(payload)
    wf = started(world, orch, signal_flow("any-flow", payload_type="any"))
    receipt = send(world, wf, payload=payload)
    assert receipt["status"] == "PENDING"
    assert signals.get(world.db.conn, world.token, world.namespace, wf, receipt["signal_id"])["payload_text"] == payload


def test_S1_payload_is_stored_and_output_exactly_as_received(world, orch):
    raw = '{ "z": 1,  "a": 123456789012345678901234567890.5e-3, "n": 12345678901234567890123 }'
    wf = started(world, orch, signal_flow(then_timer=True))
    receipt = send(world, wf, payload=raw)
    assert signal_row(world, receipt["signal_id"])["payload"] == raw.encode()
    orch.drain()
    assert world.db.scalar("SELECT output FROM weave_steps WHERE step_key = 'approval'") == raw
    got = signals.get(world.db.conn, world.token, world.namespace, wf, receipt["signal_id"])
    assert got["payload_text"] == raw and got["payload"]["n"] == 12345678901234567890123
    assert receipt["request_digest"] == digest(
        world, name=NAME, payload_version=VERSION, target_step_key="approval", target_activation_sequence=1,
        correlation_key="o-1", payload=raw, reason="approved by the desk")


# --- S-2: permissions ---------------------------------------------------------------------------------------------
def test_S2_send_needs_the_signal_scope_and_get_needs_read(world, orch):
    wf = started(world, orch)
    reader = world.credential(["workflows:read"])["token"]
    with pytest.raises(errors.Forbidden):
        send(world, wf, token=reader)
    signaller = world.credential(["workflows:signal"], actor="partner")["token"]
    receipt = send(world, wf, token=signaller)
    with pytest.raises(errors.Forbidden):
        signals.get(world.db.conn, signaller, world.namespace, wf, receipt["signal_id"])
    got = signals.get(world.db.conn, reader, world.namespace, wf, receipt["signal_id"])
    assert got["actor"] == "partner"  # the actor is the credential's; a request cannot name one
    audit = world.db.row("SELECT actor, credential_id FROM weave_audit WHERE action = 'signal.accept'")
    assert audit["actor"] == "partner"


def test_S2_bootstrap_credential_has_no_signal_rights(world, orch):
    wf = started(world, orch)
    before = stored(world)
    with pytest.raises(errors.Forbidden):
        send(world, wf, token=world.admin)
    with pytest.raises(errors.Forbidden):
        signals.list_signals(world.db.conn, world.admin, world.namespace, wf)
    assert stored(world) == before


def test_S2_unknown_and_disabled_credentials_are_unauthenticated(world, orch):
    wf = started(world, orch)
    cred = world.credential(["workflows:signal", "workflows:read"])
    receipt = send(world, wf, "replayable", token=cred["token"])
    with pytest.raises(errors.Unauthenticated):
        send(world, wf, token="wv_" + "0" * 48)
    routines.credential_disable(world.db.conn, world.admin, world.namespace, cred["credential_id"])
    with pytest.raises(errors.Unauthenticated):
        send(world, wf, token=cred["token"])
    # A replay still checks current permissions (S-4).
    with pytest.raises(errors.Unauthenticated):
        send(world, wf, "replayable", token=cred["token"])
    with pytest.raises(errors.Unauthenticated):
        signals.get(world.db.conn, cred["token"], world.namespace, wf, receipt["signal_id"])


def test_S2_every_queue_of_the_pinned_definition_must_be_allowed(world, orch):
    doc = signal_flow("with-task")
    doc["steps"].append({"key": "charge", "type": "TASK", "after": ["approval"], "queue": "payments",
                         "handler": "payments.charge", "handler_version": "1"})
    wf = started(world, orch, doc)
    narrow = world.credential(["workflows:signal", "workflows:read"], queues=["other"])["token"]
    wide = world.credential(["workflows:signal", "workflows:read"], queues=["payments"])["token"]
    receipt = send(world, wf, "k-queue", token=wide)
    before = stored(world)
    with pytest.raises(errors.Forbidden):
        send(world, wf, token=narrow)
    with pytest.raises(errors.Forbidden):  # a replay too
        send(world, wf, "k-queue", token=narrow)
    with pytest.raises(errors.Forbidden):
        signals.get(world.db.conn, narrow, world.namespace, wf, receipt["signal_id"])
    assert stored(world) == before


def test_S2_another_namespace_answers_exactly_like_a_missing_object(world, orch):
    from tests.support.world import World

    wf = started(world, orch)
    receipt = send(world, wf)
    other = World.create(world.db, "globex")
    stranger = other.credential(["workflows:signal", "workflows:read"])["token"]
    before = stored(world)
    # A path under a namespace the credential does not belong to, an instance of another namespace,
    # and a workflow that does not exist all answer NOT_FOUND.
    for token, namespace, workflow in [(stranger, "acme", wf), (stranger, "globex", wf),
                                       (world.token, "globex", wf), (world.token, "acme", "wf_999999"),
                                       (world.token, "nope", wf)]:
        with pytest.raises(errors.NotFound):
            send(world, workflow, token=token, namespace=namespace)
    with pytest.raises(errors.NotFound):
        signals.get(world.db.conn, stranger, "globex", wf, receipt["signal_id"])
    assert stored(world) == before


# --- S-3: one transaction ---------------------------------------------------------------------------------------
def test_S3_acceptance_writes_signal_checkpoint_event_audit_and_receipt_together(world, orch):
    wf = started(world, orch)
    deadline = world.db.scalar("SELECT deadline_at FROM weave_instances")
    cp_before = world.db.row("SELECT due_at, version FROM weave_pending_advances WHERE step_key = 'approval'")
    receipt = queued(world, wf, "k-1", evidence_ref="https://desk.example/tickets/7")
    sig = signal_row(world, receipt["signal_id"])
    # The receipt is frozen with the row: stored without its signal_id (the row's own id), answered with it first.
    assert sig["status"] == "PENDING" and receipt["receipt_json"] == (
        f'{{"signal_id": "sig_{sig["id"]}", ' + sig["receipt"][1:])
    assert json.loads(receipt["receipt_json"])["signal_id"] == receipt["signal_id"] == f"sig_{sig['id']}"
    assert sig["available_at"] == sig["accepted_at"]  # a wait is active: look at once
    cp = world.db.row("SELECT due_at, available_at, version FROM weave_pending_advances WHERE step_key = 'approval'")
    assert cp["due_at"] == sig["accepted_at"] < cp_before["due_at"] and cp["version"] > cp_before["version"]
    event = world.events(wf)[-1]
    assert event["type"] == "SIGNAL_ACCEPTED" and event["data"]["signal_id"] == receipt["signal_id"]
    audit = world.db.row("SELECT * FROM weave_audit WHERE action = 'signal.accept'")
    assert audit["idempotency_key"] == "k-1" and audit["request_digest"] == receipt["request_digest"]
    assert audit["accepted_at"] == sig["accepted_at"] and audit["deadline_at"] == deadline
    assert audit["response"] == receipt["receipt_json"] and audit["reason"] == "approved by the desk"
    assert world.db.scalar("SELECT signal_count FROM weave_instances") == 1


def test_S3_audit_failure_leaves_nothing_behind(world, orch):
    wf = started(world, orch)
    world.db.execute(
        "CREATE TRIGGER test_audit_fails BEFORE INSERT ON weave_audit FOR EACH ROW "
        "BEGIN IF NEW.action = 'signal.accept' THEN "
        "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'audit store down'; END IF; END")
    before = world.db.table_counts()
    cp = world.db.row("SELECT due_at, version FROM weave_pending_advances WHERE step_key = 'approval'")
    with pytest.raises(pymysql.err.OperationalError):
        send(world, wf)
    assert world.db.table_counts() == before
    assert world.db.row("SELECT due_at, version FROM weave_pending_advances WHERE step_key = 'approval'") == cp
    assert world.db.scalar("SELECT signal_count FROM weave_instances") == 0
    world.db.execute("DROP TRIGGER test_audit_fails")


# --- S-4 / S-5: idempotency, digest, receipt ------------------------------------------------------------------------
def test_S4_digest_is_sha256_over_length_prefixed_fields(world):
    import hashlib

    def field(b: bytes) -> bytes:
        return len(b).to_bytes(8, "big") + b

    expected = hashlib.sha256(
        field(b"n") + field(b"1") + field(b"step") + field(b"12") + field("k\u00e9 ".encode()) + field(b"{}")
        + field("r\u00fc".encode()) + b"\xff" * 8).hexdigest()
    assert digest(world, name="n", payload_version="1", target_step_key="step", target_activation_sequence=12,
                  correlation_key="k\u00e9 ", payload="{}", reason="r\u00fc") == expected
    # Field boundaries matter, and an absent evidence_ref differs from any present one.
    a = dict(name="ab", payload_version="c", target_step_key="s", target_activation_sequence=1,
             correlation_key="k", payload="{}", reason="r")
    b = {**a, "name": "a", "payload_version": "bc"}
    assert digest(world, **a) != digest(world, **b)
    assert digest(world, **a) != digest(world, **a, evidence_ref="x")


def test_S4_routine_digest_matches_the_specified_one(world, orch):
    wf = started(world, orch)
    fields = dict(name=NAME, payload_version=VERSION, target_step_key="approval", target_activation_sequence=1,
                  correlation_key="o-1", payload=' {"approved" : true} ', reason="ok \u2713",
                  evidence_ref="urn:ticket:7")
    receipt = send(world, wf, **fields)
    assert receipt["request_digest"] == specified_digest(canonical_payload='{"approved":true}', **fields)
    no_ref = send(world, wf, **{**fields, "evidence_ref": None})
    assert no_ref["request_digest"] == specified_digest(canonical_payload='{"approved":true}',
                                                        **{**fields, "evidence_ref": None})


def test_S4_the_digest_compares_payload_values_so_another_spelling_is_a_replay(world, orch):
    """Keys sorted, no insignificant whitespace, numbers as parsed: two correct clients that spell one payload
    differently make one logical request. The stored payload and the receipt stay the first exact bytes."""
    wf = started(world, orch)
    first = send(world, wf, "one-key", payload='{"approved":true,"n":1.50,"who":"ann"}')
    for spelling in ['{"approved": true, "n": 1.5, "who": "ann"}', ' { "who" : "ann" , "n":15e-1, "approved":true }']:
        again = send(world, wf, "one-key", payload=spelling)
        assert again["replayed"] and again["receipt_json"] == first["receipt_json"]
    assert signal_row(world, first["signal_id"])["payload"] == b'{"approved":true,"n":1.50,"who":"ann"}'
    for different in ['{"approved": false, "n": 1.5, "who": "ann"}', '{"approved": true, "n": 1.5, "who": "Ann"}',
                      '{"approved": true, "n": 1.51, "who": "ann"}', '[{"approved": true, "n": 1.5, "who": "ann"}]']:
        with pytest.raises(errors.IdempotencyConflict):
            send(world, wf, "one-key", payload=different)
    big = send(world, wf, "big", payload='{"n": 12345678901234567890123}')
    with pytest.raises(errors.IdempotencyConflict):  # numbers as parsed: no rounding to a double
        send(world, wf, "big", payload='{"n": 12345678901234567890124}')
    assert send(world, wf, "big", payload='{"n":12345678901234567890123}')["signal_id"] == big["signal_id"]
    orch.drain()
    assert world.step(wf, "approval")["output"] == {"approved": True, "n": 1.5, "who": "ann"}


def test_S4_strings_are_compared_with_minimal_escapes_so_an_escaped_spelling_is_a_replay(world, orch):
    """S-4's canonical form writes strings with minimal escapes: a client whose encoder keeps to ASCII
    ("Zo\\u00eb", as Python's json.dumps writes it) and one that does not ("Zoë") send one request. The digest
    is the one the spec's rule gives for the canonical text."""
    wf = started(world, orch)
    fields = dict(name=NAME, payload_version=VERSION, target_step_key="approval", target_activation_sequence=1,
                  correlation_key="o-1", reason="approved")
    first = send(world, wf, "esc-key", payload='{"who":"Zoë","path":"a/b","q":"say \\"hi\\"","k":"\u00e9"}',
                 **fields)
    assert first["request_digest"] == specified_digest(
        canonical_payload='{"k":"é","path":"a/b","q":"say \\"hi\\"","who":"Zoë"}', **fields)
    for spelling in ['{"who":"Zo\\u00eb","path":"a\\/b","q":"say \\u0022hi\\"","k":"\\u00E9"}',
                     '{"\\u006b":"é","path":"a/b","q":"say \\"hi\\"","who":"Zo\\u00EB"}']:
        again = send(world, wf, "esc-key", payload=spelling, **fields)
        assert again["replayed"] and again["receipt_json"] == first["receipt_json"], spelling
    with pytest.raises(errors.IdempotencyConflict):  # another value, whatever its spelling
        send(world, wf, "esc-key", payload='{"who":"Zo\\u00ebe","path":"a/b","q":"say \\"hi\\"","k":"é"}',
             **fields)


def test_S4_a_payload_with_a_lone_surrogate_escape_is_refused_and_nothing_is_stored(world, orch):
    wf = started(world, orch)
    rejected(world, wf, "PAYLOAD_INVALID", payload='{"note": "\\ud800"}')


@pytest.mark.parametrize("form, payload", [("BYTES", '{"approved": true}'), ("ESCAPES", '{"who": "Zo\\u00eb"}')])
def test_S12_a_signal_stored_with_an_earlier_digest_form_still_proves_its_acceptance(world, orch, form, payload):
    """Signals accepted before digests were canonical carry the digest of their exact bytes (BYTES), and those
    accepted before strings were compared with minimal escapes the digest of the payload with its escapes as sent
    (ESCAPES): after an upgrade they are still consumed (the acceptance proof), still pass M-4.10, and a retry of
    their key with the same bytes is still a replay."""
    wf = started(world, orch)
    fields = dict(name=NAME, payload_version=VERSION, target_step_key="approval", target_activation_sequence=1,
                  correlation_key="o-1", payload=payload, reason="approved by the desk")
    receipt = send(world, wf, "old-key", queued=True, **fields)  # left to a runner: its proof is checked then
    legacy = digest(world, **fields, form=form)
    assert legacy != receipt["request_digest"]
    world.db.execute("UPDATE weave_signals SET request_digest = %s", legacy)
    world.db.execute("UPDATE weave_audit SET request_digest = %s WHERE action = 'signal.accept'", legacy)
    assert send(world, wf, "old-key", **fields)["replayed"]
    orch.drain()
    assert signal_row(world, receipt["signal_id"])["status"] == "CONSUMED"


def test_S4_S5_replay_answers_the_first_receipt_byte_identical_even_after_consumption(world, orch):
    wf = started(world, orch)
    first = send(world, wf, "same-key")
    assert first["replayed"] is False and first["status"] == "PENDING"
    again = send(world, wf, "same-key")
    assert again["replayed"] is True and again["receipt_json"] == first["receipt_json"]
    orch.drain()
    assert world.step(wf, "approval")["wait"]["winner_signal_id"] == first["signal_id"]
    after = send(world, wf, "same-key")
    assert after["receipt_json"] == first["receipt_json"] and after["status"] == "PENDING"  # S-5: frozen
    assert signals.get(world.db.conn, world.token, world.namespace, wf, first["signal_id"])["status"] == "CONSUMED"
    assert world.db.scalar("SELECT COUNT(*) FROM weave_signals") == 1
    assert world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'signal.accept'") == 1


def test_S4_same_key_with_different_content_is_a_conflict(world, orch):
    wf = started(world, orch)
    send(world, wf, "k")
    before = stored(world)
    for change in [{"payload": '{"approved": false}'}, {"reason": "other"}, {"correlation_key": "o-2"},
                   {"evidence_ref": "urn:x"}]:
        with pytest.raises(errors.IdempotencyConflict):
            send(world, wf, "k", **change)
    assert stored(world) == before
    # The identity is per instance: the same key on another instance is a new signal.
    other = started(world, orch)
    assert send(world, other, "k")["replayed"] is False


def test_S5_receipt_says_rejected_when_stored_rejected_and_get_shows_current_state(world, orch):
    wf = started(world, orch)
    bad = send(world, wf, correlation_key="o-9")
    assert bad["status"] == "REJECTED" and bad["disposition"] == "CORRELATION_MISMATCH"
    good = send(world, wf)
    orch.drain()
    got = signals.get(world.db.conn, world.token, world.namespace, wf, good["signal_id"])
    assert got["status"] == "CONSUMED" and got["consumed_at"] is not None
    assert set(json.loads(good["receipt_json"])) == {"signal_id", "workflow_id", "idempotency_key", "status",
                                                     "disposition", "accepted_at", "expires_at", "request_digest"}
    with pytest.raises(errors.NotFound):
        signals.get(world.db.conn, world.token, world.namespace, wf, "sig_999999")
    with pytest.raises(errors.NotFound):
        signals.get(world.db.conn, world.token, world.namespace, wf, "not-an-id")
    other = started(world, orch)
    with pytest.raises(errors.NotFound):  # a signal of another instance
        signals.get(world.db.conn, world.token, world.namespace, other, good["signal_id"])


@pytest.mark.breaks_invariants("M-4.10b")
def test_S5_M4_10b_a_stored_receipt_that_drifts_from_the_answered_one_is_caught(world, orch):
    wf = started(world, orch)
    receipt = send(world, wf)
    assert "M-4.10b" not in invariants.violations(world.db.conn)  # as stored: the answered receipt, composed
    world.db.execute("UPDATE weave_signals SET receipt = REPLACE(receipt, '\"PENDING\"', '\"CONSUMED\"')")
    broken = invariants.violations(world.db.conn)
    assert broken.get("M-4.10b") and list(broken) == ["M-4.10b"], broken
    # A replay answers the stored receipt: the drift the invariant reports is what a sender would be given.
    assert send(world, wf, receipt["idempotency_key"])["receipt_json"] != receipt["receipt_json"]


def test_S5_list_pages_in_acceptance_order_and_filters_by_status(world, orch):
    wf = started(world, orch)
    sent = [send(world, wf, f"k{i}", correlation_key="o-1" if i == 2 else "o-x") for i in range(5)]
    orch.drain()
    page = signals.list_signals(world.db.conn, world.token, world.namespace, wf, limit=2)
    assert [s["signal_id"] for s in page["items"]] == [s["signal_id"] for s in sent[:2]]
    page2 = signals.list_signals(world.db.conn, world.token, world.namespace, wf, limit=2,
                                 after=page["next_cursor"])
    page3 = signals.list_signals(world.db.conn, world.token, world.namespace, wf, limit=2,
                                 after=page2["next_cursor"])
    assert [s["signal_id"] for s in page2["items"] + page3["items"]] == [s["signal_id"] for s in sent[2:]]
    assert page3["next_cursor"] is None
    consumed = signals.list_signals(world.db.conn, world.token, world.namespace, wf, status="CONSUMED")
    assert [s["signal_id"] for s in consumed["items"]] == [sent[2]["signal_id"]]
    with pytest.raises(errors.ValidationFailed):
        signals.list_signals(world.db.conn, world.token, world.namespace, wf, status="DONE")
    with pytest.raises(errors.ValidationFailed):
        signals.list_signals(world.db.conn, world.token, world.namespace, wf, limit=0)


def test_S5_a_page_ends_once_its_payloads_pass_8_mib_and_its_cursor_leads_on(world, orch):
    """An instance may hold 1,024 signals of 256 KiB: a page of 1,000 would have been built whole (about 250 MiB)
    by the server, the API and the client for one request. A page now ends once its payloads pass 8 MiB, always
    holding one signal, and paging by its cursor still gives every signal once, in order."""
    wf = started(world, orch)
    blob = '{"blob": "' + "x" * (250 * 1024) + '"}'
    sent = [send(world, wf, f"big-{i}", payload=blob)["signal_id"] for i in range(40)]
    pages, after = [], None
    while True:
        page = signals.list_signals(world.db.conn, world.token, world.namespace, wf, limit=1000, after=after)
        pages.append([s["signal_id"] for s in page["items"]])
        after = page["next_cursor"]
        if after is None:
            break
    assert [len(p) for p in pages] == [33, 7]  # 32 payloads make 8,000 KiB; the 33rd passes 8 MiB and ends the page
    assert [i for p in pages for i in p] == sent
    one = signals.list_signals(world.db.conn, world.token, world.namespace, wf, limit=2, after=pages[0][-1])
    assert [s["signal_id"] for s in one["items"]] == sent[33:35] and one["next_cursor"] == sent[34]


# --- S-6: per-instance limit ------------------------------------------------------------------------------------
def test_S6_1024_signals_per_instance_then_new_keys_are_refused_but_replays_answer(world, orch):
    world.publish(signal_flow(before_timer_ms=HOUR))
    wf = world.start("approval-flow", {"order_id": "o-1"})  # the SIGNAL step is not active: all early
    first = send(world, wf, "k-0")
    conn = world.db.conn
    for i in range(1, 1024):
        signals.send(conn, world.token, world.namespace, wf, idempotency_key=f"k-{i}", name=NAME,
                     payload_version=VERSION, target_step_key="approval", target_activation_sequence=1,
                     correlation_key="o-1" if i % 2 else "o-x", payload="{}", reason="r")
    assert world.db.scalar("SELECT signal_count FROM weave_instances") == 1024
    before = stored(world)
    with pytest.raises(errors.SignalLimitReached):
        send(world, wf, "k-1024")
    assert stored(world) == before
    assert send(world, wf, "k-0")["receipt_json"] == first["receipt_json"]  # the replay check comes first
    orch.drain()  # rejected and settled signals still count
    with pytest.raises(errors.SignalLimitReached):
        send(world, wf, "k-1025")


# --- S-7: target rules ---------------------------------------------------------------------------------------------
def test_S7_target_must_be_a_signal_step_of_the_pinned_definition(world, orch):
    wf = started(world, orch, signal_flow(then_timer=True))
    rejected(world, wf, "TARGET_STEP_INVALID", target_step_key="no_such_step")
    rejected(world, wf, "TARGET_STEP_INVALID", target_step_key="after_approval")  # a TIMER
    rejected(world, wf, "CONTRACT_MISMATCH", name="approval.Decided")
    rejected(world, wf, "CONTRACT_MISMATCH", name=NAME + " ")
    rejected(world, wf, "CONTRACT_MISMATCH", payload_version="2")


def test_S7_the_target_step_key_is_matched_byte_for_byte(world, orch):
    """The step key's collation pads with spaces, so "approval " used to find the step "approval": the signal was
    stored (and could win) under a key that no step of the definition has."""
    wf = started(world, orch)
    rejected(world, wf, "TARGET_STEP_INVALID", target_step_key="approval ")
    rejected(world, wf, "TARGET_STEP_INVALID", target_step_key="Approval")
    assert send(world, wf, target_step_key="approval")["status"] == "PENDING"


@pytest.mark.parametrize("payload_type, good, bad", [
    ("object", '{"a": 1}', "[1]"),
    ("array", "[]", "{}"),
    ("string", '"yes"', "1"),
    ("number", "-12.5e3", '"12"'),
    ("number", "123456789012345678901234567890", "true"),
    ("boolean", "false", "0"),
    ("null", "null", '"null"'),
    ("any", '"anything"', None),
])
def test_S7_payload_must_have_the_declared_type(world, orch, payload_type, good, bad):
    wf = started(world, orch, signal_flow(f"typed-{payload_type}", payload_type=payload_type))
    if bad is not None:
        rejected(world, wf, "PAYLOAD_TYPE_MISMATCH", payload=bad)
    assert send(world, wf, payload=good)["status"] == "PENDING"


def test_S7_poll_final_signal_is_a_target_with_a_result_object_payload(world):
    doc = {"name": "poll-final", "steps": [{
        "key": "check", "type": "POLL", "queue": "payments", "handler": "payments.check", "handler_version": "1",
        "interval_ms": 1000, "max_rounds": 3, "timeout_ms": HOUR,
        "result": {"pending": ["PENDING"], "success": ["PAID"], "review": ["MANUAL"]},
        "final_signal": {"name": "payment.final", "payload_version": "1", "correlation": "$.input.order_id"}}]}
    world.publish(doc)
    wf = world.start("poll-final", {"order_id": "o-1"})  # not activated: a final signal can arrive early
    fields = {"name": "payment.final", "target_step_key": "check"}
    rejected(world, wf, "PAYLOAD_TYPE_MISMATCH", payload='"PAID"', **fields)
    rejected(world, wf, "PAYLOAD_TYPE_MISMATCH", payload='{"output": 1}', **fields)
    rejected(world, wf, "PAYLOAD_INVALID", payload='{"status": "PENDING"}', **fields)
    rejected(world, wf, "PAYLOAD_INVALID", payload='{"status": "WHATEVER"}', **fields)
    assert send(world, wf, payload='{"status": "PAID", "output": {"ref": 1}}', **fields)["status"] == "PENDING"
    assert send(world, wf, payload='{"status": "MANUAL"}', **fields)["status"] == "PENDING"


# --- S-8: activation sequence ---------------------------------------------------------------------------------------
def test_S8_never_activated_step_accepts_only_sequence_1(world):
    world.publish(signal_flow(before_timer_ms=60_000))
    wf = world.start("approval-flow", {"order_id": "o-1"})
    rejected(world, wf, "FUTURE_ACTIVATION", target_activation_sequence=2)
    early = send(world, wf, target_activation_sequence=1)
    assert early["status"] == "PENDING"


def test_S8_stale_activation_is_stored_rejected_and_future_is_refused(world, orch):
    wf = started(world, orch, signal_flow(timeout_ms=60_000))
    world.db.advance(60_001)
    orch.drain()
    assert world.instance(wf)["review_reasons"][0]["code"] == "SIGNAL_TIMEOUT"
    reactivate(world, wf)
    orch.drain()
    assert world.step(wf, "approval")["activation_sequence"] == 2
    stale = send(world, wf, target_activation_sequence=1)
    assert stale["status"] == "REJECTED" and stale["disposition"] == "STALE_ACTIVATION"
    rejected(world, wf, "FUTURE_ACTIVATION", target_activation_sequence=3)
    current = send(world, wf, target_activation_sequence=2)
    orch.drain()
    step = world.step(wf, "approval")
    assert step["status"] == "SUCCEEDED" and step["wait"]["winner_signal_id"] == current["signal_id"]


def test_S8_pending_signals_of_a_superseded_activation_never_follow_recovery(world, orch):
    """Corrupt data on purpose: no decision leaves an on-time PENDING signal beside a step in review (the
    timeout compares the signals first), so the state is forced. Recovery through weave_step_reactivate
    still answers the old activation's signal STALE_ACTIVATION, and the runner can never make it win."""
    wf = started(world, orch, signal_flow(timeout_ms=60_000))
    sig = queued(world, wf)
    world.db.execute("UPDATE weave_signals SET available_at = expires_at")  # the runner never saw it
    world.db.execute("UPDATE weave_pending_advances SET due_at = due_at + INTERVAL 1 DAY, "
                     "available_at = available_at + INTERVAL 1 DAY")
    world.db.execute("UPDATE weave_steps SET status = 'NEEDS_REVIEW' WHERE step_key = 'approval'")
    world.db.execute("UPDATE weave_instances SET status = 'NEEDS_REVIEW', gate = 'CLOSED'")
    reactivate(world, wf)
    assert signal_row(world, sig["signal_id"])["status"] == "REJECTED"
    assert signal_row(world, sig["signal_id"])["disposition"] == "STALE_ACTIVATION"
    world.db.execute("UPDATE weave_signals SET available_at = accepted_at")
    assert signals.process(world.db.conn, int(sig["signal_id"][4:])) != "CONSUMED"
    orch.drain()
    assert world.step(wf, "approval")["activation_sequence"] == 2
    assert world.step(wf, "approval")["wait"]["winner_signal_id"] is None


def test_S8_S10_a_signal_for_a_reactivated_step_before_its_wait_opens_is_early_and_wins(world, orch):
    """Reactivation makes k+1 the step's activation at once, and the ROOT advance opens its wait later (here after
    a resume). A signal for k+1 in between is normal (S-8): it waits as an early signal (S-10) and the new wait
    takes it. It used to be stored REJECTED STEP_SETTLED, because the new activation had no wait yet."""
    wf = started(world, orch, signal_flow(timeout_ms=60_000))
    world.past_due(orch, wf, "approval", 60_000)
    routines.instance_pause(world.db.conn, world.token, world.namespace, wf, "hold", "p1")
    reactivate(world, wf)
    assert world.step(wf, "approval")["activation_sequence"] == 2
    receipt = send(world, wf, target_activation_sequence=2)
    assert receipt["status"] == "PENDING" and receipt["disposition"] is None
    routines.instance_resume(world.db.conn, world.token, world.namespace, wf, "go on", "r1")
    orch.drain()
    step = world.step(wf, "approval")
    assert step["status"] == "SUCCEEDED" and step["wait"]["winner_signal_id"] == receipt["signal_id"]
    assert signal_row(world, receipt["signal_id"])["status"] == "CONSUMED"


def test_S10_S14_an_early_signal_for_a_reactivated_step_whose_wait_never_opened_expires_unmatched(world, orch):
    """The same signal, with k's wait still unopened when the signal expires (the instance paused past its
    deadline): it expires unmatched (S-14). Its processing used to answer it REJECTED STEP_SETTLED, as if the
    step had ended, because k had no wait yet, where its acceptance had judged it early."""
    wf = started(world, orch, signal_flow(timeout_ms=60_000), deadline_ms=HOUR)
    world.past_due(orch, wf, "approval", 60_000)
    routines.instance_pause(world.db.conn, world.token, world.namespace, wf, "hold", "p1")
    reactivate(world, wf)
    receipt = send(world, wf, target_activation_sequence=2)
    assert receipt["status"] == "PENDING"
    world.db.advance(HOUR)
    orch.drain()
    row = signal_row(world, receipt["signal_id"])
    assert (row["status"], row["disposition"]) == ("EXPIRED", "EXPIRED_UNMATCHED")
    assert world.step(wf, "approval")["status"] == "PENDING"
    assert "SIGNAL_REJECTED" not in [e["type"] for e in world.events(wf)]


# --- S-9: stored rejections, in order ---------------------------------------------------------------------------
def test_S9_instance_settled_comes_first(world, orch):
    wf = started(world, orch)
    send(world, wf)
    orch.drain()
    assert world.instance(wf)["status"] == "SUCCEEDED"
    late_and_stale = send(world, wf)
    assert late_and_stale["status"] == "REJECTED" and late_and_stale["disposition"] == "INSTANCE_SETTLED"
    for status in ("CANCELLING", "CANCELLED"):
        other = started(world, orch)
        world.db.execute("UPDATE weave_instances SET status = %s, gate = 'CLOSED' WHERE id = %s", status,
                         world.internal_id(other))
        world.db.advance(2 * HOUR)  # also past every deadline: INSTANCE_SETTLED still wins
        assert send(world, other)["disposition"] == "INSTANCE_SETTLED"


def test_S9_step_settled_when_the_activation_wait_is_no_longer_waiting(world, orch):
    wf = started(world, orch, signal_flow(then_timer=True))
    send(world, wf)
    orch.drain()
    assert world.instance(wf)["status"] == "RUNNING"
    again = send(world, wf)
    assert again["status"] == "REJECTED" and again["disposition"] == "STEP_SETTLED"


def test_S9_late_at_or_after_the_wait_or_instance_deadline(world, orch):
    wf = started(world, orch, signal_flow(timeout_ms=60_000))
    world.db.advance(60_000)  # at (or just past) the wait deadline, before any runner looked
    late = send(world, wf)
    assert late["status"] == "REJECTED" and late["disposition"] == "LATE"
    # An early signal after the instance deadline is late too.
    world.publish(signal_flow("later-flow", before_timer_ms=HOUR))
    early = world.start("later-flow", {"order_id": "o-1"}, deadline_ms=120_000)
    world.db.advance(120_000)
    assert send(world, early)["disposition"] == "LATE"


def test_S9_correlation_mismatch_against_the_active_wait(world, orch):
    wf = started(world, orch)
    bad = send(world, wf, correlation_key="o-2")
    assert bad["status"] == "REJECTED" and bad["disposition"] == "CORRELATION_MISMATCH"
    assert signal_row(world, bad["signal_id"])["consumed_at"] is not None


# --- S-10 / S-11: early signals and consumption ----------------------------------------------------------------------
def test_S10_early_signal_waits_for_activation_then_is_consumed(world, orch):
    world.publish(signal_flow(before_timer_ms=60_000))
    wf = world.start("approval-flow", {"order_id": "o-1"})
    orch.drain()
    early = send(world, wf)
    deadline = world.db.scalar("SELECT deadline_at FROM weave_instances")
    row = signal_row(world, early["signal_id"])
    assert row["status"] == "PENDING" and row["expires_at"] == deadline and row["available_at"] == deadline
    assert parse(early["expires_at"]) == deadline
    assert world.db.scalar("SELECT COUNT(*) FROM weave_pending_advances WHERE step_key = 'approval'") == 0
    world.db.advance(60_001)
    orch.run_once()  # the timer settles and activates the SIGNAL step inline
    cp = world.db.row("SELECT kind, due_at, created_at FROM weave_pending_advances WHERE step_key = 'approval'")
    assert cp["kind"] == "SIGNAL" and cp["due_at"] == cp["created_at"]  # due at once (S-10)
    orch.drain()
    step = world.step(wf, "approval")
    assert step["status"] == "SUCCEEDED" and step["wait"]["winner_signal_id"] == early["signal_id"]
    assert step["output"] == {"approved": True}


def _three_early_signals(world, orch, **flow):
    """An instance whose SIGNAL step opens after a minute, and three signals sent before it: one mismatched (another
    correlation key), then two that match, in that order."""
    world.publish(signal_flow(before_timer_ms=60_000, **flow))
    wf = world.start("approval-flow", {"order_id": "o-1"})
    orch.drain()
    mismatch = send(world, wf, "a", correlation_key="o-2", payload='{"n": 0}')
    first = send(world, wf, "b", payload='{"n": 1}')
    second = send(world, wf, "c", payload='{"n": 2}')
    world.db.advance(60_001)
    return wf, mismatch, first, second


def test_S11_first_match_by_acceptance_wins_and_the_rest_get_dispositions(world, orch):
    wf, mismatch, first, second = _three_early_signals(world, orch, then_timer=True)
    orch.drain()
    step = world.step(wf, "approval")
    assert step["wait"]["status"] == "SATISFIED" and step["wait"]["winner_signal_id"] == first["signal_id"]
    assert step["output"] == {"n": 1}
    assert signal_row(world, first["signal_id"])["status"] == "CONSUMED"
    assert (signal_row(world, second["signal_id"])["status"],
            signal_row(world, second["signal_id"])["disposition"]) == ("REJECTED", "WAIT_SETTLED")
    assert signal_row(world, mismatch["signal_id"])["disposition"] == "CORRELATION_MISMATCH"
    assert world.db.scalar("SELECT COUNT(*) FROM weave_signals WHERE status = 'PENDING'") == 0
    # The successor was activated in the same transaction as the consumption.
    assert world.step(wf, "after_approval")["status"] == "ACTIVE"
    consumed = next(e for e in world.events(wf) if e["type"] == "SIGNAL_CONSUMED")
    activated = [e for e in world.events(wf) if e["type"] == "STEP_ACTIVATED" and e["step_key"] == "after_approval"]
    assert activated[0]["occurred_at"] == consumed["occurred_at"]


def test_S11_equal_acceptance_times_fall_back_to_acceptance_sequence(world, orch):
    world.publish(signal_flow(before_timer_ms=60_000))
    wf = world.start("approval-flow", {"order_id": "o-1"})
    orch.drain()
    a = send(world, wf, "a", payload='{"n": "a"}')
    b = send(world, wf, "b", payload='{"n": "b"}')
    # The later id is made to look earlier by a hair, then exactly equal: only equal times use the sequence.
    world.db.execute("UPDATE weave_signals SET accepted_at = (SELECT t FROM (SELECT MIN(accepted_at) t "
                     "FROM weave_signals) x)")
    world.db.advance(60_001)
    orch.drain()
    assert world.step(wf, "approval")["wait"]["winner_signal_id"] == a["signal_id"]
    assert signal_row(world, b["signal_id"])["disposition"] == "WAIT_SETTLED"


def test_S11_signal_accepted_exactly_at_the_deadline_is_late(world, orch):
    wf = started(world, orch, signal_flow(timeout_ms=60_000))
    sig = queued(world, wf)
    # Accepted exactly at the deadline (the clock cannot be stopped on it, so the stored time is set).
    world.db.execute("UPDATE weave_signals s JOIN weave_waits w ON w.step_key = s.target_step_key "
                     "SET s.accepted_at = w.deadline_at, s.available_at = w.deadline_at")
    world.db.advance(60_001)
    orch.drain()
    step = world.step(wf, "approval")
    assert step["wait"]["status"] == "EXPIRED" and step["wait"]["winner_signal_id"] is None
    assert signal_row(world, sig["signal_id"])["disposition"] == "LATE"


def test_S11_audit_failure_at_consumption_rolls_everything_back_and_backs_off(world, orch):
    wf = started(world, orch, signal_flow(then_timer=True))
    sig = queued(world, wf)
    world.db.execute(
        "CREATE TRIGGER test_audit_fails BEFORE INSERT ON weave_audit FOR EACH ROW "
        "BEGIN IF NEW.action = 'signal.consume' THEN "
        "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'audit store down'; END IF; END")
    before = {k: v for k, v in world.db.table_counts().items() if k not in ("weave_pending_advances",)}
    outcomes = orch.drain(max_rounds=3)
    assert outcomes["CHECKPOINT:FAILED"] + outcomes["SIGNAL:FAILED"] >= 1
    assert {k: v for k, v in world.db.table_counts().items() if k not in ("weave_pending_advances",)} == before
    step = world.step(wf, "approval")
    assert step["status"] == "ACTIVE" and step["wait"]["status"] == "WAITING"
    assert world.step(wf, "after_approval")["status"] == "PENDING"
    row = signal_row(world, sig["signal_id"])
    assert row["status"] == "PENDING" and row["attempts"] >= 1 and "audit store down" in row["last_error"]
    assert row["expires_at"] == world.db.scalar("SELECT deadline_at FROM weave_instances")  # only next check
    world.db.execute("DROP TRIGGER test_audit_fails")
    world.db.advance(120_000)
    orch.drain()
    assert world.step(wf, "approval")["wait"]["winner_signal_id"] == sig["signal_id"]


# --- S-12: acceptance proof ----------------------------------------------------------------------------------------
@pytest.mark.breaks_invariants("M-4.10", "M-4.19b")  # a payload changed by hand: proof and kept size no longer match
def test_S12_a_row_altered_after_acceptance_goes_to_review(world, orch):
    wf = started(world, orch, signal_flow(then_timer=True))
    sig = queued(world, wf, payload='{"approved": false}')
    world.db.execute("UPDATE weave_signals SET payload = '{\"approved\": true}' WHERE id = %s",
                     int(sig["signal_id"][4:]))
    orch.drain()
    row = signal_row(world, sig["signal_id"])
    assert (row["status"], row["disposition"]) == ("REJECTED", "ACCEPTANCE_PROOF_MISMATCH")
    inst = world.instance(wf)
    step = next(s for s in inst["steps"] if s["key"] == "approval")
    assert inst["status"] == "NEEDS_REVIEW" and inst["gate"] == "CLOSED" and step["status"] == "NEEDS_REVIEW"
    assert [r["code"] for r in inst["review_reasons"]] == ["ACCEPTANCE_PROOF_MISMATCH"]
    assert step["output"] is None and step["wait"]["winner_signal_id"] is None
    # The wait consumes nothing more until recovery.
    honest = queued(world, wf)
    assert honest["status"] == "PENDING"
    orch.drain()
    assert signal_row(world, honest["signal_id"])["status"] == "PENDING"
    assert world.step(wf, "approval")["status"] == "NEEDS_REVIEW"
    assert world.step(wf, "after_approval")["status"] == "PENDING"


@pytest.mark.breaks_invariants("M-4.10")
def test_S12_a_changed_digest_column_is_caught_too(world, orch):
    wf = started(world, orch)
    sig = queued(world, wf)
    world.db.execute("UPDATE weave_signals SET request_digest = REPEAT('0', 64)")
    orch.drain()
    assert signal_row(world, sig["signal_id"])["disposition"] == "ACCEPTANCE_PROOF_MISMATCH"


# --- S-13: the wait deadline -----------------------------------------------------------------------------------------
def test_S13_deadline_without_a_match_expires_into_review(world, orch):
    wf = started(world, orch, signal_flow(timeout_ms=60_000, then_timer=True))
    miss = send(world, wf, correlation_key="o-2")
    inst = world.past_due(orch, wf, "approval", 60_000)
    step = inst["steps"][0]
    assert step["wait"]["status"] == "EXPIRED" and step["status"] == "NEEDS_REVIEW"
    assert world.db.scalar("SELECT ended_at FROM weave_activations WHERE instance_id = %s AND step_key = 'approval'",
                           world.internal_id(wf)) is not None  # the activation ends with the wait
    assert inst["status"] == "NEEDS_REVIEW" and inst["gate"] == "CLOSED"
    assert [r["code"] for r in inst["review_reasons"]] == ["SIGNAL_TIMEOUT"]
    assert inst["steps"][1]["status"] == "PENDING"
    assert signal_row(world, miss["signal_id"])["disposition"] == "CORRELATION_MISMATCH"
    assert "SIGNAL_CONSUMED" not in [e["type"] for e in world.events(wf)]


def test_C3_S13_a_signal_timeout_s_review_names_the_signals_that_came_for_the_wait_and_lost(world, orch):
    """The review of a wait that timed out held its times only, though signals had come for it and lost (a
    correlation key with a trailing space, a wrong contract): an operator at the review could not see why none won
    without asking for explain. Its facts name the latest 10 such signals, newest first, and how many came."""
    wf = started(world, orch, signal_flow(timeout_ms=60_000, then_timer=True))
    sent = [send(world, wf, f"miss-{i}", correlation_key=f"o-1{' ' * (i % 2)}{i}") for i in range(12)]
    inst = world.past_due(orch, wf, "approval", 60_000)
    (reason,) = inst["review_reasons"]
    assert reason["code"] == "SIGNAL_TIMEOUT" and reason["detail"]["signals_total"] == 12
    listed = reason["detail"]["signals"]
    assert [s["signal_id"] for s in listed] == [r["signal_id"] for r in reversed(sent)][:10]
    assert {(s["status"], s["disposition"]) for s in listed} == {("REJECTED", "CORRELATION_MISMATCH")}
    quiet = started(world, orch, signal_flow(timeout_ms=60_000, then_timer=True), input={"order_id": "o-2"})
    (reason,) = world.past_due(orch, quiet, "approval", 60_000)["review_reasons"]
    assert reason["detail"]["signals_total"] == 0 and reason["detail"]["signals"] == []


def test_S13_on_time_signal_wins_over_a_passed_deadline(world, orch):
    wf = started(world, orch, signal_flow(timeout_ms=60_000))
    sig = queued(world, wf)  # accepted on time; every runner is down
    world.db.advance(10 * 60_000)
    # The deadline checkpoint is looked at first: it still consumes the on-time signal.
    cp = world.db.scalar("SELECT id FROM weave_pending_advances WHERE step_key = 'approval'")
    assert world.db.one("weave_checkpoint_advance", cp)["outcome"] == "CONSUMED"
    step = world.step(wf, "approval")
    assert step["wait"]["status"] == "SATISFIED" and step["wait"]["winner_signal_id"] == sig["signal_id"]
    assert world.instance(wf)["review_reasons"] == []


# --- S-14: unmatched early signals expire ---------------------------------------------------------------------------
def test_S14_unmatched_early_signal_expires_at_expires_at(world, orch):
    world.publish(signal_flow(before_timer_ms=2 * HOUR))  # the step can never start before the deadline
    wf = world.start("approval-flow", {"order_id": "o-1"}, deadline_ms=HOUR)
    orch.drain()
    early = send(world, wf)
    row = signal_row(world, early["signal_id"])
    # Backoff moves only the next check time.
    world.db.one("weave_candidate_fail", "SIGNAL", row["id"], row["version"], "connection lost")
    moved = signal_row(world, early["signal_id"])
    assert moved["available_at"] != row["available_at"] and moved["attempts"] == 1
    assert (moved["accepted_at"], moved["expires_at"]) == (row["accepted_at"], row["expires_at"])
    world.db.advance(HOUR - 1_000)
    orch.drain()
    assert signal_row(world, early["signal_id"])["status"] == "PENDING"
    world.db.advance(1_001)
    orch.drain()
    row = signal_row(world, early["signal_id"])
    assert (row["status"], row["disposition"]) == ("EXPIRED", "EXPIRED_UNMATCHED")
    assert row["expires_at"] == world.db.scalar("SELECT deadline_at FROM weave_instances")
    assert "SIGNAL_EXPIRED" in [e["type"] for e in world.events(wf)]


@pytest.mark.parametrize("looks_at_expiry", [True, False])
def test_S14_F9_an_early_signal_expired_before_its_wait_opened_never_wins_whoever_looks_first(world, orch,
                                                                                            looks_at_expiry):
    """An early signal expires at the instance deadline in force when it was accepted (S-10, T-1). A later
    deadline (C-4) lets the step start after that time; the signal had expired by then, by the stored times,
    whether a runner looked at its expiry before the wait opened or only after (F-9)."""
    world.publish(signal_flow(before_timer_ms=2 * HOUR))  # truncated at the deadline: a person lets it go on
    wf = world.start("approval-flow", {"order_id": "o-1"}, deadline_ms=HOUR)
    early = send(world, wf)
    world.db.advance(HOUR)
    if looks_at_expiry:
        orch.drain()
        assert signal_row(world, early["signal_id"])["status"] == "EXPIRED"
    else:  # every runner is down but for the timer's own checkpoint
        cp = world.db.scalar("SELECT id FROM weave_pending_advances WHERE step_key = 'cool_off'")
        assert world.db.one("weave_checkpoint_advance", cp)["outcome"] == "TRUNCATED"
    routines.instance_deadline(world.db.conn, world.token, world.namespace, wf, "more time", "d-1", extend_ms=HOUR)
    routines.step_resolve(world.db.conn, world.token, world.namespace, wf, "cool_off", "waited", "rs-1", output=None)
    orch.drain()
    row = signal_row(world, early["signal_id"])
    assert (row["status"], row["disposition"]) == ("EXPIRED", "EXPIRED_UNMATCHED")
    step = world.step(wf, "approval")
    assert step["status"] == "ACTIVE" and step["wait"]["status"] == "WAITING"
    assert step["wait"]["winner_signal_id"] is None


def test_S14_expiry_is_found_through_the_signal_index(world):
    plan = world.db.rows("EXPLAIN SELECT id FROM weave_signals FORCE INDEX (ix_signal_pending) "
                         "WHERE status = 'PENDING' AND available_at <= NOW(6) ORDER BY available_at LIMIT 100")
    assert plan[0]["key"] == "ix_signal_pending" and plan[0]["type"] == "range"


# --- S-15: pause, disabled app, instance deadline ------------------------------------------------------------------
def test_S15_paused_instance_still_accepts_and_consumes_but_successors_wait(world, orch):
    wf = started(world, orch, signal_flow(then_timer=True))
    world.db.execute("UPDATE weave_instances SET control = 'PAUSED'")
    sig = send(world, wf)
    assert sig["status"] == "PENDING"
    orch.drain()
    inst = world.instance(wf)
    assert inst["steps"][0]["status"] == "SUCCEEDED"
    assert inst["steps"][1]["status"] == "PENDING"
    root = world.db.row("SELECT available_at, last_error FROM weave_pending_advances WHERE step_key = ''")
    assert root is not None and "paused" in root["last_error"]


def test_S15_disabled_app_still_accepts_and_consumes(world, orch):
    wf = started(world, orch, signal_flow(then_timer=True))
    routines.app_put(world.db.conn, world.admin, world.namespace, world.app, 1000, "DISABLED")
    assert send(world, wf)["status"] == "PENDING"
    orch.drain()
    inst = world.instance(wf)
    assert inst["steps"][0]["status"] == "SUCCEEDED" and inst["steps"][1]["status"] == "PENDING"
    assert "app disabled" in world.db.scalar("SELECT last_error FROM weave_pending_advances WHERE step_key = ''")


def test_S15_past_the_instance_deadline_keeps_the_fact_and_goes_to_review(world, orch):
    wf = started(world, orch, signal_flow(then_timer=True), deadline_ms=120_000)
    sig = queued(world, wf)
    world.db.advance(10 * 60_000)
    orch.drain()
    inst = world.instance(wf)
    assert inst["steps"][0]["wait"]["status"] == "SATISFIED"
    assert signal_row(world, sig["signal_id"])["status"] == "CONSUMED"
    assert inst["steps"][1]["status"] == "PENDING"
    assert inst["status"] == "NEEDS_REVIEW" and [r["code"] for r in inst["review_reasons"]] == ["INSTANCE_DEADLINE"]


# --- S-16: send inside the caller's transaction ---------------------------------------------------------------------
@pytest.fixture
def outbox(world):
    """A business table of the caller's, and a second connection with autocommit off."""
    world.db.execute("CREATE TABLE IF NOT EXISTS test_outbox_orders (id INT PRIMARY KEY, note VARCHAR(64)) "
                     "ENGINE=InnoDB COMMENT 'test: a caller business table'")
    world.db.execute("DELETE FROM test_outbox_orders")
    conn = world.db.connect()
    conn.autocommit(False)
    yield conn
    conn.rollback()
    conn.close()
    world.db.execute("DROP TABLE IF EXISTS test_outbox_orders")


def test_S16_signal_commits_with_the_callers_business_row(world, orch, outbox):
    wf = started(world, orch)
    with outbox.cursor() as cur:
        cur.execute("INSERT INTO test_outbox_orders VALUES (1, 'approved')")
    receipt = send(world, wf, "outbox-1", conn=outbox, in_tx=True)
    assert receipt["status"] == "PENDING"
    # Not visible to anyone before the caller commits.
    assert world.db.scalar("SELECT COUNT(*) FROM weave_signals") == 0
    assert world.db.scalar("SELECT COUNT(*) FROM test_outbox_orders") == 0
    outbox.commit()
    assert world.db.scalar("SELECT COUNT(*) FROM test_outbox_orders") == 1
    assert signal_row(world, receipt["signal_id"])["status"] == "PENDING"
    assert world.db.scalar("SELECT COUNT(*) FROM weave_audit WHERE action = 'signal.accept'") == 1
    orch.drain()
    assert world.step(wf, "approval")["wait"]["winner_signal_id"] == receipt["signal_id"]
    # The same rules and receipts as Send: a replay through either entry point answers the first receipt.
    assert send(world, wf, "outbox-1")["receipt_json"] == receipt["receipt_json"]


def test_S16_signal_rolls_back_with_the_callers_business_row(world, orch, outbox):
    wf = started(world, orch)
    before = world.db.table_counts()
    with outbox.cursor() as cur:
        cur.execute("INSERT INTO test_outbox_orders VALUES (2, 'approved')")
    send(world, wf, "outbox-2", conn=outbox, in_tx=True)
    outbox.rollback()
    assert world.db.scalar("SELECT COUNT(*) FROM test_outbox_orders") == 0
    assert world.db.table_counts() == before
    # The key was never accepted: sending it again is a first acceptance.
    assert send(world, wf, "outbox-2")["replayed"] is False


def test_S16_an_application_granted_execute_on_the_send_alone_sends_with_its_own_rows(world, orch, database):
    """The least privilege the manual gives an application that signals from its own database: EXECUTE on
    weave_signal_send_in_tx alone (the routine runs with its owner's rights). Its signal commits with its row;
    it can call no other routine (not weave_namespace_bootstrap, which mints admin tokens) and read no table."""
    wf = started(world, orch)
    user, app_db = f"weave_t_{os.getpid()}_app", f"{database.database}_app"
    with world.db.conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS `{app_db}`")
        cur.execute(f"CREATE TABLE IF NOT EXISTS `{app_db}`.orders (id INT PRIMARY KEY, state VARCHAR(16))")
        for host in ("%", "localhost"):
            cur.execute(f"CREATE USER '{user}'@'{host}'")
            cur.execute(f"GRANT ALL ON `{app_db}`.* TO '{user}'@'{host}'")
            cur.execute(f"GRANT EXECUTE ON PROCEDURE `{database.database}`.weave_signal_send_in_tx "
                        f"TO '{user}'@'{host}'")
    app = pymysql.connect(host=database.host, port=database.port, user=user, database=app_db,
                          unix_socket=database.unix_socket, autocommit=False)
    try:
        with app.cursor() as cur:
            cur.execute("START TRANSACTION")
            cur.execute("INSERT INTO orders VALUES (7, 'approved')")
            cur.execute(f"CALL `{database.database}`.weave_signal_send_in_tx(%s, %s, %s, 'order-7-approved', "
                        f"'approval.decided', '1', 'approval', 1, 'o-1', '{{\"approved\": true}}', "
                        f"'order approved', NULL)", (world.token, world.namespace, wf))
            while cur.nextset():
                pass
        app.commit()
        with app.cursor() as cur, pytest.raises(pymysql.err.OperationalError) as denied:
            cur.execute(f"CALL `{database.database}`.weave_namespace_bootstrap('mine')")
        assert denied.value.args[0] == 1370  # execute command denied
        with app.cursor() as cur, pytest.raises(pymysql.err.OperationalError) as denied:
            cur.execute(f"SELECT COUNT(*) FROM `{database.database}`.weave_signals")
        assert denied.value.args[0] == 1142  # SELECT command denied
    finally:
        app.close()
        drop_user(world.db.conn, user)
        with world.db.conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{app_db}`")
    assert world.db.scalar("SELECT COUNT(*) FROM weave_signals WHERE idempotency_key = 'order-7-approved'") == 1
    orch.drain()
    assert world.step(wf, "approval")["status"] == "SUCCEEDED"


def test_S16_refuses_to_run_outside_a_transaction(world, orch):
    wf = started(world, orch)
    before = world.db.table_counts()
    with pytest.raises(errors.NotInTransaction):
        send(world, wf, in_tx=True)  # the test connection runs with autocommit on
    assert world.db.table_counts() == before


def test_S16_an_error_leaves_the_callers_transaction_to_the_caller(world, orch, outbox):
    wf = started(world, orch)
    # Created first: DDL would wait for the caller's open transaction.
    world.db.execute(
        "CREATE TRIGGER test_audit_fails BEFORE INSERT ON weave_audit FOR EACH ROW "
        "BEGIN IF NEW.action = 'signal.accept' AND NEW.idempotency_key = 'fails' THEN "
        "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'audit store down'; END IF; END")
    with outbox.cursor() as cur:
        cur.execute("INSERT INTO test_outbox_orders VALUES (3, 'kept')")
    with pytest.raises(errors.ValidationFailed):
        send(world, wf, conn=outbox, in_tx=True, correlation_key="")
    # A failure in the middle of the writes undoes only the signal's own rows.
    with pytest.raises(pymysql.err.OperationalError):
        send(world, wf, "fails", conn=outbox, in_tx=True)
    with outbox.cursor() as cur:
        cur.execute("SELECT COUNT(*) AS n FROM weave_signals")
        assert cur.fetchone()["n"] == 0
        cur.execute("SELECT @@in_transaction AS t")
        assert cur.fetchone()["t"] == 1  # still the caller's open transaction
    outbox.commit()
    world.db.execute("DROP TRIGGER test_audit_fails")
    assert world.db.scalar("SELECT COUNT(*) FROM test_outbox_orders") == 1
    assert world.db.scalar("SELECT COUNT(*) FROM weave_signals") == 0
    assert world.db.scalar("SELECT signal_count FROM weave_instances") == 0


def test_S16_works_inside_an_explicit_transaction_under_repeatable_read(world, orch):
    wf = started(world, orch)
    conn = world.db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cur.execute("START TRANSACTION")
            cur.execute("SELECT COUNT(*) AS n FROM weave_signals")  # the caller's snapshot starts here
        other = queued(world, wf, "meanwhile")  # committed by someone else after that snapshot
        with pytest.raises(errors.IdempotencyConflict):  # decided from the latest rows, not the snapshot
            send(world, wf, "meanwhile", conn=conn, in_tx=True, reason="different")
        mine = send(world, wf, "mine", conn=conn, in_tx=True)
        conn.commit()
    finally:
        conn.close()
    assert mine["status"] == "PENDING" and other["status"] == "PENDING"
    assert world.db.scalar("SELECT signal_count FROM weave_instances") == 2


# --- S-17: why is this wait still open? ------------------------------------------------------------------------------
def test_S17_explain_lists_the_pins_and_why_each_signal_did_not_win(world, orch):
    wf = started(world, orch, signal_flow(timeout_ms=60_000))
    mismatch = queued(world, wf, correlation_key="o-1 ")
    world.db.advance(60_001)
    orch.drain()
    reactivate(world, wf)
    orch.drain()
    stale = queued(world, wf, target_activation_sequence=1)
    wrong = queued(world, wf, target_activation_sequence=2, correlation_key="o-2")
    waiting = queued(world, wf, target_activation_sequence=2)
    # An on-time signal the runner has not looked at yet.
    world.db.execute("UPDATE weave_signals SET available_at = expires_at WHERE id = %s",
                     int(waiting["signal_id"][4:]))
    world.db.execute("UPDATE weave_pending_advances SET available_at = available_at + INTERVAL 1 DAY "
                     "WHERE step_key = 'approval'")
    report = signals.explain(world.db.conn, world.token, world.namespace, wf, "approval")
    pins = report["wait"]
    assert pins["status"] == "WAITING" and pins["activation_sequence"] == 2
    assert (pins["name"], pins["payload_version"], pins["payload_type"]) == (NAME, VERSION, "object")
    assert pins["correlation_key"] == "o-1" and pins["correlation_key_hex"] == "6f2d31"
    assert pins["deadline_at"] is not None
    why = {s["signal_id"]: s for s in report["signals"]}
    assert why[mismatch["signal_id"]]["why"] == "CORRELATION_MISMATCH"
    assert why[mismatch["signal_id"]]["detail"] == {
        "expected_hex": "6f2d31", "got_hex": "6f2d3120", "first_difference_offset": 3,
        "expected_byte_hex": "", "got_byte_hex": "20"}
    assert why[stale["signal_id"]]["why"] == "STALE_ACTIVATION"
    assert why[wrong["signal_id"]]["why"] == "CORRELATION_MISMATCH"
    assert why[wrong["signal_id"]]["detail"]["first_difference_offset"] == 2
    assert why[wrong["signal_id"]]["detail"]["got_byte_hex"] == "32"
    assert why[waiting["signal_id"]]["why"] == "NOT_YET_CONSUMED"
    assert [s["signal_id"] for s in report["signals"]] == [
        mismatch["signal_id"], stale["signal_id"], wrong["signal_id"], waiting["signal_id"]]
    world.db.execute("UPDATE weave_pending_advances SET available_at = due_at WHERE step_key = 'approval'")
    orch.drain()
    after = signals.explain(world.db.conn, world.token, world.namespace, wf, "approval")
    assert {s["signal_id"]: s["why"] for s in after["signals"]}[waiting["signal_id"]] == "WON"


def test_S17_a_late_signal_is_explained_by_its_lateness_with_the_deadline_it_missed(world, orch):
    """A signal that came after the wait's deadline is LATE whatever its correlation (S-9's order): explain gave it
    the facts of a correlation mismatch when it did not match as well. It now gives the deadline it missed."""
    wf = started(world, orch, signal_flow(timeout_ms=60_000))
    deadline = world.step(wf, "approval")["wait"]["deadline_at"]
    world.db.advance(60_001)  # past the wait's deadline, before any runner looked
    late = send(world, wf, "late-1", correlation_key="o-9")
    assert (late["status"], late["disposition"]) == ("REJECTED", "LATE")
    why = {s["signal_id"]: s for s in signals.explain(world.db.conn, world.token, world.namespace, wf,
                                                       "approval")["signals"]}
    assert why[late["signal_id"]]["why"] == "LATE"
    assert why[late["signal_id"]]["detail"]["deadline_at"] == deadline
    assert "expected_hex" not in why[late["signal_id"]]["detail"]


def test_S17_explain_before_activation_shows_the_contract_and_early_signals(world, orch):
    world.publish(signal_flow(before_timer_ms=HOUR))
    wf = world.start("approval-flow", {"order_id": "o-1"})
    early = send(world, wf)
    report = signals.explain(world.db.conn, world.token, world.namespace, wf, "approval")
    assert report["status"] == "PENDING" and report["wait"]["status"] is None
    assert report["wait"]["name"] == NAME and report["wait"]["correlation_key"] is None
    assert [(s["signal_id"], s["why"]) for s in report["signals"]] == [(early["signal_id"], "WAITING_FOR_ACTIVATION")]
    with pytest.raises(errors.NotFound):
        signals.explain(world.db.conn, world.token, world.namespace, wf, "no_such_step")
    reader = world.credential(["workflows:signal"])["token"]
    with pytest.raises(errors.Forbidden):
        signals.explain(world.db.conn, reader, world.namespace, wf, "approval")


# --- the SIGNAL candidate ---------------------------------------------------------------------------------------------
def test_R13_signal_candidate_is_busy_while_another_node_holds_the_instance(world, orch):
    wf = started(world, orch)
    sig = queued(world, wf)
    holder = world.db.connect()
    try:
        with holder.cursor() as cur:
            cur.execute("START TRANSACTION")
            cur.execute("SELECT id FROM weave_instances WHERE id = %s FOR UPDATE", (world.internal_id(wf),))
            assert signals.process(world.db.conn, int(sig["signal_id"][4:])) == "BUSY"
            cur.execute("ROLLBACK")
    finally:
        holder.close()
    assert signals.process(world.db.conn, int(sig["signal_id"][4:])) == "CONSUMED"
    assert signals.process(world.db.conn, int(sig["signal_id"][4:])) == "GONE"


def test_S11_signal_accepted_into_an_active_wait_settles_within_one_scan(world, orch):
    wf = started(world, orch)
    send(world, wf)
    orch.run_once()
    assert world.step(wf, "approval")["wait"]["status"] == "SATISFIED"


def test_S1_a_correlation_that_does_not_resolve_to_a_string_is_never_guessed(world, orch):
    world.publish({"name": "corr", "steps": [
        {"key": "approval", "type": "SIGNAL", "signal": {"name": "ok", "payload_version": "1", "payload_type": "any"},
         "correlation": "$.input.missing", "timeout_ms": 60_000}]})
    wf = world.start("corr", {"order_id": "o-1"})  # activated by the start itself, which asks at once
    assert world.instance(wf)["status"] == "NEEDS_REVIEW"
    outcomes = orch.drain(max_rounds=2)
    assert not any(k.endswith("FAILED") for k in outcomes)  # asked, not retried
    assert world.step(wf, "approval")["status"] == "NEEDS_REVIEW"
    assert world.db.scalar("SELECT COUNT(*) FROM weave_activations") == 0  # no bytes were guessed
    (reason,) = world.instance(wf)["review_reasons"]
    assert reason["code"] == "ACTIVATION_FAILED"
    assert reason["detail"]["detail"] == ("correlation must resolve to a string of 1-512 bytes, got null (its "
                                          "expression found nothing there, or a null)")
    world.start("corr", {"missing": "x" * 513})  # a string too long says how long it is
    assert "got a string of 513 bytes: " in world.db.scalar(
        "SELECT detail FROM weave_review_reasons WHERE code = 'ACTIVATION_FAILED' ORDER BY id DESC LIMIT 1")


# --- settle at Send: an open wait takes its signal in Send's own transaction -----------------------------------------
def test_S11_send_settles_an_open_wait_and_follows_the_successors_in_its_own_transaction(world, orch):
    wf = started(world, orch, signal_flow(then_timer=True))
    receipt = send(world, wf, "k-1")
    assert receipt["status"] == "PENDING"  # the receipt is frozen at acceptance and never follows consumption (S-5)
    row = signal_row(world, receipt["signal_id"])
    assert row["status"] == "CONSUMED" and row["consumed_at"] == row["accepted_at"]
    step = world.step(wf, "approval")
    assert step["status"] == "SUCCEEDED" and step["output"] == {"approved": True}
    assert step["wait"]["status"] == "SATISFIED" and step["wait"]["winner_signal_id"] == receipt["signal_id"]
    assert world.step(wf, "after_approval")["status"] == "ACTIVE"  # successors followed in the same transaction
    types = [e["type"] for e in world.events(wf)]
    assert types.index("SIGNAL_ACCEPTED") < types.index("SIGNAL_CONSUMED")
    actions = [r["action"] for r in world.db.rows("SELECT action FROM weave_audit WHERE instance_id = %s ORDER BY id",
                                                  world.internal_id(wf))]
    assert actions[-2:] == ["signal.accept", "signal.consume"]
    # Nothing is left for a runner: no SIGNAL candidate, no checkpoint of the settled step.
    assert world.db.scalar("SELECT COUNT(*) FROM weave_signals WHERE status = 'PENDING'") == 0
    assert world.db.scalar("SELECT COUNT(*) FROM weave_pending_advances WHERE step_key = 'approval'") == 0
    assert orch.drain()["SIGNAL:CONSUMED"] == 0


def test_S11_settled_at_send_the_first_pending_match_by_acceptance_still_wins(world, orch):
    wf = started(world, orch, signal_flow(then_timer=True))
    first = queued(world, wf, "first", payload='{"n": 1}')  # accepted earlier, not yet consumed (runners down)
    second = send(world, wf, "second", payload='{"n": 2}')
    assert signal_row(world, first["signal_id"])["status"] == "CONSUMED"
    row = signal_row(world, second["signal_id"])
    assert (row["status"], row["disposition"]) == ("REJECTED", "WAIT_SETTLED")
    assert world.step(wf, "approval")["output"] == {"n": 1}


@pytest.mark.parametrize("pin", ["signal_name", "payload_version"])
def test_S11_settled_at_send_an_instances_first_signal_wins_only_by_the_waits_own_pins(world, orch, pin):
    """The instance's first signal is the only candidate, so Send takes it without searching; it still wins only
    by the conditions of the search: here the wait's pinned contract no longer names it (stored facts changed
    under the engine), so it is not consumed and the wait stays open."""
    wf = started(world, orch, signal_flow())
    world.db.execute(f"UPDATE weave_waits SET {pin} = 'changed' WHERE kind = 'SIGNAL'")
    receipt = send(world, wf, "k-1")
    assert receipt["status"] == "PENDING"  # accepted: the definition's contract is met
    assert signal_row(world, receipt["signal_id"])["status"] != "CONSUMED"
    assert world.step(wf, "approval")["status"] == "ACTIVE"
    assert world.step(wf, "approval")["wait"]["status"] == "WAITING"
    assert "SIGNAL_CONSUMED" not in [e["type"] for e in world.events(wf)]


def test_S15_settled_at_send_a_paused_instance_consumes_and_its_successors_wait_for_the_gate(world, orch):
    wf = started(world, orch, signal_flow(then_timer=True))
    routines.instance_pause(world.db.conn, world.token, world.namespace, wf, "hold on", "pause-1")
    receipt = send(world, wf)
    assert signal_row(world, receipt["signal_id"])["status"] == "CONSUMED"
    assert world.step(wf, "approval")["status"] == "SUCCEEDED"
    assert world.step(wf, "after_approval")["status"] == "PENDING"  # no new work while paused
    root = world.db.row("SELECT available_at, due_at FROM weave_pending_advances WHERE step_key = ''")
    assert root is not None and root["available_at"] > root["due_at"]  # the ROOT checkpoint is deferred
    routines.instance_resume(world.db.conn, world.token, world.namespace, wf, "go on", "resume-1")
    orch.drain()
    assert world.step(wf, "after_approval")["status"] == "ACTIVE"


def test_R6_settle_at_send_never_makes_acceptance_fail_when_the_wait_does_not_verify(world, orch):
    wf = started(world, orch, signal_flow())
    world.db.execute("UPDATE weave_waits SET deadline_at = deadline_at - INTERVAL 1 SECOND WHERE kind = 'SIGNAL'")
    receipt = send(world, wf, "k-1")
    assert receipt["status"] == "PENDING"
    row = signal_row(world, receipt["signal_id"])
    assert row["status"] == "PENDING" and row["available_at"] == row["accepted_at"]  # left to the candidate path
    assert world.step(wf, "approval")["wait"]["status"] == "WAITING"
    assert [r["action"] for r in world.db.rows("SELECT action FROM weave_audit ORDER BY id")][-1] == "signal.accept"
    outcomes = orch.drain(max_rounds=2)
    assert outcomes["CHECKPOINT:FAILED"] + outcomes["SIGNAL:FAILED"] >= 1  # the runner reports it and backs off


ADVANCERS = {"CHECKPOINT": "weave_checkpoint_advance", "SIGNAL": "weave_signal_process", "INBOX": "weave_inbox_consume"}


def _advance_due(conn, passes: int) -> None:
    """What an orchestrator does, from a SQL client's own session: scan, then advance each due candidate."""
    for _ in range(passes):
        for candidate in dbmod.call(conn, "weave_scan", 100)[0]:
            if candidate["class"] in ADVANCERS:
                dbmod.call(conn, ADVANCERS[candidate["class"]], candidate["id"])


def test_S11_a_client_session_with_safe_updates_settles_a_wait_and_its_other_signals(world, orch):
    """sql_safe_updates (the mariadb client's --safe-updates) refuses an update that does not find its rows through a
    key of every table it names: the settlement of a wait's other signals, run here by a SQL client that advances
    the due candidates itself, is one keyed update of the signals alone."""
    wf, mismatch, first, second = _three_early_signals(world, orch)
    conn = world.db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_safe_updates = 1")
        _advance_due(conn, passes=10)
    finally:
        conn.close()
    step = world.step(wf, "approval")
    assert step["status"] == "SUCCEEDED" and step["wait"]["winner_signal_id"] == first["signal_id"]
    assert [(signal_row(world, s["signal_id"])["status"], signal_row(world, s["signal_id"])["disposition"])
            for s in (mismatch, second)] == [("REJECTED", "CORRELATION_MISMATCH"), ("REJECTED", "WAIT_SETTLED")]


def test_S11_a_session_with_a_small_aggregate_cap_settles_a_wait_with_many_signals(world):
    """The settlement lists the signals it settles in one aggregate, which MariaDB caps at the session's
    group_concat_max_len: a SQL client's session with MySQL's 1024 (kept in some servers' configuration) settles a
    wait with thirty signals waiting all the same, and keeps its own cap."""
    world.publish(signal_flow())
    wf = world.start("approval-flow", {"order_id": "o-1"})
    receipts = [send(world, wf, f"k-{i}", queued=True, payload=f'{{"n": {i}}}') for i in range(30)]
    conn = world.db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION group_concat_max_len = 1024")
        _advance_due(conn, passes=3)
        with conn.cursor() as cur:
            cur.execute("SELECT @@group_concat_max_len AS cap")
            assert cur.fetchone()["cap"] == 1024
    finally:
        conn.close()
    assert world.step(wf, "approval")["wait"]["winner_signal_id"] == receipts[0]["signal_id"]
    rows = world.db.rows("SELECT status, disposition FROM weave_signals ORDER BY id")[1:]
    assert rows == [{"status": "REJECTED", "disposition": "WAIT_SETTLED"}] * 29
    settled = next(e for e in world.events(wf) if e["type"] == "SIGNALS_SETTLED")
    assert settled["data"]["count"] == 29 and len(settled["data"]["signals"]) == 29


def test_P1_an_expression_finds_a_key_that_a_signal_payload_spells_with_escapes(world, orch):
    """A payload is kept as it was sent, and an encoder that keeps to ASCII (Python's json.dumps by default, so the
    requests library's json=) spells a key like 审批人 as \\u5ba1\\u6279\\u4eba. MariaDB's JSON_EXTRACT finds such a
    key only through its escapes: a later step's expression naming it resolved to null, and its task ran with
    that null. Escapes in upper case (as other encoders write them) are found as well; a missing key stays null."""
    output = "$.steps.approval.output"
    world.publish({"name": "escaped", "steps": [signal_step(), {
        "key": "work", "type": "TASK", "queue": world.queue, "handler": "example.echo", "handler_version": "1",
        "after": ["approval"], "input": {"who": f'{output}["审批人"]', "face": f'{output}["😀"]',
                                         "plain": f"{output}.n", "none": f'{output}["无"]'}}]})
    for payload in ('{"\\u5ba1\\u6279\\u4eba": "\\u5f20\\u4e09", "\\ud83d\\ude00": [1], "n": 1}',
                    '{"\\u5BA1\\u6279\\u4EBA": "\\u5F20\\u4E09", "\\uD83D\\uDE00": [1], "n": 1}'):
        wf = world.start("escaped", {"order_id": "o-1"})
        send(world, wf, payload=payload)
        orch.drain()
        task = world.db.scalar("SELECT input FROM pulse_tasks WHERE instance_id = %s", world.internal_id(wf))
        assert json.loads(task) == {"who": "张三", "face": [1], "plain": 1, "none": None}
