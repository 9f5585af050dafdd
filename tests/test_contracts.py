"""Contracts that hold across the code base: the error vocabulary, routine shape, generated docs,
and rule coverage (Q-4)."""

from __future__ import annotations

import re
from pathlib import Path

from procedures import docs, errors
from procedures.installer import PROCEDURES_DIR, shipped_migrations, shipped_routines

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT.parent / "shared" / "spec"
RULE_IDS_FILE = ROOT / "tests" / "spec_rule_ids.txt"
_RAISE = re.compile(r"_weave_raise\(\s*(\d+)\s*,\s*(?:CONCAT\(\s*)?'([A-Z_]+):")
_SIGNAL = re.compile(r"MYSQL_ERRNO\s*=\s*(\d+)")
# The server's own refusals, raised by a routine as the server raises them for a user it holds to them: a read-only
# server's (1290), which the owner's SUPER or READ_ONLY ADMIN would let a fold write past.
SERVER_REFUSALS = {1290}


def test_every_errno_raised_by_a_routine_is_in_the_error_table_with_its_code():
    table = {errno: code for code, (errno, _) in errors.ERRORS.items()}
    table.update({errno: code for code, errno in errors.VALIDATION_CODES.items()})
    table.update({errno: code for code, errno in errors.TRANSIENT_CODES.items()})
    seen = set()
    for routine in shipped_routines():
        for errno, code in _RAISE.findall(routine.text):
            assert int(errno) in table, f"{routine.name}: errno {errno} is not in procedures/errors.py"
            assert table[int(errno)] == code, f"{routine.name}: errno {errno} is {table[int(errno)]}, not {code}"
            seen.add(int(errno))
        for errno in _SIGNAL.findall(routine.text):
            assert routine.name == "_weave_raise" or int(errno) in table or int(errno) in SERVER_REFUSALS
    assert len(set(table.values())) == len(table), "two errnos share a code"
    assert seen, "no routine raises a stable error"



# A message written whole: the literal (or adjacent literals) a raise passes, up to its closing parenthesis.
_MESSAGE = re.compile(r"_weave_raise\(\s*\d+\s*,\s*((?:'(?:[^']|'')*'\s*)+)\)")


def test_every_error_message_fits_what_the_server_carries():
    """A message longer than the 128 characters MESSAGE_TEXT carries is cut (_weave_raise takes its LEFT): a
    refusal's detail lost its end, the part that named what to fix."""
    checked = 0
    for routine in shipped_routines():
        for literals in _MESSAGE.findall(routine.text):
            message = "".join(part.replace("''", "'") for part in re.findall(r"'((?:[^']|'')*)'", literals))
            assert len(message) <= 128, f"{routine.name}: {len(message)} characters: {message}"
            checked += 1
    assert checked > 100

# Errors any routine may answer beyond its own list: IN_TRANSACTION (R-1, any routine that owns its transaction),
# CLOCK_FIXED (R-2, any routine that decides, in a session whose clock is set), ROOM_TAKEN and INTERRUPTED
# (transient: the decision is retried) and INVALID_STATE for stored facts that do not verify.
ANY_ROUTINE = {50013, 50017, 50014, 50016, 50007}
# Errors of a body shared by several public routines (a branch each) that another routine's branch raises.
OTHER_BRANCHES = {"weave_queue_put": {50100},  # _weave_provision_put: an app's status (a queue has none)
                  # _weave_step_recover: resolve's output and evidence, continue's deadline and rounds
                  "weave_step_continue": {50112, 50117}, "weave_step_reactivate": {50112, 50117, 50118},
                  "weave_step_resolve": {50100, 50118}}
_CALLED = re.compile(r"\b(_(?:weave|pulse)_[a-z_]+)\(")


def test_every_errno_a_public_routine_can_raise_is_in_its_header():
    """What a SQL caller reads in docs/sql-api.md: every stable error a routine raises, itself or through the
    internal routines it calls, is in its Errors list (or in that of the routine it says it answers as)."""
    routines = {r.name: r for r in shipped_routines()}
    raised = {name: {int(e) for e, _ in _RAISE.findall(_code(r.text))} for name, r in routines.items()}
    calls = {name: set(_CALLED.findall(_code(r.text))) - {"_weave_raise"} for name, r in routines.items()}

    def reach(name: str, seen: set[str]) -> set[int]:
        if name in seen or name not in routines:
            return set()
        seen.add(name)
        return raised[name].union(*(reach(c, seen) for c in calls[name]))

    def documented(name: str) -> set[int]:
        header = routines[name].text[: routines[name].text.index("\nBEGIN")]
        listed = header.split("Errors:", 1)[1].split("Rules:", 1)[0] if "Errors:" in header else ""
        same = re.search(r"otherwise\s+as\s+(weave_[a-z_]+)", listed)
        return {int(e) for e in re.findall(r"\b5\d{4}\b", listed)} | (documented(same.group(1)) if same else set())

    missing = {name: sorted(reach(name, set()) - documented(name) - ANY_ROUTINE - OTHER_BRANCHES.get(name, set()))
               for name, r in routines.items() if r.public}
    assert {name: errnos for name, errnos in missing.items() if errnos} == {}

