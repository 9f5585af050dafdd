"""Z-4: bad input, from both ends.

- From SQL: hypothesis fuzzes the parameters of every public routine (read from information_schema, so a new
  routine is fuzzed without anyone listing it), mixing real tokens, namespaces, ids and step keys with
  arbitrary values of each declared type. Every failure must be one of the engine's stable errors (a 4xx in
  HTTP terms, never an internal one), and after any failure no table may have changed.
- From HTTP: schemathesis over every operation of /openapi.json, with the path parameters drawn half of the
  time from rows that exist (a workflow, its signal and step, a definition version), so that calls reach
  deep into the engine as a client following the responses would. 0 server errors, and after any 4xx no
  table changed.

Both print their figures. ``WEAVE_Z4_EXAMPLES`` sets the examples per routine / operation (default 12).
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter

import pymysql
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.app import create_app
from api.http import Connections
from procedures import errors, invariants
from tests.reliability.conftest import count_param, figure
from tests.support.db import scenario_tables
from tests.support.signals import send, signal_flow

EXAMPLES = count_param("WEAVE_Z4_EXAMPLES", 12)
SETTINGS = dict(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
                database=None)


def fingerprint(db) -> dict:
    """Every scenario table's row count and checksum: any change shows."""
    tables = scenario_tables(db.conn) + ["weave_install"]
    with db.conn.cursor() as cur:
        cur.execute("CHECKSUM TABLE " + ", ".join(f"`{t}`" for t in tables))
        return {r["Table"]: r["Checksum"] for r in cur.fetchall()}


def scenario(world) -> dict:
    """Rows worth aiming at: a published definition, an instance waiting for a signal, a signal."""
    world.publish(signal_flow())
    wf = world.start("approval-flow", {"order_id": "o-1"})
    receipt = send(world, wf, "known-key")
    return {"workflow_id": wf, "signal_id": receipt["signal_id"], "step_key": "approval",
            "definition": "approval-flow", "namespace": world.namespace}


def public_routines(db) -> list[tuple[str, list[dict]]]:
    rows = db.rows(
        "SELECT r.ROUTINE_NAME AS name, p.PARAMETER_NAME AS param, p.DATA_TYPE AS type, "
        "p.CHARACTER_MAXIMUM_LENGTH AS length, p.DTD_IDENTIFIER AS dtd FROM information_schema.ROUTINES r "
        "LEFT JOIN information_schema.PARAMETERS p ON p.SPECIFIC_SCHEMA = r.ROUTINE_SCHEMA "
        "AND p.SPECIFIC_NAME = r.ROUTINE_NAME AND p.PARAMETER_MODE = 'IN' "
        "WHERE r.ROUTINE_SCHEMA = DATABASE() AND r.ROUTINE_COMMENT NOT LIKE 'Internal.%%' "
        "ORDER BY r.ROUTINE_NAME, p.ORDINAL_POSITION")
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(r["name"], [])
        if r["param"]:
            out[r["name"]].append(r)
    return sorted(out.items())


def value_strategy(param: dict, known: dict, tokens: list[str]):
    name, kind, length = param["param"], param["type"], param["length"] or 64
    if name == "in_token":
        real = st.sampled_from(tokens)
    elif name == "in_namespace":
        real = st.just(known["namespace"])
    elif name == "in_workflow_id":
        real = st.just(known["workflow_id"])
    elif name == "in_signal_id" and kind == "varchar":
        real = st.just(known["signal_id"])
    elif name in ("in_step_key", "in_target_step_key"):
        real = st.just(known["step_key"])
    elif name in ("in_definition", "in_name"):
        real = st.sampled_from([known["definition"], "approval.decided"])
    else:
        real = st.nothing()
    if kind in ("int", "bigint", "tinyint", "smallint"):
        unsigned = "unsigned" in (param["dtd"] or "")
        arbitrary = st.one_of(st.integers(0 if unsigned else -(2 ** 63), 2 ** 64 - 1 if unsigned else 2 ** 63 - 1),
                              st.integers(-2, 1000))
    elif kind == "datetime":
        arbitrary = st.datetimes(dt.datetime(1000, 1, 1), dt.datetime(9999, 12, 31)).map(
            lambda d: d.strftime("%Y-%m-%d %H:%M:%S.%f"))
    elif kind == "longtext":
        arbitrary = st.one_of(st.text(max_size=200), st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=20),
            lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
            max_leaves=10).map(json.dumps))
    else:
        # Around the declared width too: a lax caller's mode would truncate there (parameters are wider than
        # the columns on purpose, and the routines check lengths themselves).
        around = st.integers(max(0, min(length, 4100) - 2), min(length, 4100) + 2).map(lambda n: "é" * n)
        arbitrary = st.one_of(st.text(max_size=300), around,
                              st.sampled_from(["", " ", "acme", "wf_1", "sig_1", "*", "workflows:read", "x" * 80]))
    return st.one_of(st.none(), real, arbitrary)


