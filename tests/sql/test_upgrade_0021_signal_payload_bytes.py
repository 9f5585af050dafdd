"""R-17 upgrade test for migration 0021 (a signal keeps its payload's size): a database with an instance's early
signals of large payloads, taken back to level 20 and migrated again, keeps every signal as it was; those accepted
before have no kept size and are measured as before, those accepted after keep theirs, and a page of them is cut at
8 MiB by both alike."""

from __future__ import annotations

import pytest

from procedures import installer, invariants, signals
from tests.support.db import roll_back_migration
from tests.support.signals import send, signal_flow

MIGRATION = "0021.signal-payload-bytes"
PAYLOAD = '{"pad": "' + "x" * (200 * 1024 - 10) + '"}'  # 200 KiB: 41 to a page of 8 MiB


def sent(world, wf: str, first: int, last: int) -> None:
    for n in range(first, last + 1):
        send(world, wf, f"big-{n}", payload=PAYLOAD)  # early: the step waits behind its timer


def test_R17_migration_0021_keeps_every_signal_and_cuts_pages_by_kept_and_measured_sizes_alike(world, orch, database):
    world.publish(signal_flow(before_timer_ms=3_600_000))
    wf = world.start("approval-flow", {"order_id": "o-1"})
    orch.drain()
    sent(world, wf, 1, 20)
    assert world.db.scalar("SELECT COUNT(*) FROM weave_signals WHERE payload_bytes = OCTET_LENGTH(payload)") == 20
    roll_back_migration(database, MIGRATION)
    kept = world.db.rows("SELECT * FROM weave_signals ORDER BY id")
    assert installer.migrate(database, test_clock=True).migrations_applied == [MIGRATION]
    assert [{k: v for k, v in r.items() if k != "payload_bytes"}
            for r in world.db.rows("SELECT * FROM weave_signals ORDER BY id")] == kept
    assert world.db.scalar("SELECT COUNT(*) FROM weave_signals WHERE payload_bytes IS NULL") == 20
    sent(world, wf, 21, 45)  # after: their sizes kept
    assert world.db.scalar("SELECT COUNT(*) FROM weave_signals WHERE payload_bytes IS NULL") == 20
    pages, cursor = [], None
    while True:
        got = signals.list_signals(world.db.conn, world.token, world.namespace, wf, limit=1000, after=cursor)
        pages.append(len(got["items"]))
        cursor = got["next_cursor"]
        if cursor is None:
            break
    assert pages == [41, 4]  # 40 payloads make 8,000 KiB; the 41st passes 8 MiB


@pytest.mark.breaks_invariants("M-4.19b")
def test_M4_19b_a_signal_s_kept_payload_size_is_its_payload_s_size(world, orch):
    world.publish(signal_flow(before_timer_ms=3_600_000))
    wf = world.start("approval-flow", {"order_id": "o-1"})
    sent(world, wf, 1, 2)
    conn = world.db.conn
    assert "M-4.19b" not in invariants.violations(conn)
    world.db.execute("UPDATE weave_signals SET payload_bytes = payload_bytes + 1 ORDER BY id LIMIT 1")
    assert len(invariants.violations(conn)["M-4.19b"]) == 1