def test_every_error_code_translates_to_its_own_exception_class():
    import pymysql

    for code, (errno, status) in errors.ERRORS.items():
        exc = errors.translate(pymysql.err.OperationalError(errno - 65536, f"{code}: detail"))
        assert exc.code == code and exc.http_status == status and exc.detail == "detail"
    for code, errno in errors.VALIDATION_CODES.items():
        exc = errors.translate(pymysql.err.OperationalError(errno - 65536, f"{code}: detail"))
        assert isinstance(exc, errors.ValidationFailed) and exc.field_code == code and exc.http_status == 422


def _code(text: str) -> str:
    """A routine's body without its comments: what the server executes."""
    body = text[text.index("\nBEGIN") :]
    return "\n".join(line.split("--")[0] for line in body.splitlines())


OWN_HANDLER = "DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;"


def inline_probe(routine: str) -> str:
    """The probe a routine that opens its transaction only when it has work (a claim, a candidate list) makes
    without a nested call: _weave_transaction_begin's, with its portable branch for MySQL."""
    own = f"CALL _weave_transaction_own('{routine}');"
    return f"IF VERSION() LIKE '%MariaDB%' THEN IF @@in_transaction = 1 THEN {own} END IF; ELSE {own} END IF;"


def _flat(code: str) -> str:
    return " ".join(code.split())


def test_R1_every_transactional_routine_rolls_back_only_its_own_transaction_and_reraises():
    """A routine that starts a transaction rolls back exactly that one on error (``v_tx`` says it started it),
    and refuses (or joins, for a read snapshot) before it touches any table when the caller has one open.
    ``v_tx`` is set by ``SET v_tx = TRUE`` after the refusal check, or by one of the openers
    ``_weave_transaction_claim`` and ``_weave_transaction_begin``, which make the check, set it and then start
    the transaction, or by ``_weave_snapshot_open``, which joins a caller's transaction or starts a snapshot."""
    openers = ("_weave_transaction_claim", "_weave_transaction_begin")
    for opener in openers:
        code = _code(next(r.text for r in shipped_routines() if r.name == opener))
        assert (code.index("CALL _weave_transaction_own(in_routine);") < code.index("SET out_owned = TRUE;")
                < code.index("START TRANSACTION;")), opener
        assert not re.search(r"\b(COMMIT|ROLLBACK)\s*;", code), opener
    # A read snapshot's opener joins a caller's transaction instead of refusing it, and owns only one it starts.
    code = _code(next(r.text for r in shipped_routines() if r.name == "_weave_snapshot_open"))
    assert (code.index("CALL _weave_transaction_open(v_joined);") < code.index("SET out_owned = NOT v_joined;")
            < code.index("START TRANSACTION WITH CONSISTENT SNAPSHOT;"))
    assert not re.search(r"\b(COMMIT|ROLLBACK)\s*;", code)
    for routine in shipped_routines():
        if routine.name in (*openers, "_weave_snapshot_open"):
            continue
        code = _code(routine.text)
        opened = re.search(r"CALL (_weave_transaction_claim|_weave_transaction_begin|_weave_snapshot_open)\(", code)
        if "START TRANSACTION" in code or opened:
            assert OWN_HANDLER in code, routine.name
            assert re.search(r"\bROLLBACK\s*;", code.replace(OWN_HANDLER, "")) is None, routine.name
            body = code[code.index(OWN_HANDLER) + len(OWN_HANDLER):]
            first = body.strip().splitlines()[0].strip()
            claim = f"CALL _weave_transaction_claim('{routine.name}', v_tx);"
            begin = f"CALL _weave_transaction_begin('{routine.name}', v_tx);"
            own = f"CALL _weave_transaction_own('{routine.name}');"
            snapshot = "CALL _weave_snapshot_open(v_tx);"
            checks = (own, claim, begin, snapshot, "CALL _weave_transaction_open(v_joined);")
            if _flat(body).startswith(inline_probe(routine.name)):
                first = own  # the same check, made inline
            assert first in checks, f"{routine.name} must check for a caller's transaction before reading any table"
            if first in (claim, begin, snapshot):  # the opener starts the transaction; another only after a COMMIT
                assert body.count("CALL _weave_transaction_") + body.count("CALL _weave_snapshot_open") == 1, \
                    routine.name
                later = body.find("START TRANSACTION")
                assert later == -1 or re.search(r"\bCOMMIT\s*;", body[:later]), routine.name
            else:
                assert body.index("SET v_tx = TRUE;") < body.index("START TRANSACTION"), routine.name
        if routine.name.startswith("_"):
            assert not opened and "START TRANSACTION" not in code and not re.search(r"\bCOMMIT\s*;", code), \
                f"internal routine {routine.name} must run inside its caller's transaction"


