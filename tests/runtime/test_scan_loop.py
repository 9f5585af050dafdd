"""The orchestrator's scan loop (R-10, R-11, R-14) driven in-process against the real database."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import threading
from collections.abc import Iterator

from orchestrator.daemon import hold_until_level
from orchestrator.loop import Candidate, Orchestrator, ScanResult, merge_fairly
from procedures import errors, pulse
from tests.support.waiting import wait_for


def cands(klass, n):
    return [Candidate(klass, i, 1, i) for i in range(n)]


def test_R10_batch_merges_classes_fairly_and_is_capped():
    batch = merge_fairly([cands("INBOX", 150), cands("CHECKPOINT", 3), cands("SIGNAL", 150)], 100)
    assert len(batch) == 100
    kinds = [c.klass for c in batch]
    assert kinds.count("CHECKPOINT") == 3  # a small class is never starved by large ones
    assert abs(kinds.count("INBOX") - kinds.count("SIGNAL")) <= 1
    assert kinds[:3] == ["INBOX", "CHECKPOINT", "SIGNAL"]
    inbox = [c.id for c in batch if c.klass == "INBOX"]
    assert inbox == sorted(inbox)  # each class earliest first


def test_R10_each_candidate_class_is_capped_per_scan(world, database):
    world.publish({"name": "t", "steps": [{"key": "a", "type": "TIMER", "delay_ms": 1000}]})
    for i in range(30):
        world.start("t", key=f"k{i}")  # each start activates its timer
    world.db.advance(1_001)
    orch = Orchestrator(database, batch=10, concurrency=1)
    try:
        result = orch.scan()
        assert len(result.candidates) == 10
        assert all(c.klass == "CHECKPOINT" for c in result.candidates)
        dues = [c.due_at for c in result.candidates]
        assert dues == sorted(dues)
    finally:
        orch.close()


def test_R10_runs_of_a_listed_class_are_cut_into_lists_and_the_rest_goes_one_by_one(database):
    """Consecutive candidates of a class that weave_candidates_advance takes (CHECKPOINT, INBOX) go in lists
    of at most ``chunk``, in the batch's order; a class without lists, or a class change, ends a list."""
    orch = Orchestrator(database, chunk=5)
    try:
        batch = cands("INBOX", 7) + cands("CHECKPOINT", 3) + cands("SIGNAL", 2) + cands("INBOX", 2)
        units = orch._units(batch)
        assert [(u[0].klass, len(u)) for u in units] == [
            ("INBOX", 5), ("INBOX", 2), ("CHECKPOINT", 3), ("SIGNAL", 1), ("SIGNAL", 1), ("INBOX", 2)]
        assert [c for u in units for c in u] == batch
    finally:
        orch.close()


def test_R11_every_candidate_query_is_an_index_range_scan(db):
    """EXPLAIN of each scan query uses its own index, so its cost follows what is due, not history."""
    now = db.now().strftime("%Y-%m-%d %H:%M:%S.%f")
    queries = {
        "ix_inbox_pending": "SELECT id, version, available_at FROM pulse_inbox FORCE INDEX (ix_inbox_pending) "
                            f"WHERE state = 'PENDING' AND available_at <= '{now}' ORDER BY available_at LIMIT 100",
        "ix_checkpoint_available": "SELECT id, version, available_at FROM weave_pending_advances "
                                   "FORCE INDEX (ix_checkpoint_available) "
                                   f"WHERE available_at <= '{now}' ORDER BY available_at LIMIT 100",
        "ix_signal_pending": "SELECT id, version, available_at FROM weave_signals FORCE INDEX (ix_signal_pending) "
                             f"WHERE status = 'PENDING' AND available_at <= '{now}' ORDER BY available_at LIMIT 100",
        "ix_attempt_lease": "SELECT id, lease_expires_at FROM pulse_attempts FORCE INDEX (ix_attempt_lease) "
                            f"WHERE status = 'RUNNING' AND lease_expires_at <= '{now}' "
                            "ORDER BY lease_expires_at LIMIT 100",
        "ix_task_deadline": "SELECT id, deadline_at FROM pulse_tasks FORCE INDEX (ix_task_deadline) "
                            f"WHERE status = 'QUEUED' AND deadline_at <= '{now}' ORDER BY deadline_at LIMIT 100",
    }
    scan_text = (db.rows("SELECT ROUTINE_DEFINITION AS d FROM information_schema.ROUTINES "
                         "WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME = 'weave_scan'")[0]["d"])
    for index, sql in queries.items():
        assert f"FORCE INDEX ({index})" in scan_text
        plan = db.rows("EXPLAIN " + sql)
        assert len(plan) == 1 and plan[0]["key"] == index and plan[0]["type"] in ("range", "ref"), plan


