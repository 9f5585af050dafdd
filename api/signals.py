"""Signal resources (05-signals over HTTP). A payload is passed to the routine as the exact bytes of
the request body that encode it (S-4 "bytes as received"): the API never re-serialises a payload, so
big numbers and key order survive and the request digest is the same one a SQL client would get."""

from __future__ import annotations

import falcon

from procedures import jsontext, signals

from . import schemas
from .http import bearer, idempotency_key, json_object_members, path, respond_text
from .resources import Resource


class Signals(Resource):
    queried = ("GET", "HEAD")  # its list takes a query (schemas.query)

    def on_post(self, req: falcon.Request, resp: falcon.Response, ns: str, workflow_id: str) -> None:
        token = bearer(req)
        key = idempotency_key(req)
        body, spans = json_object_members(req)
        body = schemas.body("SignalRequest", body)  # shapes only: every value rule of S-1 is the routine's
        correlation = body.get("correlation_key")
        receipt = signals.send(
            self.conn, token, ns, workflow_id, idempotency_key=key, name=body.get("name"),
            payload_version=body.get("payload_version"), target_step_key=body.get("target_step_key"),
            target_activation_sequence=body.get("target_activation_sequence"),
            correlation_key=None if correlation is None else correlation.encode("utf-8"), payload=spans.get("payload"),
            reason=body.get("reason"), evidence_ref=body.get("evidence_ref"))
        resp.status = falcon.HTTP_200 if receipt["replayed"] else falcon.HTTP_201
        resp.content_type = falcon.MEDIA_JSON
        resp.text = receipt["receipt_json"]  # the frozen receipt, byte-identical on every replay (S-4, S-5)
        if receipt["replayed"]:
            resp.set_header("Idempotent-Replayed", "true")
        else:
            resp.location = path(ns, "workflows", workflow_id, "signals", receipt["signal_id"])

    def on_get(self, req: falcon.Request, resp: falcon.Response, ns: str, workflow_id: str) -> None:
        token = bearer(req)
        q = schemas.query(req, "list_signals")
        page = signals.list_signals(self.conn, token, ns, workflow_id, status=q["status"], limit=q["limit"],
                                    after=q["cursor"], verbatim=True)
        respond_text(resp, jsontext.dumps({"items": [_public(s) for s in page["items"]],
                                            "next_cursor": page["next_cursor"]}))


class Signal(Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response, ns: str, workflow_id: str, signal_id: str) -> None:
        token = bearer(req)  # 401 before anything asks the database
        signal = signals.get(self.conn, token, ns, workflow_id, signal_id, verbatim=True)
        respond_text(resp, jsontext.dumps(_public(signal)))


class Explain(Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response, ns: str, workflow_id: str, step_key: str) -> None:
        token = bearer(req)  # 401 before anything asks the database
        # A review reason's facts as kept (a poll round's result in them with every digit), as the instance gives them.
        respond_text(resp, jsontext.dumps(signals.explain(self.conn, token, ns, workflow_id, step_key, verbatim=True)))


def _public(signal: dict) -> dict:
    """A signal (read ``verbatim``) as the API answers it: its payload as the exact bytes it was accepted with (S-4),
    never parsed and written again."""
    return {k: v for k, v in signal.items() if k != "payload_text"}
