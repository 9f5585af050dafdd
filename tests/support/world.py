"""A namespace ready for scenarios: bootstrap admin, an app, a queue, a credential with every
workflow scope, and short-hands for publishing and starting."""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from procedures import definitions, routines
from tests.support.db import Db
from tests.support.waiting import wait_for

WORKFLOW_SCOPES = ["workflows:read", "workflows:start", "workflows:signal", "workflows:control",
                   "workflows:review"]
_keys = itertools.count(1)


@dataclass
class World:
    db: Db
    namespace: str
    admin: str
    token: str
    app: str = "billing"
    queue: str = "payments"
    published: dict = field(default_factory=dict)

    @classmethod
    def create(cls, db: Db, namespace: str = "acme", *, quota: int = 1000, capacity: int = 1000) -> World:
        admin = routines.namespace_bootstrap(db.conn, namespace)["token"]
        routines.app_put(db.conn, admin, namespace, "billing", quota)
        routines.queue_put(db.conn, admin, namespace, "payments", capacity)
        token = routines.credential_create(db.conn, admin, namespace, "ops", WORKFLOW_SCOPES)["token"]
        return cls(db, namespace, admin, token)

    def credential(self, scopes: list[str], queues: list[str] | str = "*", actor: str = "someone") -> dict:
        return routines.credential_create(self.db.conn, self.admin, self.namespace, actor, scopes, queues)

    def publish(self, doc: dict) -> dict:
        result = routines.definition_publish(self.db.conn, self.admin, self.namespace, definitions.validate(doc))
        self.published[doc["name"]] = result["version"]
        return result

    def start(self, definition: str, input: dict | None = None, *, deadline_ms: int = 86_400_000,
              key: str | None = None, token: str | None = None, **extra) -> str:
        result = routines.instance_start(
            self.db.conn, token or self.token, self.namespace, definition=definition, app=extra.pop("app", self.app),
            input=input or {}, idempotency_key=key or f"start-{next(_keys)}", deadline_ms=deadline_ms, **extra)
        return result["workflow_id"]

    def instance(self, workflow_id: str) -> dict:
        return routines.instance_get(self.db.conn, self.token, self.namespace, workflow_id)

    def step(self, workflow_id: str, key: str) -> dict:
        return next(s for s in self.instance(workflow_id)["steps"] if s["key"] == key)

    def past_due(self, orch, workflow_id: str, key: str, due_ms: int) -> dict:
        """Moves the test clock to a second before the wait of step ``key`` is due, where it is still WAITING
        after the engine ran, then a millisecond past its due time; answers the instance once the engine ran."""
        self.db.advance(due_ms - 1_000)
        orch.drain()
        assert self.step(workflow_id, key)["wait"]["status"] == "WAITING"
        self.db.advance(1_001)
        orch.drain()
        return self.instance(workflow_id)

    def events(self, workflow_id: str) -> list[dict]:
        return routines.instance_events(self.db.conn, self.token, self.namespace, workflow_id, 0, 1000)

    def internal_id(self, workflow_id: str) -> int:
        return int(workflow_id.removeprefix("wf_"))

    @contextlib.contextmanager
    def held(self, workflow_id: str | None = None, *, attempt_id: int | None = None) -> Iterator[None]:
        """The instance's row (named, or the one of the attempt's task) locked by another transaction for the
        block, as when the engine is deciding about it: a worker's report made inside the block leaves its inbox
        event PENDING for the orchestrator (the candidate path) instead of consuming it at once."""
        iid = self.internal_id(workflow_id) if workflow_id else self.db.scalar(
            "SELECT t.instance_id FROM pulse_attempts a JOIN pulse_tasks t ON t.id = a.task_id WHERE a.id = %s",
            attempt_id)
        holder = self.db.connect()
        try:
            holder.begin()
            with holder.cursor() as cur:
                cur.execute("SELECT id FROM weave_instances WHERE id = %s FOR UPDATE", (iid,))
            yield
        finally:
            holder.rollback()
            holder.close()

    def held_on_the_namespace_lock(self, calls: list[Callable[..., dict]]) -> list[dict]:
        """The calls (each given a connection of its own), all made to wait on the namespace's lock held here, then
        let go together: their answers (every one of them must answer)."""
        holder = self.db.connect()
        with holder.cursor() as cur:
            cur.execute("START TRANSACTION")
            cur.execute("SELECT id FROM weave_namespaces WHERE name = %s FOR UPDATE", (self.namespace,))
        answers: list[dict] = []
        failures: list[Exception] = []
        conns = [self.db.connect() for _ in calls]

        def run(n: int) -> None:
            try:
                answers.append(calls[n](conns[n]))
            except Exception as exc:  # collected and asserted below
                failures.append(exc)

        threads = [threading.Thread(target=run, args=(n,)) for n in range(len(calls))]
        try:
            for thread in threads:
                thread.start()
            ids = ",".join(str(conn.thread_id()) for conn in conns)
            assert wait_for(lambda: self.db.scalar(  # each waiting for the namespace's lock
                f"SELECT COUNT(*) FROM information_schema.processlist WHERE id IN ({ids}) "
                "AND info LIKE '%%FROM weave_namespaces WHERE id = %%FOR UPDATE'") == len(calls))
        finally:
            holder.rollback()
            holder.close()
            for thread in threads:
                thread.join(30)
            for conn in conns:
                conn.close()
        assert failures == []
        return answers

    def second_activation(self, workflow_id: str) -> int:
        """A second generation of the instance's one step, as recovery creates it, made current behind the
        engine's back: what still names the first one is stale. Answers the first activation's id."""
        iid = self.internal_id(workflow_id)
        old = self.db.scalar("SELECT activation_id FROM weave_steps WHERE instance_id = %s", iid)
        self.db.execute("INSERT INTO weave_activations (namespace_id, instance_id, step_id, step_key, seq, frozen, "
                        "started_at, deadline_at) SELECT namespace_id, instance_id, step_id, step_key, 2, frozen, "
                        "started_at, deadline_at FROM weave_activations WHERE id = %s", old)
        new = self.db.scalar("SELECT MAX(id) FROM weave_activations")
        self.db.execute("UPDATE weave_steps SET activation_id = %s, activation_seq = 2 WHERE instance_id = %s",
                        new, iid)
        return int(old)