def test_R14_idle_sleep_is_until_the_next_due_time_but_never_longer_than_the_probe(database):
    orch = Orchestrator(database, idle_probe_ms=20)
    now = dt.datetime(2026, 1, 1)
    try:
        assert orch.idle_seconds(ScanResult([], now, None)) == 0.02
        assert orch.idle_seconds(ScanResult([], now, now + dt.timedelta(milliseconds=5))) == 0.005
        assert orch.idle_seconds(ScanResult([], now, now + dt.timedelta(hours=1))) == 0.02
        assert orch.idle_seconds(ScanResult([], now, now - dt.timedelta(seconds=1))) == 0.0
    finally:
        orch.close()


class SleepsRecorded:
    """In place of an orchestrator's stop event: records each sleep instead of sleeping, and is set after ``n``."""

    def __init__(self, n: int) -> None:
        self.sleeps: list[float] = []
        self.n = n

    def is_set(self) -> bool:
        return len(self.sleeps) >= self.n

    def wait(self, seconds: float) -> bool:
        self.sleeps.append(round(seconds, 6))
        return self.is_set()


def test_R14_an_idle_orchestrator_probes_ever_less_often_up_to_idle_max_ms(world, database):
    """Nothing due and nothing waiting: the sleep between probes starts at idle_probe_ms and doubles up to
    idle_max_ms. Each call starts over from idle_probe_ms (the loop calls it again after the work it found)."""
    orch = Orchestrator(database, idle_probe_ms=20, idle_max_ms=200)
    try:
        assert orch.probe()[1] is None
        orch._stop = SleepsRecorded(7)  # type: ignore[assignment]
        orch.wait_for_work()
        assert orch._stop.sleeps == [0.02, 0.04, 0.08, 0.16, 0.2, 0.2, 0.2]
        orch._stop = SleepsRecorded(2)  # type: ignore[assignment]
        orch.wait_for_work()
        assert orch._stop.sleeps == [0.02, 0.04]
    finally:
        orch.close()


def test_R14_an_idle_orchestrator_never_sleeps_past_the_next_due_time_its_probe_sees(world, database):
    """A timer due in a second, with a longest sleep of four: the sleeps double up to the time left and stop
    there; once it is due the probe returns at once, without a sleep."""
    world.publish({"name": "t", "steps": [{"key": "a", "type": "TIMER", "delay_ms": 1000}]})
    world.start("t", key="k")
    orch = Orchestrator(database, idle_probe_ms=20, idle_max_ms=4000)
    try:
        orch._stop = SleepsRecorded(8)  # type: ignore[assignment]
        orch.wait_for_work()
        sleeps = orch._stop.sleeps
        assert sleeps[:6] == [0.02, 0.04, 0.08, 0.16, 0.32, 0.64]
        assert all(0.5 < s <= 1.0 for s in sleeps[6:]), sleeps  # the time left (the clock runs while it probes)
        world.db.advance(1000)
        orch._stop = SleepsRecorded(1)  # type: ignore[assignment]
        orch.wait_for_work()
        assert orch._stop.sleeps == []
    finally:
        orch.close()


def test_R12_a_batch_that_fails_whole_is_not_scanned_again_at_once(world, orch, database):
    """A lease recovery that fails (here the task no longer says it runs the attempt: INVALID_STATE, left for an
    operator) is not booked, so its candidate stays due. The loop used to scan it again at once, fail it again and
    go on as fast as the database answered; it now waits after a batch that failed whole, longer each time."""
    world.publish({"name": "job", "steps": [{"key": "work", "type": "TASK", "queue": "payments",
                                             "handler": "example.echo", "handler_version": "1",
                                             "task_timeout_ms": 3_600_000}]})
    world.start("job", key="j")
    orch.drain()
    claimed, = pulse.task_claim(world.db.conn, "w", "payments", limit=1, lease_ms=1_000)
    task = int(claimed["task_id"].removeprefix("tsk_"))
    world.db.execute("UPDATE pulse_tasks SET attempts_used = attempts_used + 1 WHERE id = %s", task)
    world.db.advance(1_001)  # the lease ran out
    loop = CountingScans(database, concurrency=1, spread=False)
    try:
        loop._stop = SleepsRecorded(4)  # type: ignore[assignment]
        loop.run(until=lambda: loop.scans >= 50)
        assert loop._stop.sleeps == [0.1, 0.2, 0.4, 0.8] and loop.scans == 4
        assert loop.stats["LEASE:FAILED"] == 4
    finally:
        loop.close()
        world.db.execute("UPDATE pulse_tasks SET attempts_used = attempts_used - 1 WHERE id = %s", task)
        orch.drain()  # the lease recovered as it should be: the task UNKNOWN, its step in review


