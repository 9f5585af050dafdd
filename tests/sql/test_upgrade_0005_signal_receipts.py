"""R-17 upgrade test for migration 0005 (a signal's receipt stored without its signal_id): receipts stored whole
before it keep answering byte-identical replays (S-5) after it, and the level before it gets them back whole."""

from __future__ import annotations

from procedures import installer
from tests.support.db import roll_back_migration
from tests.support.signals import send, signal_flow


def _level(database, *, back: bool) -> list[str]:
    if back:
        roll_back_migration(database, "0005.signal-receipts")
        return []
    return installer.migrate(database, test_clock=True).migrations_applied


def test_R17_S5_migration_0005_keeps_every_receipt_byte_identical(world, orch, database):
    world.publish(signal_flow())
    waiting = world.start("approval-flow", {"order_id": "o-1"})
    settled = world.start("approval-flow", {"order_id": "o-2"})
    orch.drain()
    first = {"rejected": send(world, waiting, key="k-early", correlation_key="o-other"),
             "settled": send(world, settled, key="k-settle", correlation_key="o-2")}
    stored = {r["id"]: r["receipt"] for r in world.db.rows("SELECT id, receipt FROM weave_signals")}
    assert all(not receipt.startswith('{"signal_id"') for receipt in stored.values())

    _level(database, back=True)  # the level before 0005 stores every receipt whole, its signal_id first
    whole = {r["id"]: r["receipt"] for r in world.db.rows("SELECT id, receipt FROM weave_signals")}
    assert whole == {i: f'{{"signal_id": "sig_{i}", ' + receipt[1:] for i, receipt in stored.items()}
    assert sorted(whole.values()) == sorted(r["receipt_json"] for r in first.values())

    assert _level(database, back=False) == ["0005.signal-receipts"]
    assert {r["id"]: r["receipt"] for r in world.db.rows("SELECT id, receipt FROM weave_signals")} == stored
    # Replays answer the first receipts byte for byte, and the runtime goes on.
    assert send(world, waiting, key="k-early", correlation_key="o-other")["receipt_json"] == \
        first["rejected"]["receipt_json"]
    assert send(world, settled, key="k-settle", correlation_key="o-2")["receipt_json"] == \
        first["settled"]["receipt_json"]
    send(world, waiting, key="k-match", correlation_key="o-1")
    orch.drain()
    assert world.instance(waiting)["status"] == world.instance(settled)["status"] == "SUCCEEDED"