def call(conn, routine: str, args: list) -> None:
    placeholders = ", ".join(["%s"] * len(args))
    with conn.cursor() as cur:
        cur.execute(f"CALL {routine}({placeholders})", args)
        while cur.nextset():
            pass


def fuzz_routine(db, routine: str, strategies: list, outcomes: Counter, internal: list[str]) -> None:
    @given(args=st.tuples(*strategies))
    @settings(**SETTINGS)
    def fuzz(args):
        before = fingerprint(db)
        try:
            call(db.conn, routine, list(args))
            outcomes["ok"] += 1
        except pymysql.err.MySQLError as exc:
            domain = errors.translate(exc)
            after = fingerprint(db)
            assert after == before, f"{routine}{args} failed ({exc}) and left changes behind"
            if isinstance(domain, errors.WeaveError) and domain.http_status < 500:
                outcomes[domain.code] += 1
            else:
                outcomes["internal"] += 1
                internal.append(f"{routine}: {errors.errno_of(exc)} {exc.args[-1]}"[:200])

    fuzz()


def test_Z4_fuzzed_parameters_of_every_public_routine_fail_cleanly_and_change_nothing(world):
    db = world.db
    known = scenario(world)
    tokens = [world.admin, world.token, "wv_" + "0" * 48]
    routines = public_routines(db)
    assert len(routines) >= 30, [r for r, _ in routines]
    outcomes: Counter = Counter()
    internal: list[str] = []
    for routine, params in routines:
        fuzz_routine(db, routine, [value_strategy(p, known, tokens) for p in params], outcomes, internal)
    invariants.check(db.conn)
    figure("Z-4 routine fuzzing", routines=len(routines), calls=sum(outcomes.values()),
           internal_errors=len(internal), outcomes=dict(outcomes.most_common()))
    assert internal == [], internal[:10]


ADMIN_PATHS = ("/apps", "/queues", "/credentials", "/definitions")


def test_Z4_every_http_operation_answers_without_server_errors_and_a_4xx_changes_nothing(db, world):
    known = scenario(world)
    schema = schemathesis.openapi.from_wsgi("/openapi.json", create_app(Connections(db.dsn)))
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 10
    statuses: Counter = Counter()
    for operation in operations:
        token = world.admin if operation.path.endswith(ADMIN_PATHS) or "/definitions" in operation.path \
            else world.token

        exercise(db, operation, token, known, statuses)
    figure("Z-4 http fuzzing", operations=len(operations), calls=sum(statuses.values()),
           statuses=dict(sorted(statuses.items())))
    assert sum(n for s, n in statuses.items() if s >= 500) == 0


def exercise(db, operation, token: str, known: dict, statuses: Counter) -> None:
    @given(case=operation.as_strategy(), aim=st.booleans())
    @settings(**SETTINGS)
    def run(case, aim):
        if aim and case.path_parameters:
            for name in case.path_parameters:
                if name in known:
                    case.path_parameters[name] = known[name]
                elif name == "ns":
                    case.path_parameters[name] = known["namespace"]
                elif name == "version":
                    case.path_parameters[name] = "1"
                elif name == "name":
                    case.path_parameters[name] = known["definition"]
        before = fingerprint(db)
        response = case.call(headers={"Authorization": f"Bearer {token}"})
        statuses[response.status_code] += 1
        assert response.status_code < 500, (case.method, case.formatted_path, response.status_code,
                                            response.text[:300])
        if 400 <= response.status_code < 500:
            assert fingerprint(db) == before, (case.method, case.formatted_path, response.status_code)

    run()