def test_R12_R13_a_batch_whose_candidates_wait_for_a_failing_earlier_fact_is_not_scanned_again_at_once(
        world, orch, database):
    """A timer of another step that fell due after that failing lease waits for it (EARLIER_FIRST, changing
    nothing): a batch of a failure and a wait decided nothing, and is not scanned again at once either."""
    world.publish({"name": "job", "steps": [
        {"key": "work", "type": "TASK", "queue": "payments", "handler": "example.echo", "handler_version": "1",
         "task_timeout_ms": 3_600_000},
        {"key": "cool", "type": "TIMER", "delay_ms": 2_000}]})
    world.start("job", key="j")
    orch.drain()
    claimed, = pulse.task_claim(world.db.conn, "w", "payments", limit=1, lease_ms=1_000)
    task = int(claimed["task_id"].removeprefix("tsk_"))
    world.db.execute("UPDATE pulse_tasks SET attempts_used = attempts_used + 1 WHERE id = %s", task)
    world.db.advance(2_001)  # the lease ran out at 1 s, the timer fell due at 2 s
    loop = CountingScans(database, concurrency=1, spread=False)
    try:
        loop._stop = SleepsRecorded(4)  # type: ignore[assignment]
        loop.run(until=lambda: loop.scans >= 50)
        assert loop._stop.sleeps == [0.1, 0.2, 0.4, 0.8] and loop.scans == 4
        assert loop.stats["LEASE:FAILED"] == 4 and loop.stats["CHECKPOINT:EARLIER_FIRST"] == 4
    finally:
        loop.close()
        world.db.execute("UPDATE pulse_tasks SET attempts_used = attempts_used - 1 WHERE id = %s", task)
        orch.drain()


def test_R12_an_advance_that_loses_the_database_leaves_the_rest_of_its_batch(world, database):
    """The database stops answering between the scan and the advances (the proxy in front of it dies: every connect
    is refused). The first call fails after its retries; the batch's other candidates are left due for the next
    scan, instead of each going through the same retries (with a hung server, a connect timeout each) before the
    loop sees that the database is away."""
    from tests.support.proxy import Proxy

    world.publish({"name": "t", "steps": [{"key": "a", "type": "TIMER", "delay_ms": 1000}]})
    for i in range(12):
        world.start("t", key=f"k{i}")
    world.db.advance(1_001)
    proxy = Proxy(database.host, database.port)

    class DiesAfterScan(Orchestrator):
        def scan(self, size: int | None = None) -> ScanResult:
            result = super().scan(size)
            proxy.kill()
            return result

    loop = DiesAfterScan(database.single("127.0.0.1", proxy.port), concurrency=1, spread=False)
    try:
        result = loop.run_once()
        assert len(result.candidates) == 12 and result.again
        assert loop._undecided() == 0 and not [k for k in loop.stats if k.startswith("CHECKPOINT:")], loop.stats
    finally:
        loop.close()
    assert world.db.scalar("SELECT COUNT(*) FROM weave_pending_advances WHERE kind = 'TIMER'") == 12  # still due


def test_R14_a_scan_whose_connection_hangs_gives_up_within_its_own_timeout_and_says_so(world, database, caplog,
                                                                                       monkeypatch):
    """A half-open connection (the network lost the scan's answer and never said so) held the whole loop for the
    DSN's read timeout, 120 s by default, without a log line, while every due timer waited. The scan and the probe
    read on a connection of their own that answers within SCAN_TIMEOUT_S, and each failure is said as it is tried
    again: here the answers stop until the scan has given up, and the timer settles as soon as a new connection asks."""
    from orchestrator import loop as loopmod
    from tests.support.proxy import Proxy

    monkeypatch.setattr(loopmod, "SCAN_TIMEOUT_S", 1.0)
    caplog.set_level(logging.WARNING, logger="weave.orchestrator")
    world.publish({"name": "t", "steps": [{"key": "a", "type": "TIMER", "delay_ms": 1000}]})
    wf = world.start("t")
    proxy = Proxy(database.host, database.port)
    orch = Orchestrator(database.single("127.0.0.1", proxy.port), concurrency=1, spread=False)
    try:
        orch.check_level()  # the loop's connection, open
        world.db.advance(1_001)
        proxy.hang(answers_only=True)  # the next answer on an open connection is lost; the statement still runs

        def resume_once_given_up() -> None:  # the network answers again once the scan has given the answer up
            assert wait_for(lambda: "scan failed; trying again" in caplog.text)
            proxy.resume()

        resumer = threading.Thread(target=resume_once_given_up)
        resumer.start()
        result = orch.scan()
        resumer.join()
        assert [c.klass for c in result.candidates] == ["CHECKPOINT"]
        assert "scan failed; trying again" in caplog.text
        orch.drain()
    finally:
        orch.close()
        proxy.kill()
    assert world.instance(wf)["status"] == "SUCCEEDED"


