"""Routines installed inline (procedures/inlining.py): a block in place of a CALL does what the call did.

Each case installs the same caller twice on the real server, once calling the routine and once with the routine
inlined, and compares what the two answer, and the statements the server counts for each.
"""

from __future__ import annotations

import pytest

from procedures import db as dbmod
from procedures import errors, inlining, installer

CALLEE = """-- Inlined: for the test.
CREATE PROCEDURE t_inl_callee(
        IN    in_a     INT,
        IN    in_label VARCHAR(16),
        INOUT io_sum   INT,
        OUT   out_text VARCHAR(64))
    COMMENT 'Internal. Description: the test''s callee.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_n INT DEFAULT 0;  -- the caller has a v_n of its own
    DECLARE EXIT HANDLER FOR SQLSTATE '22012' SET out_text = 'exit handler';
    walk: BEGIN
        WHILE v_n < in_a DO
            SET v_n = v_n + 1, io_sum = io_sum + v_n;
            IF v_n = 3 THEN LEAVE walk; END IF;
        END WHILE;
    END walk;
    IF in_a = 7 THEN
        SIGNAL SQLSTATE '22012' SET MESSAGE_TEXT = 'handled inside';
    END IF;
    IF in_a < 0 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'raised to the caller';
    END IF;
    INSERT INTO t_inl_log (note) VALUES (CONCAT(in_label, ':', v_n));
    SET out_text = CASE WHEN v_n = 0 THEN 'none' ELSE CONCAT(in_label, ' ', v_n) END;
END
"""

CALLER = """CREATE PROCEDURE {name}(IN in_a INT)
    COMMENT 'Internal. Description: the test''s caller.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_n INT DEFAULT 100;
    DECLARE v_sum INT DEFAULT 10;
    DECLARE v_text VARCHAR(64) DEFAULT 'unset';
    DECLARE v_caught VARCHAR(64) DEFAULT NULL;
    BEGIN
        DECLARE EXIT HANDLER FOR SQLSTATE '45000' SET v_caught = 'caught';
        CALL t_inl_callee(in_a, CONCAT('run', in_a), v_sum, v_text);
        CALL t_inl_callee(in_a + 1, 'again', v_sum, v_text);
    END;
    BEGIN
        DECLARE CONTINUE HANDLER FOR SQLSTATE '45000' SET v_caught = CONCAT(COALESCE(v_caught, ''), '+continued');
        CALL t_inl_callee(in_a, 'continue', v_sum, v_text);
    END;
    SELECT v_n, v_sum, v_text, v_caught, (SELECT GROUP_CONCAT(note ORDER BY id) FROM t_inl_log) AS log;
END
"""


@pytest.fixture
def pair(db):
    """The caller installed twice: t_inl_called (plain) and t_inl_inlined (its callee's calls expanded)."""
    inliner = inlining.Inliner({"t_inl_callee": CALLEE})
    with db.conn.cursor() as cur:
        cur.execute("CREATE TABLE t_inl_log (id INT AUTO_INCREMENT PRIMARY KEY, note VARCHAR(64))")
        cur.execute(CALLEE)
        cur.execute(CALLER.format(name="t_inl_called"))
        cur.execute(inliner.expand(CALLER.format(name="t_inl_inlined")))
    yield db
    with db.conn.cursor() as cur:
        for name in ("t_inl_callee", "t_inl_called", "t_inl_inlined"):
            cur.execute(f"DROP PROCEDURE IF EXISTS {name}")
        cur.execute("DROP TABLE IF EXISTS t_inl_log")


def _run(db, name: str, a: int) -> tuple[dict, dict[str, int]]:
    """The caller's answer and the statements the server counted for it, the log emptied first."""
    with db.conn.cursor() as cur:
        cur.execute("TRUNCATE t_inl_log")
        cur.execute("SHOW SESSION STATUS WHERE Variable_name IN ('Com_call_procedure', 'Com_insert')")
        before = {r["Variable_name"]: int(r["Value"]) for r in cur.fetchall()}
    row = dbmod.call(db.conn, name, a)[0][0]
    with db.conn.cursor() as cur:
        cur.execute("SHOW SESSION STATUS WHERE Variable_name IN ('Com_call_procedure', 'Com_insert')")
        after = {r["Variable_name"]: int(r["Value"]) for r in cur.fetchall()}
    return row, {k: after[k] - before[k] for k in after}