def test_R1_every_statement_that_builds_a_list_raises_the_list_cap_for_itself():
    """GROUP_CONCAT (on both servers) and MariaDB's JSON_ARRAYAGG and JSON_OBJECTAGG stop at the session's
    group_concat_max_len, and a caller may keep MySQL's 1024: a list is then cut short, mid-value for a JSON one.
    Every statement that builds one raises the cap for itself alone (``SET STATEMENT ... FOR``, in a comment only
    MariaDB runs), which the server sets back after it, whatever happens; a GROUP_CONCAT also takes MySQL's SET_VAR
    hint. The session's own value is never changed."""
    raise_cap = re.compile(r"/\*M!100301 SET STATEMENT group_concat_max_len = \d+ FOR \*/")
    found = 0
    for routine in shipped_routines():
        code = _code(routine.text)
        assert "SET SESSION group_concat_max_len" not in code, routine.name
        for statement in code.split(";"):
            if re.search(r"\b(GROUP_CONCAT|JSON_ARRAYAGG|JSON_OBJECTAGG)\s*\(", statement):
                found += 1
                assert raise_cap.search(statement), f"{routine.name}: {_flat(statement)[:120]}"
                if "GROUP_CONCAT" in statement:
                    assert "/*+ SET_VAR(group_concat_max_len = " in statement, routine.name
    assert found >= 10  # the purge's, the settle's, the claim's, a publish's, a wake's and explain's


def test_R1_only_the_transaction_probe_reads_in_transaction_state():
    """@@in_transaction is MariaDB's alone: the probe and the opener read it, and the two routines that open a
    transaction only when they find work (a claim, a candidate list) read it as the opener does, first thing,
    each with the portable branch for MySQL."""
    readers = {r.name: _code(r.text) for r in shipped_routines() if "@@in_transaction" in _code(r.text)}
    assert sorted(readers) == ["_weave_transaction_begin", "_weave_transaction_open", "pulse_task_claim",
                               "weave_candidates_advance"]
    for name in ("pulse_task_claim", "weave_candidates_advance"):
        body = readers[name][readers[name].index(OWN_HANDLER) + len(OWN_HANDLER):]
        assert _flat(body).startswith(inline_probe(name)) and _flat(body).count("@@in_transaction") == 1, name


# The engine's clock, spelt one way: _weave_now's expression, which the hot paths also use inline to save a
# CALL: after their last lock (in a statement that starts once the lock is held: a statement's clock is the
# time it started), or in the one statement of a probe.
CLOCK = re.compile(r"UTC_TIMESTAMP\(6\) \+ INTERVAL (clock_offset_us|\(SELECT clock_offset_us FROM weave_install "
                   r"WHERE id = 1\)) MICROSECOND")


SESSION_CLOCK_CHECK = "ABS(TIMESTAMPDIFF(MICROSECOND, NOW(6), SYSDATE(6)))"


def test_R2_the_session_clock_check_runs_where_its_clock_is_the_present():
    """NOW() is the start of the statement, or of the instruction, that reads it, except inside a stored function,
    where it is the start of the statement that called the function: there the check compares a time that may be
    seconds old. So it is called by procedures only, and in the authorisation (which a function calls) before any
    read that could wait."""
    callers = [r for r in shipped_routines() if "CALL _weave_clock_own()" in _code(r.text)]
    assert {r.kind for r in callers} == {"PROCEDURE"}, [r.name for r in callers if r.kind != "PROCEDURE"]
    authorize = next(r for r in callers if r.name == "_weave_authorize")
    body = _code(authorize.text)
    assert body.index("CALL _weave_clock_own()") < body.index("SELECT"), "the check comes before the first read"
    assert {"_weave_transaction_begin", "_weave_transaction_claim", "weave_signal_send_in_tx",
            "weave_console_session_get"} <= {r.name for r in callers}