def test_R16_a_loop_that_meets_its_routines_being_installed_again_books_no_failure_and_holds(world, database,
                                                                                              caplog):
    """`weave migrate` installs a routine again by dropping and creating it. An advance made in between failed with
    "does not exist" (1305), booked against its candidates as their own failure (R-12: enough of them, and the
    instance goes to review as CANDIDATE_FAILING), and a scan that met it ended the orchestrator. Neither is the
    candidates' failure: the loop books nothing, holds until the database is at its level again, and goes on."""
    from procedures import installer

    caplog.set_level(logging.INFO, logger="weave.orchestrator")
    world.publish({"name": "t", "steps": [{"key": "a", "type": "TIMER", "delay_ms": 1000}]})
    wfs = [world.start("t", key=f"k{i}") for i in range(3)]
    world.db.advance(1_001)
    for routine in ("weave_candidates_advance", "weave_checkpoint_advance"):  # dropped, not yet created again
        world.db.execute(f"DROP PROCEDURE {routine}")
    loop = Orchestrator(database, concurrency=1, spread=False)
    try:
        result = loop.run_once()
        assert len(result.candidates) == 3 and result.stalled
        assert world.db.rows("SELECT attempts, last_error FROM weave_pending_advances WHERE kind = 'TIMER'") == [
            {"attempts": 0, "last_error": None}] * 3
        world.db.execute("DROP PROCEDURE weave_scan")
        thread = threading.Thread(target=loop.run)
        thread.start()
        try:
            assert wait_for(lambda: "holding until it is" in caplog.text)
            installer.migrate(database, test_clock=True)  # the migrate's CREATEs
            assert wait_for(lambda: all(world.instance(wf)["status"] == "SUCCEEDED" for wf in wfs))
            assert "the database is at this build's level again: going on" in caplog.text
        finally:
            loop.stop()
            thread.join(30)
    finally:
        loop.close()
        installer.migrate(database, test_clock=True)


ADVANCERS = ("weave_candidates_advance", "weave_checkpoint_advance")


def install_faulty_advancers(world) -> None:
    """The checkpoints' advancers as a faulty build would have them: each fails on a column that does not exist."""
    for routine in ADVANCERS:
        world.db.execute(f"DROP PROCEDURE {routine}")
        world.db.execute(f"CREATE PROCEDURE {routine}(IN a VARCHAR(16), IN b LONGTEXT) "
                         "SELECT no_such_column FROM weave_instances" if routine == "weave_candidates_advance" else
                         f"CREATE PROCEDURE {routine}(IN a BIGINT UNSIGNED) SELECT no_such_column FROM weave_instances")


def reinstall_advancers(database) -> list[str]:
    """The build's own advancers again: a migrate installs a routine replaced by hand over it. The routines it
    installed."""
    from procedures import installer

    return installer.migrate(database, test_clock=True).routines_installed


def test_R12_a_routine_that_lacks_a_column_at_this_builds_own_level_is_the_candidates_failure(world, database, caplog):
    """A failure that reads like another level's (a column missing, 1054) on a database at this build's own level is
    a routine's own fault: it is booked against the candidate as any failure is (R-12), so that enough of them send
    the instance to review, not taken for a migrate under way and retried for ever."""
    world.publish({"name": "t", "steps": [{"key": "a", "type": "TIMER", "delay_ms": 1000}]})
    world.start("t", key="k")
    world.db.advance(1_001)
    install_faulty_advancers(world)
    loop = Orchestrator(database, concurrency=1, spread=False)
    try:
        loop.run_once()
        assert world.db.rows("SELECT attempts FROM weave_pending_advances WHERE kind = 'TIMER'") == [{"attempts": 1}]
        # A loop that met such a failure outside an advance (its scan) finds nothing to hold for: it says so, as an
        # error, and goes on (here at once: the stop is asked already).
        stop = threading.Event()
        stop.set()
        assert not hold_until_level(loop.check_level, stop, "orchestrator", errors.SchemaMismatch("SCHEMA_MISMATCH: x"))
        assert "a routine failed on the database at this build's own level" in caplog.text
        assert "holding until it is" not in caplog.text
    finally:
        loop.close()
        reinstall_advancers(database)


