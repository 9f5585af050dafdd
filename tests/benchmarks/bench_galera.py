"""What spreading writes over a Galera cluster costs, measured side by side in one run on a private 3-node
cluster (tests/support/galera.py): the same work with every process writing to one node (the default
``failover=stable`` DSN) and with writes spread over the three nodes (each client prefers its own node).

- timer storm: N timers due at once, settled by two orchestrator processes;
- signal acceptance: M signals sent through ``CALL weave_signal_send`` from six client threads;
- quota: instances whose tasks an app quota of 3 bounds, activated by two orchestrators and no worker, so
  that every task created stays QUEUED: more than 3 is a quota overrun. A test-only trigger holds each task
  insert 100 ms after its room check, so that creations overlap as on a busy server.

Each prints one JSON line with throughput, certification failures and brute-force aborts (summed over the
nodes) and, for the quota, the overrun. Run: python -m tests.benchmarks.bench_galera [--timers 1000]
[--signals 600] [--quota-instances 120]
"""

from __future__ import annotations

import argparse
import threading
import time
from pathlib import Path

from procedures import db as dbmod
from procedures import installer, invariants, signals
from tests.benchmarks.common import figure, process_logs
from tests.support.db import Db, reset
from tests.support.galera import GaleraCluster
from tests.support.load import start_many
from tests.support.processes import WeaveProcess
from tests.support.waiting import wait_for
from tests.support.world import World

COUNTERS = ("wsrep_local_cert_failures", "wsrep_local_bf_aborts")
LAYOUTS = ("one-writer", "spread")


def conflict_counters(cluster: GaleraCluster) -> int:
    total = 0
    for node in cluster.nodes:
        status = node.status()
        total += sum(int(status.get(name, 0)) for name in COUNTERS)
    return total


def client_dsn(cluster: GaleraCluster, layout: str, i: int) -> dbmod.Dsn:
    if layout == "one-writer":
        return cluster.dsn("weave_bench_galera")
    order = [(i + k) % cluster.size for k in range(cluster.size)]
    return cluster.dsn("weave_bench_galera", order=order, failover="sequential")


def fresh_world(cluster: GaleraCluster, quota: int = 1_000_000) -> World:
    handle = Db(cluster.dsn("weave_bench_galera"))
    reset(handle.conn)
    return World.create(handle, quota=quota, capacity=1_000_000)


def orchestrators(cluster: GaleraCluster, layout: str, logs: Path, name: str) -> list[WeaveProcess]:
    return [WeaveProcess(client_dsn(cluster, layout, i), "orchestrator", "--concurrency", "4",
                         log=logs / f"{name}-{layout}-{i}.log") for i in range(2)]


def stop(procs: list[WeaveProcess]) -> None:
    for p in procs:
        p.terminate()
        p.close()


def timer_storm(cluster: GaleraCluster, layout: str, timers: int, logs: Path) -> dict:
    world = fresh_world(cluster)
    world.publish({"name": "storm", "steps": [{"key": "t", "type": "TIMER", "delay_ms": 60_000}]})
    start_many(world, "storm", timers, threads=4)
    procs = orchestrators(cluster, layout, logs, "storm")
    try:
        assert wait_for(lambda: world.db.scalar("SELECT COUNT(*) FROM weave_waits") == timers, timeout=300)
        before = conflict_counters(cluster)
        began = time.monotonic()
        world.db.advance(120_000)
        assert wait_for(lambda: world.db.scalar("SELECT COUNT(*) FROM weave_waits WHERE status = 'SATISFIED'")
                        == timers, timeout=600, interval=0.1)
        seconds = time.monotonic() - began
        conflicts = conflict_counters(cluster) - before
    finally:
        stop(procs)
    failed = sum((logs / f"storm-{layout}-{i}.log").read_text().count('"advance failed"') for i in range(2))
    invariants.check(world.db.conn)
    world.db.close()
    return {"timers": timers, "settled_per_s": round(timers / seconds, 1), "conflicts": conflicts,
            "advances_failed_after_retries": failed}


