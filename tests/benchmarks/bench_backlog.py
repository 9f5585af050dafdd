"""Rows read against the backlog: one task claim and one POLL round start (which creates a task) with 10,
1,000 and 100,000 tasks already QUEUED in the queue. Both must stay flat: the claim stops after the rows it
takes (its index order is its ORDER BY), and room for a new task is read from the in-flight counters, not
counted from the task rows.

Then against the instance's own size: a settlement whose walk activates a full walk's worth of ready successors
(31) in a fan-out of 33 and of 256 steps (the most a definition has), with several instances of the definition in
the table. Which steps are ready is read from the instance's steps, through its key, once per walk: a walk's rows
grow with the steps of its own instance only, and an activation adds the same rows whatever that size.

A report in an instance with 200 tasks running side by side: the first report, with 199 others running, reads what
the last reads, with none (the facts that order the instance's decisions are read up to the decision's own time).

A POLL's next round against its own rounds so far, read by key (P-4): its rows stay flat from round 3 to round
3,000, and so do the instance read's, but for the key of each round it does not show.

And a join reading one field of each of many large outputs: its activation hands each output to the templates
once (the time of the report that activates it, with its statements and rows).

    python -m tests.benchmarks.bench_backlog [--backlogs 10,1000,100000] [--fan-outs 33,256] [--in-flight 200]
        [--poll-rounds 3,300,3000] [--joins 8,32]

Rows read are the session's Handler_read_* deltas (every index entry or row the storage engine handed up).
"""

from __future__ import annotations

import argparse
import json
import time

from procedures import db as dbmod
from procedures import pulse, routines
from tests.benchmarks.bench_scan import seq
from tests.benchmarks.common import check_invariants, figure, fresh_database, world_on
from tests.benchmarks.statements import POLL_FLOW, _checkpoint, counted

READS = "SHOW SESSION STATUS WHERE Variable_name LIKE 'Handler_read%%'"


def handler_reads(conn) -> int:
    with conn.cursor() as cur:
        cur.execute(READS)
        return sum(int(r["Value"]) for r in cur.fetchall())


def queue_backlog(world, rows: int) -> None:
    """``rows`` more QUEUED tasks in the world's queue, bulk-inserted, the counters moved with them."""
    db = world.db
    app = db.scalar("SELECT id FROM weave_apps WHERE name = %s", world.app)
    queue = db.scalar("SELECT id FROM weave_queues WHERE name = %s", world.queue)
    ns = db.scalar("SELECT namespace_id FROM weave_apps WHERE id = %s", app)
    db.execute(
        "INSERT INTO pulse_tasks (namespace_id, app_id, queue_id, instance_id, step_key, activation_id, handler, "
        "handler_version, input, priority, max_attempts, initial_backoff_ms, backoff_coefficient, max_backoff_ms, "
        "timeout_ms, deadline_at, status, attempts_used, available_at, created_at, updated_at) "
        f"SELECT {ns}, {app}, {queue}, 0, 'backlog', 0, 'example.echo', '1', '{{}}', 0, 3, 1000, 2, 60000, 30000, "
        "'2099-01-01', 'QUEUED', 0, '2000-01-01', '2000-01-01', '2000-01-01' FROM " + seq(rows))
    # The counters of the level measured: slots taken (level 9 on), in-flight counts (levels 3-8), none before.
    counter = db.scalar("SELECT MIN(COLUMN_NAME) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
                        "AND TABLE_NAME = 'weave_apps' AND COLUMN_NAME IN ('slots_taken', 'in_flight')")
    if counter:
        db.execute(f"UPDATE weave_apps SET {counter} = {counter} + %s WHERE id = %s", rows, app)
        db.execute(f"UPDATE weave_queues SET {counter} = {counter} + %s WHERE id = %s", rows, queue)
    db.execute("ANALYZE TABLE pulse_tasks")


def clear_backlog(world) -> None:
    """The bulk-inserted backlog gone again, the counters with it: its tasks serve no instance (M-4.13b)."""
    db = world.db
    counter = db.scalar("SELECT MIN(COLUMN_NAME) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
                        "AND TABLE_NAME = 'weave_apps' AND COLUMN_NAME IN ('slots_taken', 'in_flight')")
    rows = db.scalar("SELECT COUNT(*) FROM pulse_tasks WHERE instance_id = 0 AND step_key = 'backlog'")
    db.execute("DELETE FROM pulse_tasks WHERE instance_id = 0 AND step_key = 'backlog'")
    if counter:
        db.execute(f"UPDATE weave_apps SET {counter} = {counter} - %s WHERE name = %s", rows, world.app)
        db.execute(f"UPDATE weave_queues SET {counter} = {counter} - %s WHERE name = %s", rows, world.queue)