def test_C4_R18_a_fault_that_failed_the_root_walk_is_fixed_then_retried_and_the_instance_goes_on(world, database):
    """A faulty build's routines fail the ROOT walk a resume made due, the same way on every look: the loop books each
    failure (R-12), and the third sends the instance to review with its own CANDIDATE_FAILING, which names no step (no
    step's action can close it). The fault fixed (the routines installed again), an operator's retry makes the walk
    due at once; the loop makes it, and the instance goes on to its end."""
    from procedures import routines
    from tests.sql.test_control import pause, resume

    world.publish({"name": "t", "steps": [{"key": "a", "type": "TIMER", "delay_ms": 60_000}]})
    wf = world.start("t", key="k")
    pause(world, wf)
    resume(world, wf)  # the ROOT walk due at once
    install_faulty_advancers(world)
    loop = Orchestrator(database, concurrency=1, spread=False)
    try:
        for _ in range(3):
            loop.run_once()
            world.db.advance(1_000)  # past the failure's backoff; the timer is not due yet
        inst = world.instance(wf)
        assert inst["status"] == "NEEDS_REVIEW" and inst["gate"] == "CLOSED"
        (reason,) = inst["review_reasons"]
        assert (reason["code"], reason["step_key"]) == ("CANDIDATE_FAILING", None)
        assert "no_such_column" in reason["detail"]["detail"]
        assert sorted(reinstall_advancers(database)) == sorted(ADVANCERS)  # the fault fixed
        retried = routines.instance_retry(world.db.conn, world.token, "acme", wf, "routines installed again", "t1")
        assert (retried["closed"], retried["retried"], retried["status"]) == (1, 1, "RUNNING")
        loop.drain()  # the walk, at once
        assert world.db.rows("SELECT kind, attempts FROM weave_pending_advances") == [{"kind": "TIMER", "attempts": 0}]
        world.db.advance(60_000)
        loop.drain()
    finally:
        loop.close()
        reinstall_advancers(database)
    assert world.instance(wf)["status"] == "SUCCEEDED"


def test_R12_an_outage_s_lines_name_the_node_and_its_end_is_said_too(world, database, caplog):
    """An SRE test found the scan's failure lines named no node (with several orchestrators under one journal, which
    one failed?) and nothing said when the database answered again, so an outage's end was found only by the lines
    stopping. Each line names the node, and the first scan that succeeds after failures says how many and how
    long."""
    from tests.support.proxy import Proxy

    caplog.set_level(logging.INFO, logger="weave.orchestrator")
    proxy = Proxy(database.host, database.port)
    port = proxy.port
    loop = Orchestrator(database.single("127.0.0.1", port), concurrency=1, spread=False, node_id="orch-7")
    thread = threading.Thread(target=loop.run)
    thread.start()
    try:
        proxy.kill()  # every connect refused: the scans fail
        assert wait_for(lambda: "scan failed; retrying" in caplog.text or "probe failed; retrying" in caplog.text)
        proxy = Proxy(database.host, database.port, listen_port=port)  # the database is back
        assert wait_for(lambda: "the database answers again" in caplog.text)
        failed = [r for r in caplog.records if r.getMessage().endswith("failed; retrying")]
        back = [r for r in caplog.records if r.getMessage() == "the database answers again"]
        assert failed and all(r.fields["node"] == "orch-7" for r in failed)
        assert back[0].fields["node"] == "orch-7" and back[0].fields["failed"] >= 1
    finally:
        loop.stop()
        thread.join(30)
        loop.close()
        proxy.kill()


def test_R14_a_stop_signal_that_comes_while_the_loop_holds_its_stop_event_still_stops_it(database):
    """A signal handler runs in the main thread between two bytecodes, possibly while that thread holds the lock of
    the stop event it waits on (entering or leaving Event.wait). The handler used to set the event itself, and
    waited there for the lock its own thread held: the process never stopped (seen once in the crash runs, an
    orchestrator that did not stop within 15 s of SIGTERM). Here a thread holds the event's lock and runs the
    handler, as the main thread would."""
    from orchestrator.daemon import stop_on_signal

    orch = Orchestrator(database)
    handler = stop_on_signal(orch)
    try:
        def interrupted_inside_wait() -> None:
            with orch.stopping._cond:  # type: ignore[attr-defined]  # the lock Event.wait holds around its wait
                handler(15, None)

        signalled = threading.Thread(target=interrupted_inside_wait, daemon=True)
        signalled.start()
        signalled.join(5)
        assert not signalled.is_alive(), "the handler waited for a lock its own thread holds"
        assert orch.stopping.wait(5)
    finally:
        orch.close()