def test_R2_every_routine_reads_the_clock_once_and_one_way():
    inline = []
    for routine in shipped_routines():
        body = _code(routine.text)
        readings = CLOCK.findall(body)
        assert len(readings) <= 1, f"{routine.name} reads the clock {len(readings)} times"
        if readings and routine.name != "_weave_now":
            assert "CALL _weave_now" not in body, f"{routine.name} reads the clock twice"
            inline.append(routine.name)
        if readings and readings[0] == "clock_offset_us":
            assert "FROM weave_install WHERE id = 1" in body, routine.name
        rest = CLOCK.sub("", body).upper()
        if routine.name == "_weave_clock_own":  # compares the session's clock with the server's, and reads neither
            rest = rest.replace(SESSION_CLOCK_CHECK, "")
        for clock in (r"\bNOW\(", "UTC_TIMESTAMP", "CURRENT_TIMESTAMP", "SYSDATE"):
            assert not re.search(clock, rest), f"{routine.name} reads the clock with {clock}; use _weave_now"
    # The hot paths: the candidate decisions (in the re-read of their candidate under the instance lock), a start,
    # Send's acceptance and the operator actions' opening, a worker's claim, report and heartbeat (the last two
    # after the task and attempt locks), the scan and the idle probe.
    assert set(inline) <= {"_weave_checkpoint_decide", "_weave_inbox_decide", "weave_signal_process",
                           "_weave_signal_accept", "weave_scan", "weave_scan_probe", "_pulse_attempt_current",
                           "pulse_attempt_heartbeat", "pulse_task_claim", "weave_instance_start",
                           "_weave_control_begin"}, inline


# What orders a decision: the identity and app, read shared by the authorisation or the openers, and the
# instance row; for Pulse's own decisions, the task and the attempt rows they lock (Pulse's order: task, then
# attempt, in two statements or in one join that reads the task first), directly or through
# _pulse_attempt_current. A claim locks nothing before it picks: its tasks are skipped when locked, never waited for.
ORDERING_LOCKS = re.compile(r"CALL _weave_(?:instance_)?authorize\(|CALL _weave_instance_lock\("
                            r"|CALL _weave_control_begin\(|CALL _weave_admin_begin\(|LOCK IN SHARE MODE"
                            r"|FROM weave_instances WHERE id = \w+ FOR UPDATE"
                            r"|FROM pulse_(?:tasks|attempts) WHERE id = \w+ FOR UPDATE(?! SKIP LOCKED)"
                            r"|FROM pulse_tasks t STRAIGHT_JOIN pulse_attempts a ON a.id = \w+ "
                            r"WHERE t.id = \w+ FOR UPDATE"
                            r"|CALL _pulse_attempt_current\(")


def test_R2_the_clock_is_read_after_the_locks_that_order_the_decision():
    """Text order stands for execution order here: no routine reads the clock before one of those locks. A
    statement's clock is the time it started, so the clock may share a statement with an instance lock only when
    that lock was taken before (the statement then never waits for it)."""
    for routine in shipped_routines():
        code = _code(routine.text)
        clock = re.search(r"CALL _weave_now\(|" + CLOCK.pattern, code)
        if not clock:
            continue
        start = code.rfind(";", 0, clock.start()) + 1  # the statement that reads the clock
        locked_before = "CALL _weave_instance_lock(" in code[:start]
        for lock in ORDERING_LOCKS.finditer(code):
            in_clock_statement = lock.start() < code.index(";", clock.start())
            if lock.start() > start and not (in_clock_statement and locked_before):
                raise AssertionError(f"{routine.name} reads the clock before {lock.group(0)!r} (R-2)")


def test_every_public_routine_has_a_documented_header():
    for routine in shipped_routines():
        if routine.name.startswith("_"):
            continue
        assert "Description:" in routine.text, routine.name
        if "MODIFIES SQL DATA" in routine.text and "placeholder" not in routine.text:
            assert "Rules:" in routine.text, f"{routine.name} names no spec rule"


def test_routine_files_are_named_after_their_routine_and_free_of_client_syntax():
    for path in PROCEDURES_DIR.rglob("*.sql"):
        text = path.read_text()
        assert "DELIMITER" not in text and "DEFINER" not in text, path.name
    assert len(shipped_routines()) == len(list(PROCEDURES_DIR.rglob("*.sql")))


AREAS = {"core", "instances", "timers", "polls", "signals", "pulse", "control", "admin"}