def measure(world) -> dict:
    db = world.db
    conn = db.conn
    # A POLL waiting between rounds, due now: its checkpoint creates round 2 (a new task).
    wf = world.start("count-poll", {"n": 1})
    inst = int(wf.removeprefix("wf_"))
    cp = db.scalar("SELECT id FROM weave_pending_advances WHERE instance_id = %s", inst)
    dbmod.call(conn, "weave_checkpoint_advance", cp)  # activation: round 1
    task = db.scalar("SELECT id FROM pulse_tasks WHERE instance_id = %s", inst)
    # Round 1 answers PENDING straight away (priority 0 like the backlog, so it is claimed by id, last).
    db.execute("UPDATE pulse_tasks SET priority = 1 WHERE id = %s", task)
    before = handler_reads(conn)
    claim = dbmod.call(conn, "pulse_task_claim", "w-bench", world.queue, None, 1, 30_000)[0][0]
    claim_reads = handler_reads(conn) - before
    assert claim["task_id"] == f"tsk_{task}", "the higher priority task is claimed first"
    dbmod.call(conn, "pulse_attempt_complete", claim["attempt_id"], "w-bench", '{"status": "PENDING"}')
    inbox = db.scalar("SELECT id FROM pulse_inbox WHERE task_id = %s", task)
    dbmod.call(conn, "weave_inbox_consume", inbox)
    db.advance(1001)
    cp = db.scalar("SELECT id FROM weave_pending_advances WHERE instance_id = %s", inst)
    before = handler_reads(conn)
    outcome = dbmod.call(conn, "weave_checkpoint_advance", cp)[0][0]["outcome"]
    create_reads = handler_reads(conn) - before
    assert outcome == "ROUND", outcome
    return {"claim_rows_read": claim_reads, "round_start_rows_read": create_reads}


def fan_out(world, steps: int, instances: int = 5) -> dict:
    """A fan-out of ``steps`` steps (one first, ``steps - 2`` after it, one joining them all): the settlement of the
    first, whose walk activates 31 successors, in the last of ``instances`` instances started one after another.
    Its statements and rows read per activation."""
    db = world.db
    name = f"fan-{steps}"
    world.publish({"name": name, "steps": [{"key": "first", "type": "TIMER", "delay_ms": 1000}] + [
        {"key": f"p{i}", "type": "TIMER", "delay_ms": 1000, "after": ["first"]} for i in range(steps - 2)] + [
        {"key": "join", "type": "TIMER", "delay_ms": 1000, "after": [f"p{i}" for i in range(steps - 2)]}]})
    for _ in range(instances):
        wf = world.start(name)
        db.advance(1001)
        cp = _checkpoint(db, wf, "first")
        with counted(db.conn) as n:
            outcome = dbmod.call(db.conn, "weave_checkpoint_advance", cp)[0][0]["outcome"]
        assert outcome == "SETTLED", outcome
    activated = db.scalar("SELECT COUNT(*) FROM weave_steps WHERE instance_id = %s AND status = 'ACTIVE'",
                          world.internal_id(wf))
    assert activated == 31, activated
    return {"statements_per_activation": round(n["statements"] / activated, 1),
            "rows_read_per_activation": round(n["rows_read"] / activated, 1)}


def tasks_in_flight(world, tasks: int) -> dict:
    """``tasks`` TASK steps running side by side beside an hour-long timer: the report of the first, with every other
    task running (each a lease and a task in flight, facts that order the instance's decisions, R-13), and of the
    last, with none. The instance's steps are the same for both: what they read apart is what the other work in
    flight costs a decision, which reads only the facts earlier than its own time."""
    db = world.db
    name = f"in-flight-{tasks}"
    routines.queue_put(db.conn, world.admin, world.namespace, name, 1_000_000)  # no other work in it
    world.publish({"name": name, "steps": [{"key": "hold", "type": "TIMER", "delay_ms": 3_600_000}] + [
        {"key": f"t{i}", "type": "TASK", "queue": name, "handler": "example.echo", "handler_version": "1"}
        for i in range(tasks)]})
    wf = world.start(name)
    while db.scalar("SELECT COUNT(*) FROM weave_steps WHERE instance_id = %s AND status = 'PENDING'",
                    world.internal_id(wf)):  # a walk activates 31 steps at most: ROOT goes on with the rest
        dbmod.call(db.conn, "weave_checkpoint_advance", _checkpoint(db, wf, ""))
    running = pulse.task_claim(db.conn, "bench", name, limit=tasks, lease_ms=3_600_000)
    assert len(running) == tasks
    reads = []
    for task in running:
        with counted(db.conn) as n:
            pulse.attempt_complete(db.conn, task["attempt_id"], "bench", {})
        reads.append(n)
    return {"first_report_statements": reads[0]["statements"], "first_report_rows_read": reads[0]["rows_read"],
            "last_report_statements": reads[-1]["statements"], "last_report_rows_read": reads[-1]["rows_read"]}