def test_R14_stop_finishes_the_current_candidate_and_exits(world, database):
    world.publish({"name": "t", "steps": [{"key": "a", "type": "TIMER", "delay_ms": 1000}]})
    wf = world.start("t")
    world.db.advance(1_001)
    orch = Orchestrator(database, concurrency=1, idle_probe_ms=5)
    thread = threading.Thread(target=orch.run)
    thread.start()
    from tests.support.waiting import wait_for

    assert wait_for(lambda: world.instance(wf)["status"] == "SUCCEEDED", timeout=10)
    orch.stop()
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert orch.stats["CHECKPOINT:SETTLED"] == 1


class StaleScan(Orchestrator):
    """An orchestrator whose next scan answers ``stale``: the batch another node saw before it advanced it."""

    stale: ScanResult | None = None

    def scan(self, size: int | None = None) -> ScanResult:
        self.sizes.append(size or self.batch)
        result, self.stale = self.stale or super().scan(size), None
        return result

    def __post_init__(self) -> None:
        super().__post_init__()
        self.sizes: list[int] = []  # the size each scan asked for


def test_R13_a_node_overtaken_on_its_batch_stops_after_one_list_and_scans_again(world, database, orch):
    world.publish({"name": "t", "steps": [{"key": "a", "type": "TIMER", "delay_ms": 1000}]})
    for i in range(30):
        world.start("t", key=f"k{i}")
    world.db.advance(1_001)
    late = StaleScan(database, concurrency=1, spread=False, chunk=10)
    try:
        late.stale = late.scan()
        assert [c.klass for c in late.stale.candidates] == ["CHECKPOINT"] * 30
        orch.drain()  # the other node settles all 30 timers before the late one gets to them
        assert orch.stats["CHECKPOINT:SETTLED"] == 30
        late.run_once()
        # The first list of 10 comes back taken; the other 20 are left to the next scan instead of each being
        # re-verified, and that scan finds nothing due.
        assert late.stats["CHECKPOINT:GONE"] == 10, late.stats
        assert late.stats["overtaken"] == 1 and sum(late.stats.values()) == 11
        assert late.run_once().candidates == []
    finally:
        late.close()


@contextlib.contextmanager
def overtaken(world, database, timers: int) -> Iterator[tuple[Orchestrator, StaleScan]]:
    """``timers`` one-step timers due, and two nodes of batch 10 that scanned the same earliest ten: the one ahead
    settles them first, then the late one finds its batch taken (GONE) and is overtaken."""
    world.publish({"name": "t", "steps": [{"key": "a", "type": "TIMER", "delay_ms": 1000}]})
    for i in range(timers):
        world.start("t", key=f"k{i}")
    world.db.advance(1_001)
    ahead = Orchestrator(database, batch=10, concurrency=1, spread=False, chunk=10)
    late = StaleScan(database, batch=10, concurrency=1, chunk=10)
    try:
        late.stale = late.scan()
        ahead.run_once()  # the other node settles the same ten first
        late.run_once()
        assert late.stats["overtaken"] == 1 and late.stats["CHECKPOINT:GONE"] == 10
        yield ahead, late
    finally:
        ahead.close()
        late.close()


def test_R13_a_node_overtaken_looks_further_ahead_and_takes_one_batch_of_it(world, database):
    """Two nodes scan the same earliest candidates; the one that finds its batch taken by the other reads four
    batches ahead on its next scan and takes one of the three after the earliest at random, so that the two part
    ways. A node that is not overtaken scans one batch, earliest first."""
    with overtaken(world, database, 60) as (_, late):
        earliest = {c.id for c in late.scan().candidates}
        late.run_once()  # looks 40 ahead (50 are due), settles one batch of them, not the earliest
        assert late.sizes[-1] == 40 and late.stats["CHECKPOINT:SETTLED"] == 10, late.stats
        assert {c.id for c in late.scan().candidates} == earliest  # the earliest batch is left to the other node
        late.run_once()  # not overtaken: one batch again
        assert late.sizes[-1] == 10 and late.stats["CHECKPOINT:SETTLED"] == 20