def test_every_routine_lives_in_its_area_and_says_whether_it_is_an_interface():
    """Public and internal routines are told apart by the header, not only by the name's leading underscore."""
    for routine in shipped_routines():
        assert routine.path.parent.parent == PROCEDURES_DIR and routine.area in AREAS, routine.path
        assert routine.public == (not routine.name.startswith("_")), routine.name


def test_sql_reference_is_generated_from_the_current_headers():
    assert docs.TARGET.read_text() == docs.render(), "run: python -m procedures.docs"


def test_R17_every_migration_after_the_first_has_an_upgrade_test():
    later = shipped_migrations()[1:]
    upgrade_tests = " ".join(p.read_text() for p in (ROOT / "tests").rglob("test_upgrade*.py"))
    for migration in later:
        assert migration in upgrade_tests, f"migration {migration} has no upgrade test (R-17)"


# --- Q-4 rule coverage --------------------------------------------------------------------------------
# Areas this code base declares done: every rule id listed here must be named by a test.
DONE: set[str] = {
    *(f"R-{n}" for n in range(1, 19)),
    *(f"T-{n}" for n in range(1, 9)),
    *(f"K-{n}" for n in range(1, 10)),
    *(f"P-{n}" for n in range(1, 12)),
    *(f"S-{n}" for n in range(1, 18)),
    *(f"C-{n}" for n in range(1, 7)),
    *(f"F-{n}" for n in range(1, 10)),
}
_RULE = re.compile(r"\b([RTPKSFC])-(\d+)\b")


def _spec_rule_ids() -> set[str]:
    """Rule ids defined by the spec (bold definitions and table rows), or the checked-in copy."""
    if SPEC.is_dir():
        ids = set()
        for md in SPEC.glob("*.md"):
            text = md.read_text()
            ids |= {f"{a}-{b}" for a, b in re.findall(r"\*\*([RTPKSFC])-(\d+)\b", text)}
            ids |= {f"{a}-{b}" for a, b in re.findall(r"^\|\s*([RTPKSFC])-(\d+)\s*\|", text, re.M)}
        return ids
    return set(RULE_IDS_FILE.read_text().split())


def _tested_rule_ids() -> set[str]:
    ids = set()
    for path in (ROOT / "tests").rglob("*.py"):
        text = path.read_text()
        ids |= {f"{a}-{b}" for a, b in re.findall(r"def test_([RTPKSFC])(\d+)_", text)}
        ids |= {f"{a}-{b}" for a, b in _RULE.findall(text)}
        for a, lo, hi in re.findall(r"\b([RTPKSFC])-(\d+)\.\.[RTPKSFC]-(\d+)\b", text):
            ids |= {f"{a}-{n}" for n in range(int(lo), int(hi) + 1)}
    return ids


def test_Q4_rule_ids_file_matches_the_spec():
    if SPEC.is_dir():
        assert set(RULE_IDS_FILE.read_text().split()) == _spec_rule_ids(), \
            "tests/spec_rule_ids.txt is out of date with the spec"


def test_Q4_every_rule_of_a_done_area_is_named_by_a_test():
    spec = _spec_rule_ids()
    missing = sorted(spec - _tested_rule_ids(), key=lambda r: (r[0], int(r[2:])))
    print(f"\nrule ids without a test ({len(missing)} of {len(spec)}): {' '.join(missing)}")
    assert DONE <= spec
    assert [r for r in missing if r in DONE] == []


# The tables whose PENDING rows have an index of their own for the scan: a locking read that filters on the
# pending state could be planned through that index, and would then lock other instances' rows (a send waited
# on its neighbour's and two deadlocked). Such a read names the index of its own instance's or task's rows.
PENDING_INDEXED = ("weave_signals", "pulse_inbox")
LOCKING_READ = re.compile(r"\bSELECT\b(?:(?!;).)*?\b(?:FOR UPDATE|LOCK IN SHARE MODE)\b[^;]*;", re.S)


def test_R13_locking_reads_of_pending_rows_name_the_index_of_their_own_instance():
    unnamed = []
    for routine in shipped_routines():
        for read in LOCKING_READ.findall(_code(routine.text)):
            if "SKIP LOCKED" in read:
                continue
            for table in PENDING_INDEXED:
                if re.search(rf"\b{table}\b", read) and re.search(r"\b(status|state) = 'PENDING'", read) \
                        and not re.search(rf"\b{table}\b(\s+\w+)?\s+FORCE INDEX", read):
                    unnamed.append((routine.name, table))
    assert unnamed == []