@pytest.mark.parametrize("a", [0, 2, 5, 7, -1])
def test_an_inlined_routine_answers_as_its_call_does(pair, a):
    """Parameters in, out and both ways; the routine's own variable of a caller's name; a label left early; an
    exit handler of the routine; an error into the caller's exit handler; a call under a CONTINUE handler."""
    called, called_counts = _run(pair, "t_inl_called", a)
    inlined, inlined_counts = _run(pair, "t_inl_inlined", a)
    assert inlined == called
    assert called["v_n"] == 100  # the routine's v_n never touched the caller's
    # The two calls outside the CONTINUE handler's block are blocks (the second not reached after an error in the
    # first); the one inside it stays a call.
    reached = 1 if a < 0 else 2
    assert called_counts["Com_call_procedure"] - inlined_counts["Com_call_procedure"] == reached
    assert inlined_counts["Com_insert"] == called_counts["Com_insert"]


def test_a_call_under_a_continue_handler_stays_a_call():
    """A CONTINUE handler would resume inside an inlined body, where after an error the call resumed after it."""
    inliner = inlining.Inliner({"t_inl_callee": CALLEE})
    text = inliner.expand(CALLER.format(name="t"))
    assert text.count("CALL t_inl_callee(") == 3  # two in the blocks' comments, one a call
    assert text.count("BEGIN  -- inline CALL t_inl_callee(") == 2
    assert "CALL t_inl_callee(in_a, 'continue', v_sum, v_text);" in text


@pytest.mark.parametrize("body, refused", [
    ("SELECT walk INTO v_n FROM t; walk: BEGIN LEAVE walk; END walk;", "label walk also names something else"),
    ("SELECT t.in_a INTO v_n FROM t;", "parameter in_a also names a column"),
    ("SET v_n = IN_A;", "IN_A differs from a parameter or label only in case"),
])
def test_a_routine_whose_names_cannot_be_renamed_safely_is_refused(body, refused):
    text = f"""-- Inlined: for the test.
CREATE PROCEDURE t_bad(IN in_a INT) COMMENT 'Internal.' BEGIN DECLARE v_n INT; {body} END"""
    with pytest.raises(ValueError, match=refused):
        inlining.Inliner({"t_bad": text})


def test_a_parameter_not_named_as_a_parameter_is_refused():
    """A parameter named like a column (status) would be renamed where the body names the column."""
    text = "-- Inlined: for the test.\nCREATE PROCEDURE t_bad(IN status INT) COMMENT 'Internal.' BEGIN END"
    with pytest.raises(ValueError, match="parameter status is not named in_, out_ or io_"):
        inlining.Inliner({"t_bad": text})


def test_inlined_routines_that_call_each_other_in_a_cycle_are_refused():
    one = "-- Inlined: a.\nCREATE PROCEDURE t_one() COMMENT 'Internal.' BEGIN CALL t_two(); END"
    two = "-- Inlined: b.\nCREATE PROCEDURE t_two() COMMENT 'Internal.' BEGIN CALL t_one(); END"
    with pytest.raises(ValueError, match="cycle"):
        inlining.Inliner({"t_one": one, "t_two": two}).expand(one)


def test_shipped_decisions_run_their_hot_helpers_as_blocks(db):
    """The installed text of a decision holds the blocks of the routines it inlines and no call of them, except
    under a CONTINUE handler; the routines stay installed under their own names."""
    shipped = installer.shipped_routines()
    inlined = {r.name for r in shipped if inlining.MARKER.search(r.text)}
    assert {"_weave_transaction_begin", "_weave_candidate_open", "_weave_step_open"} <= inlined
    installed = {r["n"]: r["d"] for r in db.rows(
        "SELECT ROUTINE_NAME AS n, ROUTINE_DEFINITION AS d FROM information_schema.ROUTINES "
        "WHERE ROUTINE_SCHEMA = DATABASE()")}
    assert inlined <= set(installed)
    advance = installed["weave_checkpoint_advance"]
    for name in ("_weave_transaction_begin", "_weave_checkpoint_decide", "_weave_candidate_open",
                 "_weave_step_advance"):
        assert f"BEGIN  -- inline CALL {name}(" in advance
        assert advance.count(f"CALL {name}(") == advance.count(f"-- inline CALL {name}(")


def test_R1_an_error_inside_an_inlined_routine_reaches_the_client_as_from_its_call(db):
    """The shared opening refuses a caller's open transaction as before (R-1), from inside its block."""
    with db.conn.cursor() as cur:
        cur.execute("START TRANSACTION")
    try:
        with pytest.raises(errors.WeaveError) as refused:
            dbmod.call(db.conn, "weave_checkpoint_advance", 1)
        assert refused.value.code == "IN_TRANSACTION"
    finally:
        with db.conn.cursor() as cur:
            cur.execute("ROLLBACK")