def test_R13_a_node_that_looked_ahead_scans_again_for_the_blocks_it_left(world, database):
    """A node that looked ahead takes one later block of a scan that was not full and leaves the rest, the
    earliest batch included, to the node that overtook it. Those candidates are still due as far as it knows: if
    the other node stopped meanwhile, only another scan finds them, so the batch says to scan again, and a drain
    (which stops when nothing may be due) settles every one."""
    with overtaken(world, database, 35) as (ahead, late):  # the node ahead stops after its ten
        result = late.run_once()  # looks 40 ahead, 25 are due: not full, takes one later block of them
        assert late.sizes[-1] == 40 and not result.full and len(result.candidates) == 25
        assert 5 <= late.stats["CHECKPOINT:SETTLED"] <= 10, late.stats
        assert result.again, "due candidates were left to a node that is not there"
        late.drain()
        assert ahead.stats["CHECKPOINT:SETTLED"] + late.stats["CHECKPOINT:SETTLED"] == 35, late.stats
        assert world.db.scalar("SELECT COUNT(*) FROM weave_pending_advances") == 0


class CountingScans(Orchestrator):
    scans = 0

    def scan(self, size: int | None = None) -> ScanResult:
        self.scans += 1
        return super().scan(size)


def test_R14_the_loop_scans_again_at_once_only_when_an_advance_made_something_due(world, database):
    """A ROOT advance that creates a task makes nothing due for the loop (the task is a worker's): the batch says
    so and the loop goes to its probe instead of a scan that would find nothing. A timer, due later, is seen by
    the probe, and its settlement is found by the scan once it is due."""
    world.publish({"name": "pay", "steps": [{"key": "charge", "type": "TASK", "queue": "payments",
                                             "handler": "example.echo", "handler_version": "1"}]})
    world.db.execute("UPDATE weave_apps SET status = 'DISABLED'")  # the start leaves its task to ROOT ...
    world.start("pay", key="p")
    world.db.execute("UPDATE weave_apps SET status = 'ACTIVE'")
    world.publish({"name": "t", "steps": [{"key": "a", "type": "TIMER", "delay_ms": 5000}]})
    wf = world.start("t", key="k")
    world.db.advance(1000)  # ... due again a second later
    orch = CountingScans(database, concurrency=1, spread=False)
    try:
        result = orch.run_once()
        assert [c.klass for c in result.candidates] == ["CHECKPOINT"] and result.again is False
        orch.drain()
        assert orch.scans == 2 and orch.stats["CHECKPOINT:ACTIVATED"] == 1  # drain's one scan found nothing due
        assert orch.probe()[1] is not None  # the timer, due later: the probe sees it
        world.db.advance(4001)
        assert orch.run_once().candidates and world.instance(wf)["status"] == "SUCCEEDED"
    finally:
        orch.close()



def test_R14_a_signal_candidate_says_whether_its_decision_made_something_due(world, database):
    """A signal accepted inside a caller's transaction is consumed as a SIGNAL candidate. When that settles the
    instance's last step nothing is due after it, and the advancer says so (made_due 0), so the loop probes
    instead of scanning again; a candidate that could not be decided (BUSY) still counts as maybe due."""
    from procedures import signals
    from tests.support.signals import signal_flow

    world.publish(signal_flow("last"))
    wf = world.start("last", {"order_id": "o-1"}, key="k-1")
    orch = Orchestrator(database, concurrency=1, spread=False)
    try:
        orch.drain()
        outer = world.db.connect()
        outer.begin()
        receipt = signals.send_in_tx(outer, world.token, world.namespace, wf, idempotency_key="i-1",
                                     name="approval.decided", payload_version="1", target_step_key="approval",
                                     target_activation_sequence=1, correlation_key="o-1", payload='{"ok": true}',
                                     reason="approved", evidence_ref=None)
        outer.commit()
        outer.close()
        signal = int(receipt["signal_id"].removeprefix("sig_"))
        blocker = world.db.connect()
        blocker.begin()
        with blocker.cursor() as cur:
            cur.execute("SELECT id FROM weave_instances WHERE id = %s FOR UPDATE", (world.internal_id(wf),))
        assert orch._advance(Candidate("SIGNAL", signal, 1, None)) == ("BUSY", True)
        blocker.rollback()
        blocker.close()
        assert orch._advance(Candidate("SIGNAL", signal, 1, None)) == ("CONSUMED", False)
        assert world.instance(wf)["status"] == "SUCCEEDED"
    finally:
        orch.close()