def signal_acceptance(cluster: GaleraCluster, layout: str, count: int, threads: int = 6) -> dict:
    world = fresh_world(cluster)
    world.publish({"name": "wait", "steps": [{"key": "approval", "type": "SIGNAL", "correlation": "$.input.id",
                                              "signal": {"name": "ok", "payload_version": "1",
                                                         "payload_type": "any"},
                                              "timeout_ms": 3_600_000}]})
    ids = start_many(world, "wait", count, threads=4)
    before = conflict_counters(cluster)
    failures: list[BaseException] = []

    def sender(part: int) -> None:
        conn = dbmod.connect(client_dsn(cluster, layout, part))
        try:
            for n in range(part, count, threads):
                signals.send(conn, world.token, world.namespace, ids[n], idempotency_key=f"s-{n}", name="ok",
                             payload_version="1", target_step_key="approval", target_activation_sequence=1,
                             correlation_key=b"x", payload=b'{"ok": true}', reason="bench")
        except BaseException as exc:  # reported below
            failures.append(exc)
        finally:
            conn.close()

    began = time.monotonic()
    pool = [threading.Thread(target=sender, args=(p,)) for p in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    seconds = time.monotonic() - began
    if failures:
        raise failures[0]
    # Spread, the last sends committed on other nodes: certified, but maybe not yet applied on the one read here.
    # The read waits for this node to have applied every commit the cluster had certified when it started.
    world.db.execute("SET SESSION wsrep_sync_wait = 1")
    accepted = world.db.scalar("SELECT COUNT(*) FROM weave_signals")
    world.db.execute("SET SESSION wsrep_sync_wait = 0")
    assert accepted == count, (accepted, count)
    conflicts = conflict_counters(cluster) - before
    world.db.close()
    return {"signals": count, "threads": threads, "accepted_per_s": round(count / seconds, 1),
            "conflicts": conflicts}


def quota_bound(cluster: GaleraCluster, layout: str, instances: int, logs: Path, quota: int = 3,
                watch_s: float = 8, widen_ms: int = 100) -> dict:
    world = fresh_world(cluster, quota=quota)
    world.publish({"name": "work", "steps": [{"key": "t", "type": "TASK", "queue": "payments",
                                              "handler": "example.echo", "handler_version": "1", "input": {}}]})
    if widen_ms:
        # Test-only: hold each task insert a moment after its room check, as a busy server would, so that
        # two creations overlap often enough to show whether the quota check serialises them.
        world.db.execute(f"CREATE TRIGGER bench_widen BEFORE INSERT ON pulse_tasks FOR EACH ROW "
                         f"BEGIN DO SLEEP({widen_ms / 1000}); END")
    before = conflict_counters(cluster)
    procs = orchestrators(cluster, layout, logs, "quota")
    try:
        start_many(world, "work", instances, threads=4)
        # The quota fills at once; the other instances are deferred and re-checked with backoff. Watch the
        # orchestrators re-check them for a few seconds: each re-check is another chance to overrun.
        wait_for(lambda: world.db.scalar("SELECT COUNT(*) FROM pulse_tasks") >= quota, timeout=60)
        time.sleep(watch_s)
    finally:
        stop(procs)
    queued = world.db.scalar("SELECT COUNT(*) FROM pulse_tasks WHERE status = 'QUEUED'")
    conflicts = conflict_counters(cluster) - before
    world.db.close()
    return {"instances": instances, "quota": quota, "watched_s": watch_s, "insert_held_ms": widen_ms,
            "tasks_queued": queued,
            "quota_overrun": max(0, queued - quota), "conflicts": conflicts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--timers", type=int, default=1000)
    parser.add_argument("--signals", type=int, default=600)
    parser.add_argument("--quota-instances", type=int, default=120)
    args = parser.parse_args()
    cluster = GaleraCluster()
    try:
        with process_logs("galera") as logs:
            cluster.start()
            installer.migrate(cluster.dsn("weave_bench_galera"), test_clock=True)
            results: dict[str, dict[str, dict]] = {"timer storm": {}, "signal acceptance": {}, "quota": {}}
            for layout in LAYOUTS:
                results["timer storm"][layout] = timer_storm(cluster, layout, args.timers, logs)
                results["signal acceptance"][layout] = signal_acceptance(cluster, layout, args.signals)
                results["quota"][layout] = quota_bound(cluster, layout, args.quota_instances, logs)
            for name, by_layout in results.items():
                for layout, values in by_layout.items():
                    figure(f"galera {name}", layout=layout, **values)
            for name, key in (("timer storm", "settled_per_s"), ("signal acceptance", "accepted_per_s")):
                one, spread = results[name]["one-writer"][key], results[name]["spread"][key]
                figure(f"galera {name} ratio", spread_over_one_writer=round(spread / one, 2))
    finally:
        cluster.close()


if __name__ == "__main__":
    main()