def long_poll(world, marks: list[int]) -> list[dict]:
    """One POLL answered PENDING round after round: the rows its next round's start reads (the P-4 check, by key)
    and the rows of the instance's read (the latest 50 rounds whole, the others by their key), as the rounds used
    reach each of ``marks``."""
    db = world.db
    routines.queue_put(db.conn, world.admin, world.namespace, "polls", 1_000_000)  # no other work in it
    world.publish({"name": "long-poll", "steps": [{
        "key": "check", "type": "POLL", "queue": "polls", "handler": "example.poll", "handler_version": "1",
        "interval_ms": 1, "max_rounds": 10_000, "timeout_ms": 86_400_000,
        "result": {"pending": ["PENDING"], "success": ["DONE"]}}]})
    wf = world.start("long-poll")
    found = []
    for rounds in range(1, max(marks) + 1):
        (task,) = pulse.task_claim(db.conn, "bench", "polls", limit=1)
        pulse.attempt_complete(db.conn, task["attempt_id"], "bench", {"status": "PENDING"})
        db.advance(2)
        cp = _checkpoint(db, wf, "check")
        with counted(db.conn) as n:
            outcome = dbmod.call(db.conn, "weave_checkpoint_advance", cp)[0][0]["outcome"]
        assert outcome == "ROUND", outcome
        if rounds in marks:
            with counted(db.conn) as shown:
                routines.instance_get(db.conn, world.token, world.namespace, wf)
            found.append({"rounds": rounds + 1, "round_start_statements": n["statements"],
                          "round_start_rows_read": n["rows_read"], "instance_read_rows": shown["rows_read"]})
    return found


def join_of_outputs(world, steps: int, size: int) -> dict:
    """A join whose input reads one small field of each of ``steps`` outputs of ``size`` bytes: the report of the
    last of them activates it (settled at the report). Each output is handed to the templates once, so the
    activation's time grows with the outputs' total size; it grew with its square when every binding looked its
    output up among all of them."""
    db = world.db
    name = f"join-{steps}"
    routines.queue_put(db.conn, world.admin, world.namespace, "joins", 1_000_000)  # no other work in it
    work = {"type": "TASK", "queue": "joins", "handler": "example.echo", "handler_version": "1"}
    world.publish({"name": name, "steps": [{"key": f"o{i}", **work} for i in range(steps)] + [
        {"key": "join", **work, "after": [f"o{i}" for i in range(steps)],
         "input": {f"v{i}": f"$.steps.o{i}.output.v" for i in range(steps)}}]})
    wf = world.start(name)
    while db.scalar("SELECT COUNT(*) FROM weave_steps WHERE instance_id = %s AND status = 'PENDING'",
                    world.internal_id(wf)) > 1:  # a walk activates 31 steps at most: ROOT goes on with the rest
        dbmod.call(db.conn, "weave_checkpoint_advance", _checkpoint(db, wf, ""))
    pad = "x" * size
    for _ in range(steps):
        (task,) = pulse.task_claim(db.conn, "bench", "joins", limit=1)
        i = int(task["step_key"].removeprefix("o"))
        started = time.perf_counter()
        with counted(db.conn) as n:
            pulse.attempt_complete(db.conn, task["attempt_id"], "bench", {"v": i, "pad": pad})
        took = time.perf_counter() - started
    frozen = db.scalar("SELECT input FROM pulse_tasks WHERE instance_id = %s AND step_key = 'join'",
                       world.internal_id(wf))
    assert json.loads(frozen) == {f"v{i}": i for i in range(steps)}, frozen
    (join,) = pulse.task_claim(db.conn, "bench", "joins", limit=1)  # the queue left empty for the next join
    pulse.attempt_complete(db.conn, join["attempt_id"], "bench", {})
    return {"report_activating_the_join_ms": round(took * 1000, 1), "statements": n["statements"],
            "rows_read": n["rows_read"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backlogs", default="10,1000,100000")
    parser.add_argument("--fan-outs", default="33,256", help="steps of each fan-out definition (33..256)")
    parser.add_argument("--in-flight", default="200", help="tasks running side by side in one instance")
    parser.add_argument("--poll-rounds", default="3,300,3000", help="rounds of one poll at which to measure")
    parser.add_argument("--joins", default="8,32", help="outputs a join reads, one field of each")
    parser.add_argument("--output-bytes", type=int, default=1_000_000, help="the size of each output it reads")
    args = parser.parse_args()
    dsn = fresh_database("weave_bench_backlog")
    world = world_on(dsn)
    world.publish(POLL_FLOW)
    have = 0
    for backlog in (int(b) for b in args.backlogs.split(",")):
        queue_backlog(world, backlog - have)
        have = backlog
        figure("rows read vs backlog", queued=backlog, **measure(world))
    clear_backlog(world)
    for steps in (int(s) for s in args.fan_outs.split(",")):
        figure("rows read vs the instance's steps", steps=steps, **fan_out(world, steps))
    for tasks in (int(t) for t in args.in_flight.split(",")):
        figure("rows read by a report vs the instance's other tasks running", tasks=tasks,
               **tasks_in_flight(world, tasks))
    for point in long_poll(world, [int(r) for r in args.poll_rounds.split(",")]):
        figure("rows read vs the poll's own rounds", **point)
    for steps in (int(s) for s in args.joins.split(",")):
        figure("a join reading a field of each of its predecessors' outputs", outputs=steps,
               output_bytes=args.output_bytes, **join_of_outputs(world, steps, args.output_bytes))
    check_invariants(dsn)


if __name__ == "__main__":
    main()