def test_R14_an_advance_that_leaves_its_root_due_makes_the_loop_scan_again_at_once(world, database):
    """70 ready steps are activated 32 per transaction (R-7): the start activates 32 and leaves ROOT due; the first
    ROOT advance activates 32 more and answers MORE and made_due, so the batch asks for another scan, which finds
    the ROOT advance again; that one activates the last 6 and makes nothing due now."""
    world.publish({"name": "fan-out", "steps": [{"key": f"t{i:02d}", "type": "TIMER", "delay_ms": 1000}
                                                for i in range(70)]})
    world.start("fan-out")
    orch = CountingScans(database, concurrency=1, spread=False)
    try:
        first = orch.run_once()
        assert orch.stats["CHECKPOINT:MORE"] == 1 and first.again is True
        second = orch.run_once()
        assert orch.stats["CHECKPOINT:ACTIVATED"] == 1 and second.again is False
        assert orch.scans == 2
    finally:
        orch.close()


def test_R18_a_candidate_skipped_for_long_because_its_instance_is_held_is_named_in_a_warning(world, database,
                                                                                             monkeypatch, caplog):
    """Decisions hold an instance for milliseconds; one held for long (a forgotten interactive transaction) only
    made the due lag grow, with no candidate failing and nothing logged. After BUSY_WARN_S of being skipped, the
    candidate and its instance are named once; decided at last, it is forgotten."""
    import logging

    from orchestrator import loop

    monkeypatch.setattr(loop, "BUSY_WARN_S", 0.0)
    world.publish({"name": "wait", "steps": [{"key": "t", "type": "TIMER", "delay_ms": 1_000}]})
    wf = world.start("wait", key="k-1")
    world.db.advance(1_001)
    orch = Orchestrator(database, concurrency=1, spread=False)
    try:
        with world.held(wf), caplog.at_level(logging.WARNING, logger="weave.orchestrator"):
            orch.run_once()
            orch.run_once()  # skipped again: named once
            assert orch.stats["CHECKPOINT:BUSY"] == 2
        named = [r for r in caplog.records if "held by another transaction" in r.getMessage()]
        assert [(r.fields["class"], r.fields["workflow_id"]) for r in named] == [("CHECKPOINT", wf)]
        orch.drain()
        assert world.instance(wf)["status"] == "SUCCEEDED" and orch._busy_since == {}
    finally:
        orch.close()


def test_R18_two_races_lost_a_while_apart_are_no_hold(database, monkeypatch, caplog):
    """BUSY is also how a node loses a race to another node. A checkpoint is kept and moved (its version raised) when
    another node decides it: skipped at one version and, later, at another, it was not held all that time."""
    import logging
    from types import SimpleNamespace

    from orchestrator import loop

    clock = [100.0]
    monkeypatch.setattr(loop, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    orch = Orchestrator(database, concurrency=1, spread=False)
    try:
        with caplog.at_level(logging.WARNING, logger="weave.orchestrator"):
            orch._note_busy(Candidate("CHECKPOINT", 1, 7, None), "BUSY")
            clock[0] += 30
            orch._note_busy(Candidate("CHECKPOINT", 1, 9, None), "BUSY")  # another node decided it in between
            assert not [r for r in caplog.records if "held by another" in r.getMessage()]
            clock[0] += loop.BUSY_WARN_S
            orch._note_busy(Candidate("SIGNAL", 2, 1, None), "BUSY")
            orch._note_busy(Candidate("CHECKPOINT", 1, 9, None), "BUSY")  # at one version for BUSY_WARN_S: held
        held, = [r for r in caplog.records if "held by another" in r.getMessage()]
        assert (held.fields["id"], held.fields["held_s"]) == (1, round(loop.BUSY_WARN_S))
    finally:
        orch.close()



def test_R4_each_decision_is_a_debug_line_naming_its_candidate_and_outcome(world, orch, caplog):
    """An operator following a decision in question had nothing of it in the orchestrator's log but failures: at
    DEBUG, each decision is a line with its class, candidate, outcome and time (its effect is in the events)."""
    world.publish({"name": "cool-off", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 1_000}]})
    started = [world.start("cool-off") for _ in range(3)]
    world.db.advance(1_001)
    with caplog.at_level(logging.DEBUG, logger="weave.orchestrator"):
        orch.drain()
    decided = [r.fields for r in caplog.records if r.getMessage() == "decided"]
    assert sorted((d["class"], d["outcome"]) for d in decided) == [("CHECKPOINT", "SETTLED")] * 3, decided
    assert all(set(d) == {"node", "class", "id", "outcome", "ms"} for d in decided), decided
    assert [world.instance(wf)["status"] for wf in started] == ["SUCCEEDED"] * 3
