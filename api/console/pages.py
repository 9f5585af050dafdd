"""The console's resources: each page reads through the same routine wrappers as the HTTP API, with the
signed-in credential's token, so the console sees and does exactly what that credential may (the routines
authorise). Pages are Jinja2 templates with autoescape; every state-changing form carries the session's
CSRF token, and every action its own Idempotency-Key."""

from __future__ import annotations

import functools
import logging
import re
import secrets
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlencode

import falcon
import jinja2
import pymysql
from cryptography.exceptions import InvalidTag

from procedures import errors, routines, signals
from procedures.reviews import RETRY_CLOSES, REVIEW_HELP

from .. import schemas
from ..http import (
    IDEMPOTENCY_KEY_MAX,
    PATH_WIDTHS,
    TOKEN_MAX,
    ApiError,
    Connections,
    parse_strict,
    raw_body,
    unavailable_detail,
)
from ..resources import _parse_time
from . import sessions, views

log = logging.getLogger("weave.console")
HERE = Path(__file__).resolve().parent
STATIC = {"console.css": "text/css; charset=utf-8"}
# No script at all, styles only from our own file, forms only to ourselves, never framed.
CSP = ("default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; "
       "base-uri 'none'")
STATUSES = ("RUNNING", "NEEDS_REVIEW", "CANCELLING", "CANCELLED", "SUCCEEDED")
INSTANCE_ACTIONS = {"pause": routines.instance_pause, "resume": routines.instance_resume,
                    "cancel": routines.instance_cancel, "retry": routines.instance_retry}
STEP_ACTIONS = ("reactivate", "continue", "resolve")
ACTION_SCOPE = {"pause": "workflows:control", "resume": "workflows:control", "cancel": "workflows:control",
                "deadline": "workflows:review", "reactivate": "workflows:review", "continue": "workflows:review",
                "resolve": "workflows:review", "retry": "workflows:review"}

templates = jinja2.Environment(
    loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True, undefined=jinja2.StrictUndefined,
    trim_blocks=True, lstrip_blocks=True)
templates.filters["pretty"] = views.pretty
templates.filters["rfc3339"] = routines.rfc3339  # engine times as the API and the CLI write them


class SignInNeeded(Exception):
    """No live session: the page answers with a redirect to the sign-in form."""


class Refused(Exception):
    """A console-level refusal (bad CSRF token, bad form), shown as an error page."""

    def __init__(self, status: int, code: str, detail: str):
        super().__init__(detail)
        self.status, self.code, self.detail = status, code, detail


# The action forms' fields as their labels say them, for the words of a refusal (the engine names its parameters).
FORM_LABELS = {"extra_rounds": "Extra rounds", "poll_deadline_ms": "New poll deadline", "extend_ms": "Extend by",
               "deadline_at": "new deadline", "timeout_ms": "New timeout", "evidence_ref": "Evidence reference"}
_FORM_FIELD = re.compile(r"\b(" + "|".join(FORM_LABELS) + r")\b")


def new_key(kind: str) -> str:
    return f"console-{kind}-{secrets.token_hex(8)}"


def base_path(req: falcon.Request) -> str:
    """The console's own path, behind whatever prefix the server mounts the app at (SCRIPT_NAME)."""
    return (req.root_path or "").rstrip("/") + "/console"


CONSOLE_PATH = re.compile(r"/console(?:/.*)?\Z", re.DOTALL)  # every path the console answers, its 404s included


def secure_headers(resp: falcon.Response) -> None:
    resp.set_header("Content-Security-Policy", CSP)
    resp.set_header("X-Content-Type-Options", "nosniff")
    resp.set_header("Referrer-Policy", "no-referrer")
    resp.set_header("X-Frame-Options", "DENY")


def redirect(resp: falcon.Response, location: str) -> None:
    resp.status = falcon.HTTP_303
    resp.location = location
    resp.set_header("Cache-Control", "no-store")
    resp.text = ""


def form(req: falcon.Request) -> dict[str, list[str]]:
    if (req.content_type or "").split(";")[0].strip().lower() != "application/x-www-form-urlencoded":
        raise Refused(415, "UNSUPPORTED_MEDIA_TYPE", "send the form as application/x-www-form-urlencoded")
    try:
        req.context.form = parse_qs(raw_body(req).decode("utf-8"), keep_blank_values=True, strict_parsing=False)
        return req.context.form
    except UnicodeDecodeError:
        raise Refused(400, "VALIDATION_FAILED", "the form is not UTF-8") from None


def field(data: dict[str, list[str]], name: str, default: str = "") -> str:
    values = data.get(name)
    return values[0] if values else default


BIGINT_MAX = 2**63 - 1  # the widest number a routine takes
# A step action's fields held to the bounds the API holds its body to (the routines' own widths).
_STEP_ACTION = schemas.BODIES["ResolveRequest"]["properties"]
ACTIVATION_MAX = _STEP_ACTION["activation_sequence"]["maximum"]
REASON_MAX = _STEP_ACTION["reason"]["maxLength"]
EVIDENCE_MAX = _STEP_ACTION["evidence_ref"]["maxLength"]


def optional_int(data: dict[str, list[str]], name: str, low: int = -BIGINT_MAX, high: int = BIGINT_MAX) -> int | None:
    text = field(data, name).strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        raise Refused(422, "VALIDATION_FAILED", f"{FORM_LABELS.get(name, name)} must be a whole number") from None
    if not low <= value <= high:  # the database would refuse it as it binds the call, naming the routine's parameter
        raise Refused(422, "VALIDATION_FAILED", f"{FORM_LABELS.get(name, name)} is out of range")
    return value


def action_fields(data: dict[str, list[str]]) -> tuple[str, str]:
    """The idempotency key and the reason of an operator action, held to the routines' widths as the API holds its
    header and body to them: a longer value would be refused by the database as it binds the call, a page naming
    the routine's parameter instead of the rule."""
    key, reason = field(data, "idempotency_key").strip(), field(data, "reason")
    if len(key) > IDEMPOTENCY_KEY_MAX:
        raise Refused(422, "IDEMPOTENCY_KEY_INVALID", f"the idempotency key must be 1-{IDEMPOTENCY_KEY_MAX} printable "
                                                      "ASCII characters; reload the page and try again")
    if len(reason) > REASON_MAX:
        raise Refused(422, "REASON_INVALID", f"a reason of 1-{REASON_MAX} characters is required "
                                             f"(this one has {len(reason):,})")
    return key, reason


_INSTANCE_PATH = re.compile(r"/instances/(wf_[0-9]{1,19})(?:/|\Z)")


def _inside(req: falcon.Request) -> str:
    """The request's path within the console (req.path leaves out the prefix the server is mounted at)."""
    return req.path[len("/console"):]


def page_of(req: falcon.Request) -> str:
    """The console page a request belongs to: an instance's page for the instance and every action on it, else the
    page asked for when it is one (a GET), else the dashboard."""
    inside = _inside(req)
    instance = _INSTANCE_PATH.match(inside)
    if instance:
        return f"{base_path(req)}/instances/{instance.group(1)}"
    if req.method == "GET" and inside.startswith("/") and inside not in ("/signin", "/signout"):
        return base_path(req) + inside + (f"?{req.query_string}" if req.query_string else "")
    return base_path(req)


def sign_in_again(req: falcon.Request, resp: falcon.Response) -> None:
    """To the sign-in form, which brings the operator back to the page afterwards. A form posted without a live
    session (it ended, or was signed out in another tab, while the form was open) did nothing: the form says so, so
    that the operator sends it again rather than believe it done."""
    query = {"next": page_of(req)}
    if req.method == "POST" and _inside(req) != "/signout":  # a sign-out sent after its session ended is done
        query["ended"] = "1"
    redirect(resp, f"{base_path(req)}/signin?{urlencode(query)}")


def safe_next(req: falcon.Request, target: str) -> str:
    """Where a sign-in goes on to: a page of this console, never anywhere else. An address that leaves it, or one
    crafted to (another origin, a doubled slash, a backslash, a dot-segment a browser would resolve, spelled plainly
    or percent-encoded), goes to the dashboard."""
    base = base_path(req)
    path = target.split("?", 1)[0]
    for spelling in (path, unquote(path)):
        if "//" in spelling or "\\" in spelling or any(part in (".", "..") for part in spelling.split("/")):
            return base
    if not target.startswith(base + "/") or "/signin" in path:
        return base
    return target


def page(method):
    """Runs a responder and turns every refusal into an HTML page (or a redirect to sign-in)."""

    @functools.wraps(method)
    def run(self, req, resp, **params):
        secure_headers(resp)
        resp.set_header("Cache-Control", "no-store")
        try:
            method(self, req, resp, **params)
        except SignInNeeded:
            sign_in_again(req, resp)
        except Exception as exc:  # every failure is a page, never a stack trace
            self.fail(req, resp, exc)

    return run


class Page:
    def __init__(self, connections: Connections):
        self.connections = connections

    @property
    def conn(self):
        return self.connections.get()

    # --- sessions ---------------------------------------------------------------------------------------
    def session(self, req: falcon.Request) -> sessions.Session | None:
        values = req.get_cookie_values(sessions.COOKIE) or []
        sid = values[0] if values else None
        if not sessions.plausible_id(sid):
            return None
        try:
            row = routines.console_session_get(self.conn, sessions.session_hash(sid))
            token = sessions.unseal(sid, row["sealed_token"])
        except errors.Unauthenticated:
            return None
        except InvalidTag:
            return None
        return sessions.Session(sid, row["namespace"], row["actor"], tuple(row["scopes"]), token,
                                row["expires_at"], row["now_at"])

    def require(self, req: falcon.Request) -> sessions.Session:
        session = self.session(req)
        if session is None:
            raise SignInNeeded()
        return session

    def checked(self, req: falcon.Request) -> tuple[sessions.Session, dict[str, list[str]]]:
        """The session and the form of a state-changing POST whose CSRF token matches the session."""
        session = self.require(req)
        data = form(req)
        if not sessions.csrf_ok(session.csrf, field(data, "csrf")):
            raise Refused(403, "CSRF_REFUSED", "this form was not made for your console session as it is now (you "
                                               "signed in again since, perhaps in another tab, or it came from "
                                               "elsewhere): nothing was done; reload the page and send it again")
        return session, data

    # --- rendering --------------------------------------------------------------------------------------
    def render(self, req, resp, template: str, session: sessions.Session | None, status: int = 200, **context):
        resp.status = status
        resp.content_type = "text/html; charset=utf-8"
        # How long the session has left, on the engine clock it expires on: a form typed past its end is refused
        # (nothing done) and has to be typed again after signing in.
        left = (session.expires_at - session.now_at).total_seconds() if session else None  # type: ignore[operator]
        resp.text = templates.get_template(template).render(
            base=base_path(req), session=session, csrf=session.csrf if session else "", new_key=new_key,
            session_left=None if left is None else views.duration(left), session_ending=left is not None and left < 900,
            review_help=REVIEW_HELP, retry_closes=RETRY_CLOSES,
            **{"nav": "", **context})

    def fail(self, req, resp, exc: BaseException) -> None:
        if isinstance(exc, pymysql.err.MySQLError):
            exc = errors.translate(exc)
        status, code, detail = 500, "INTERNAL", "an internal error occurred; it has been logged"
        engine = False  # the words are the engine's (or the API's), naming its parameters, not the form's fields
        if isinstance(exc, Refused):
            status, code, detail = exc.status, exc.code, exc.detail
        elif isinstance(exc, ApiError):
            status, code, detail, engine = exc.http_status, exc.code, exc.detail, True
            if exc.errors:  # what is wrong, not only that the request is not valid
                code, detail = exc.errors[0]["code"], "; ".join(e["message"] for e in exc.errors)
        elif isinstance(exc, errors.ValidationFailed):
            status, code, detail, engine = 422, exc.field_code, exc.detail, True
        elif isinstance(exc, errors.SchemaMismatch) or errors.is_unavailable(exc):
            self.connections.discard()
            resp.set_header("Retry-After", "1")
            status, code = 503, "UNAVAILABLE"
            detail = ("the database is unavailable; retry shortly" if isinstance(exc, errors.SchemaMismatch)
                      else unavailable_detail(exc))
        elif isinstance(exc, errors.Unauthenticated):
            sign_in_again(req, resp)
            return
        elif isinstance(exc, errors.WeaveError) and exc.http_status < 500:
            status, code, detail, engine = exc.http_status, exc.code, exc.detail, True
        elif isinstance(exc, falcon.HTTPError):
            status, code, detail = exc.status_code, "HTTP_ERROR", exc.title or "error"
        else:
            log.exception("console page failed", extra={"fields": {"path": req.path}}, exc_info=exc)
            self.connections.discard()
        session = None
        if status != 503:
            try:
                session = self.session(req)
            except Exception:  # the error page must render whatever the database does
                session = None
        if engine and req.method == "POST":  # a form's refusal, in the form's words: its labels are what was seen
            detail = _FORM_FIELD.sub(lambda field: FORM_LABELS[field[1]], detail)
        # Back to the instance from a page of its own (its rounds), never from the instance's page that failed.
        instance = _INSTANCE_PATH.match(_inside(req))
        back = page_of(req) if req.method == "POST" or (instance and instance.end() < len(_inside(req))) else None
        # A form sent with a key whose answer did not come may have acted: it is offered again as it was sent, with
        # the same key, which never acts twice. Back would show the form with a new key, and an action that did
        # complete would act again (an extension extended twice).
        sent = getattr(req.context, "form", None) or {}
        resend = ([(name, value) for name, values in sent.items() for value in values]
                  if status == 503 and req.method == "POST" and (field(sent, "idempotency_key")
                                                                  or field(sent, "bulk_key")) else None)
        self.render(req, resp, "error.html", session, status=status, code=code, detail=detail, status_code=status,
                    back=None if back == base_path(req) or resend else back, sent=req.method == "POST",
                    resend=resend, resend_key=field(sent, "idempotency_key") or field(sent, "bulk_key"),
                    resend_to=base_path(req) + _inside(req))


class Static:
    def on_get(self, req, resp, name):
        if name not in STATIC:
            raise falcon.HTTPNotFound()
        resp.content_type = STATIC[name]
        resp.data = (HERE / "static" / name).read_bytes()
        resp.set_header("Cache-Control", "public, max-age=300")
        resp.set_header("X-Content-Type-Options", "nosniff")


class SignIn(Page):
    @page
    def on_get(self, req, resp):
        after = safe_next(req, req.get_param("next") or "")
        if self.session(req) is not None:
            redirect(resp, after)
            return
        ended = req.get_param("ended") == "1"
        self._form(req, resp, after=after, error=(
            "Your session ended before that form was sent: nothing was done. Sign in, and you are taken back to "
            "the page to send it again." if ended else None))

    def _form(self, req, resp, status: int = 200, error: str | None = None, namespace: str = "",
              after: str | None = None):
        # Sign-in has no session yet: a one-off value in a SameSite=Strict cookie and in the form proves the
        # post came from this page (no login CSRF).
        nonce = secrets.token_urlsafe(24)
        resp.set_cookie(sessions.SIGNIN_COOKIE, nonce, path=base_path(req), secure=req.scheme == "https",
                        http_only=True, same_site="Strict", max_age=900)
        self.render(req, resp, "signin.html", None, status=status, nonce=nonce, error=error, namespace=namespace,
                    after=after or base_path(req))

    @page
    def on_post(self, req, resp):
        data = form(req)
        values = req.get_cookie_values(sessions.SIGNIN_COOKIE) or []
        namespace = field(data, "namespace").strip()
        after = safe_next(req, field(data, "next"))
        if not values or not sessions.csrf_ok(values[0], field(data, "nonce")):
            # A form left open past its one-off value's life (or not from this console): nothing was sent, and a
            # fresh form is the way on, not an error page.
            self._form(req, resp, 403, "The sign-in form expired (or did not come from this console): nothing was "
                                       "sent. Sign in again.", namespace[:PATH_WIDTHS["ns"]], after)
            return
        token = field(data, "token").strip()
        if not token or not namespace:
            self._form(req, resp, 422, "Give the namespace and a token.", namespace, after)
            return
        if len(token) > TOKEN_MAX or len(namespace) > PATH_WIDTHS["ns"]:
            # Longer than any credential's token or namespace's name: no credential of it, as the API answers such a
            # token (the database would refuse the value as it binds the call, a page naming the routine's parameter).
            self._form(req, resp, 401, "That token is not valid for this namespace.", namespace[:PATH_WIDTHS["ns"]],
                       after)
            return
        previous = self.session(req)
        if previous is not None:  # a new sign-in replaces this browser's session, it never adds a second
            routines.console_session_close(self.conn, sessions.session_hash(previous.session_id))
        sid = sessions.new_session_id()
        try:
            opened = routines.console_session_open(self.conn, token, namespace, sessions.session_hash(sid),
                                                   sessions.seal(sid, token), sessions.ttl_seconds())
        except (errors.Unauthenticated, errors.NotFound):
            self._form(req, resp, 401, "That token is not valid for this namespace.", namespace, after)
            return
        except errors.Forbidden:
            self._form(req, resp, 403, "That credential may not read workflows (scope workflows:read).", namespace,
                       after)
            return
        resp.unset_cookie(sessions.SIGNIN_COOKIE, path=base_path(req))
        resp.set_cookie(sessions.COOKIE, sid, path=base_path(req), secure=req.scheme == "https", http_only=True,
                        same_site="Strict", max_age=sessions.lifetime_s(opened))
        redirect(resp, after)


class SignOut(Page):
    @page
    def on_get(self, req, resp):
        redirect(resp, base_path(req))  # signing out is a POST with the CSRF token; a link just goes home

    @page
    def on_post(self, req, resp):
        session, _ = self.checked(req)
        routines.console_session_close(self.conn, sessions.session_hash(session.session_id))
        resp.unset_cookie(sessions.COOKIE, path=base_path(req))
        redirect(resp, base_path(req) + "/signin")


class Dashboard(Page):
    @page
    def on_get(self, req, resp):
        session = self.require(req)
        figures = routines.status(self.conn)  # the same function /metrics renders
        self.render(req, resp, "dashboard.html", session, figures=figures,
                    chart=views.lateness_chart(figures["lateness"]), nav="dashboard")


FILTERS = ("status", "definition", "control", "business_key", "review_code", "in_review", "deferred")
_FILTER_WIDTHS = (("definition", 128, "definition name"), ("business_key", 256, "business key"),
                  ("review_code", 64, "review reason code"))


def _filters(req: falcon.Request, data: dict[str, list[str]] | None = None) -> dict[str, str]:
    """The list filters of a request's query, or of its form ``data``, as given (strings; checkboxes are '1' or
    '')."""
    values = {name: ((req.get_param(name) if data is None else field(data, name)) or "").strip() for name in FILTERS}
    if values["status"] not in STATUSES:
        values["status"] = ""
    if values["control"] not in ("ACTIVE", "PAUSED"):
        values["control"] = ""
    for box in ("in_review", "deferred"):
        values[box] = "1" if values[box] else ""
    for name, width, what in _FILTER_WIDTHS:  # past them the engine refused the list with the database's own words
        if len(values[name]) > width:
            raise Refused(422, "VALIDATION_FAILED", f"the {what} filter is {len(values[name])} characters: no "
                                                    f"{what} is longer than {width}")
    values["review_code"] = values["review_code"].upper()  # codes are upper case: task_failed means TASK_FAILED
    if values["in_review"]:  # "in review" is the NEEDS_REVIEW status: the status field shows what is listed
        values["status"] = "NEEDS_REVIEW"
    return values


def _list_args(filters: dict[str, str]) -> dict:
    """The routine's arguments for the filters: 'in review' is the NEEDS_REVIEW status."""
    status = "NEEDS_REVIEW" if filters["in_review"] else filters["status"]
    return {"status": status or None, "definition": filters["definition"] or None,
            "control": filters["control"] or None, "business_key": filters["business_key"] or None,
            "review_code": filters["review_code"] or None, "deferred": bool(filters["deferred"])}


def _mismatch(instance: dict, filters: dict[str, str]) -> str | None:
    """What of ``instance``, as read now, no longer matches ``filters`` (as the list routine matches them), or None
    when it all does."""
    args = _list_args(filters)
    codes = {r["code"] for r in instance["review_reasons"]}
    for name, wanted, now, matches in (
            ("status", args["status"], instance["status"], instance["status"] == args["status"]),
            ("definition", args["definition"], instance["definition"]["name"],
             instance["definition"]["name"] == args["definition"]),
            ("control", args["control"], instance["control"], instance["control"] == args["control"]),
            ("business key", args["business_key"], instance["business_key"],
             instance["business_key"] == args["business_key"]),
            ("open review reason", args["review_code"], ", ".join(sorted(codes)) or "none",
             args["review_code"] in codes),
            ("deferred", args["deferred"] or None, "", instance["deferred"] is not None)):
        if wanted is not None and not matches:
            return "it is no longer deferred" if name == "deferred" else f"its {name} is now {now}, not {wanted}"
    return None


def _audited(conn, token: str, ns: str, workflow_id: str, action: str, key: str) -> dict | None:
    """The audit row of ``action`` (a console action's name: pause, reactivate, ...) on the instance under ``key``,
    among the latest 50 of that action, or None."""
    audited = f"step.{action}" if action in STEP_ACTIONS else f"instance.{action}"
    trail = routines.audit_list(conn, token, ns, workflow_id=workflow_id, action=audited, limit=50)["items"]
    return next((row for row in trail if row["idempotency_key"] == key), None)


def _query(filters: dict[str, str], **more) -> str:
    return "?" + urlencode({**{k: v for k, v in filters.items() if v}, **more})


class Instances(Page):
    @page
    def on_get(self, req, resp):
        session = self.require(req)
        filters = _filters(req)
        cursor = req.get_param("cursor") or None
        page_ = routines.instance_list(self.conn, session.token, session.namespace, **_list_args(filters), limit=25,
                                       cursor=cursor)
        next_url = _query(filters, cursor=page_["next_cursor"]) if page_["next_cursor"] else None
        self.render(req, resp, "instances.html", session, page=page_, filters=filters, statuses=STATUSES,
                    next_url=next_url, first_url=_query(filters), cursor=cursor, nav="instances")


class Instance(Page):
    EVENTS = 500
    SIGNALS = 100  # a page of signals: each may carry 256 KiB, and an instance may hold 1024 of them

    @page
    def on_get(self, req, resp, workflow_id):
        session = self.require(req)
        conn, token, ns = self.conn, session.token, session.namespace
        instance = routines.instance_get(conn, token, ns, workflow_id)
        definition = instance["definition"]
        try:
            document = routines.definition_get(conn, token, ns, definition["name"], definition["version"])
        except errors.WeaveError:
            document = None
        steps = views.graph_order(document, instance["steps"])
        status_of = {s["key"]: s["status"] for s in steps}
        now = session.now_at
        for step in steps:
            for wait in (step["wait"], step["final_wait"]):
                if wait:
                    wait["left"] = views.time_left(wait.get("due_at") or wait.get("deadline_at"), now)
            if step["poll"]:
                step["poll"]["next_left"] = views.time_left(step["poll"]["next_poll_at"], now)
                step["poll"]["deadline_left"] = views.time_left(step["poll"]["poll_deadline"], now)
            # Every step not yet settled gets the explain answer: what it waits for and what holds it back; and while
            # the instance is CANCELLING, a cancelled step too: its task may still run, and the instance waits for it.
            # A TIMER or TASK step still waiting for its after-steps has nothing else to explain (no signal targets
            # it): the page names the steps it waits for instead of asking, which in a long chain saves a call a step.
            step["explain"] = None
            step["waits_for"] = [{"key": k, "status": status_of.get(k)} for k in step["after"]
                                 if status_of.get(k) != "SUCCEEDED"] if step["status"] == "PENDING" else []
            # (with their states: one may never succeed; only a PENDING step waits for its after-steps)
            if step["type"] in ("TIMER", "TASK") and step["waits_for"]:
                continue
            if step["status"] != "SUCCEEDED" and (step["status"] != "CANCELLED" or instance["status"] == "CANCELLING"):
                step["explain"] = signals.explain(conn, token, ns, workflow_id, step["key"])
        deferred_left = views.time_left(instance["deferred"]["next_check_at"], now) if instance["deferred"] else None
        for checkpoint in instance["checkpoints"]:
            checkpoint["left"] = views.time_left(checkpoint["available_at"], now)
        after = optional_int({"after": [req.get_param("events_after") or ""]}, "after") or 0
        events = routines.instance_events(conn, token, ns, workflow_id, after, self.EVENTS)
        signals_after = req.get_param("signals_after") or None
        # Payloads as kept: each is parsed only when its row is shown (views.pretty), not all of them at once.
        signal_page = signals.list_signals(conn, token, ns, workflow_id, limit=self.SIGNALS, after=signals_after,
                                           verbatim=True)
        done = None
        did, key = req.get_param("did"), req.get_param("key") or ""
        if did in ACTION_SCOPE and 0 < len(key) <= 128 and key.isascii() and key.isprintable():
            # The notice is the action's audit row, not the address: one sent again with the instance already so
            # changed nothing, and says so; an address kept or passed on shows when and by whom it was done, and
            # one naming no action of this instance shows nothing.
            row = _audited(conn, token, ns, workflow_id, did, key)
            if row is not None:
                done = {"did": did, "key": key, "replayed": req.get_param("replayed") == "1", "actor": row["actor"],
                        "at": row["accepted_at"], "changed": (row["details"] or {}).get("changed", True) is not False}
        self.render(req, resp, "instance.html", session, instance=instance, steps=steps, events=events,
                    signals=signal_page["items"], signals_after=signals_after,
                    signals_more=signal_page["next_cursor"], events_after=after, deferred_left=deferred_left,
                    events_more=events[-1]["seq"] if len(events) == self.EVENTS else None,
                    deadline_left=views.time_left(instance["deadline_at"], now),
                    can_control=session.can("workflows:control"), can_review=session.can("workflows:review"),
                    done=done, nav="instances")


# A rounds page's query values held to the bounds the API holds its own to (an activation or a round number past
# them would be refused by the database as it binds the call, naming the routine's parameter).
_ROUNDS_QUERY = schemas.QUERIES["list_rounds"]
ROUND_MAX = _ROUNDS_QUERY["after"]["maximum"]


class StepRounds(Page):
    """Every round of a POLL step, a page at a time, of its latest activation or an earlier one (R-11, P-5): the
    instance page shows only the latest 50 rounds of each current activation."""

    ROUNDS = 50  # a page: a round's result may be 1 MiB, so a page holds no more than the instance page shows

    @page
    def on_get(self, req, resp, workflow_id, step_key):
        session = self.require(req)
        conn, token, ns = self.conn, session.token, session.namespace
        asked = {name: [req.get_param(name) or ""] for name in ("after", "activation")}
        after = optional_int(asked, "after", 0, ROUND_MAX) or 0
        activation = optional_int(asked, "activation", 1, _ROUNDS_QUERY["activation"]["maximum"])
        # Results as kept: each is parsed only when its row is shown (views.pretty), not all of them at once.
        shown = routines.step_rounds(conn, token, ns, workflow_id, step_key, activation_sequence=activation,
                                     after=after, limit=self.ROUNDS, verbatim=True)
        latest = shown["latest_activation_sequence"]  # for the chooser, from the same read
        self.render(req, resp, "rounds.html", session, workflow_id=workflow_id, step=shown, after=after,
                    rounds=shown["rounds"], more=shown["more"], latest=latest or 0, nav="instances")


def _done(req, resp, workflow_id: str, action: str, key: str, result: dict) -> None:
    query = urlencode({"did": action, "key": key, "replayed": "1" if result.get("replayed") else ""})
    redirect(resp, f"{base_path(req)}/instances/{workflow_id}?{query}#result")


def _to_instance(req, resp, workflow_id: str) -> None:
    """A GET of an action's address (the address bar of a refused action's page, the history) acts on nothing: it
    goes to the instance's page, as a GET of sign-out goes home."""
    redirect(resp, f"{base_path(req)}/instances/{quote(workflow_id, safe='')}")


class InstanceAction(Page):
    """POST pause | resume | cancel | retry | deadline: the routine decides and audits; the page shows the result."""

    @page
    def on_get(self, req, resp, workflow_id, action):
        _to_instance(req, resp, workflow_id)

    @page
    def on_post(self, req, resp, workflow_id, action):
        session, data = self.checked(req)
        key, reason = action_fields(data)
        confirm_cancel(action, data)
        if action in INSTANCE_ACTIONS:
            result = INSTANCE_ACTIONS[action](self.conn, session.token, session.namespace, workflow_id, reason, key)
        elif action == "deadline":
            at_text = field(data, "deadline_at").strip()
            at = _parse_time(at_text, "deadline_at") if at_text else None
            result = routines.instance_deadline(self.conn, session.token, session.namespace, workflow_id, reason,
                                                key, deadline_at=at, extend_ms=optional_int(data, "extend_ms"))
        else:
            raise falcon.HTTPNotFound()
        _done(req, resp, workflow_id, action, key, result)


def confirm_cancel(action: str, data: dict[str, list[str]]) -> None:
    """A cancel ends instances for good: its form asks the operator to tick that they mean it, and a form sent
    without the tick (a browser that does not hold to the form's required box) is refused, having done nothing."""
    if action == "cancel" and field(data, "confirm") != "1":
        raise Refused(422, "CONFIRMATION_NEEDED", "a cancel ends the instance for good: tick the box that says you "
                                                  "mean it, then send the form again (nothing was done)")


class StepAction(Page):
    """POST reactivate | continue | resolve of one step (C-4)."""

    @page
    def on_get(self, req, resp, workflow_id, step_key, action):
        _to_instance(req, resp, workflow_id)

    @page
    def on_post(self, req, resp, workflow_id, step_key, action):
        session, data = self.checked(req)
        key, reason = action_fields(data)
        conn, token, ns = self.conn, session.token, session.namespace
        # The activation the page showed: an action meant for it is refused once the step has moved to another.
        seq = optional_int(data, "activation_sequence", 0, ACTIVATION_MAX)
        if action == "reactivate":
            result = routines.step_reactivate(conn, token, ns, workflow_id, step_key, reason, key,
                                              timeout_ms=optional_int(data, "timeout_ms"), activation_sequence=seq)
        elif action == "continue":
            result = routines.step_continue(conn, token, ns, workflow_id, step_key, reason, key,
                                            extra_rounds=optional_int(data, "extra_rounds"),
                                            poll_deadline_ms=optional_int(data, "poll_deadline_ms"),
                                            activation_sequence=seq)
        elif action == "resolve":
            text = field(data, "output").strip()
            try:
                parse_strict(text.encode("utf-8"))  # refused here, before anything is sent to the engine
            except ApiError:
                raise Refused(422, "OUTPUT_INVALID", "the output is not valid JSON (duplicate keys are refused "
                                                     "too); nothing was sent") from None
            evidence = field(data, "evidence_ref").strip() or None
            if evidence is not None and len(evidence) > EVIDENCE_MAX:  # the routine's rule, before the call can
                # refuse its width
                raise Refused(422, "EVIDENCE_REF_INVALID",
                              f"the evidence reference must be at most {EVIDENCE_MAX} characters")
            result = routines.step_resolve(conn, token, ns, workflow_id, step_key, reason, key,
                                           evidence_ref=evidence, output_json=text, activation_sequence=seq)
        else:
            raise falcon.HTTPNotFound()
        _done(req, resp, workflow_id, action, key, result)


class Review(Page):
    """Every NEEDS_REVIEW instance with its reasons, the longest-waiting first."""

    LIMIT = 200  # instances shown; past it the page says how many are in review

    @page
    def on_get(self, req, resp):
        session = self.require(req)
        # One call, however many are in review: the instances waiting longest (since their earliest open reason),
        # with their reasons, and the count of all of them.
        queue = routines.review_queue(self.conn, session.token, session.namespace, limit=self.LIMIT)
        items = queue["items"]
        for instance in items:
            since = views.parse_time(instance["waiting_since"])
            instance["waiting_for"] = views.duration((session.now_at - since).total_seconds())
        self.render(req, resp, "review.html", session, items=items, total=queue["in_review"],
                    truncated=len(items) == self.LIMIT and queue["in_review"] > self.LIMIT, nav="review")


class Bulk(Page):
    """A bulk action on a filter: first a dry run (the count and the list of what would be touched), then
    each listed instance is acted on with its own Idempotency-Key (the run's key and the instance id), and
    each gets its own result, so a partial failure shows and applying again is safe. More matches than one run
    takes: the run takes the first LIMIT listed, and a dry run after it lists the rest (an instance acted on no
    longer matches a filter of the state it left, and one that still does only replays)."""

    LIMIT = 500  # one request acts on at most this many, well within a worker's timeout
    ACTIONS = ("pause", "resume", "cancel", "reactivate", "retry")

    @page
    def on_get(self, req, resp):
        session = self.require(req)
        filters = _filters(req)
        action = req.get_param("action") or ""
        matches, more = None, False
        if req.get_param("dry_run"):
            if action not in self.ACTIONS:
                raise Refused(422, "VALIDATION_FAILED",
                              "choose the action to apply: pause, resume, cancel, reactivate or retry")
            matches, cursor = [], None
            while True:
                listed = routines.instance_list(self.conn, session.token, session.namespace, **_list_args(filters),
                                                limit=500, cursor=cursor)
                matches += listed["items"]
                cursor = listed["next_cursor"]
                if not cursor or len(matches) > self.LIMIT:
                    break
            more = len(matches) > self.LIMIT
            matches = matches[:self.LIMIT]
        self.render(req, resp, "bulk.html", session, filters=filters, statuses=STATUSES, actions=self.ACTIONS,
                    action=action, matches=matches, more=more, limit=self.LIMIT, bulk_key=new_key("bulk"),
                    can_act=action in self.ACTIONS and session.can(ACTION_SCOPE[action]),
                    scope=ACTION_SCOPE.get(action, ""), nav="bulk")

    @page
    def on_post(self, req, resp):
        session, data = self.checked(req)
        action, reason, run_key = field(data, "action"), field(data, "reason"), field(data, "bulk_key").strip()
        ids = data.get("workflow_id", [])
        if action not in self.ACTIONS or not run_key or not ids or len(ids) > self.LIMIT:
            raise Refused(422, "VALIDATION_FAILED",
                          f"a bulk run needs an action, its key and 1..{self.LIMIT} instances")
        confirm_cancel(action, data)
        filters = _filters(req, data)
        results, away = [], False
        for workflow_id in ids:
            key = f"{run_key}.{workflow_id}"
            if away:  # each would wait out its own connect timeout: the run could outlive the worker's timeout
                results.append({"workflow_id": workflow_id, "key": key, "ok": False, "replayed": False,
                                "changed": False, "transient": True, "code": "UNAVAILABLE",
                                "detail": "not tried: the database stopped answering"})
                continue
            try:
                # The dry run listed the instance minutes ago, perhaps: one a colleague has acted on since (continued,
                # resumed) may no longer match, and is left as it is, unless this run's key already acted on it (a
                # second submit, a retry), which is answered as the replay it is.
                instance = routines.instance_get(self.conn, session.token, session.namespace, workflow_id)
                mismatch = _mismatch(instance, filters)
                # This run's own action on it, if it acted already: read once, for both uses.
                acted = (_audited(self.conn, session.token, session.namespace, workflow_id, action, key)
                         if mismatch or action == "reactivate" else None)
                if mismatch and acted is None:
                    results.append({"workflow_id": workflow_id, "key": key, "ok": False, "replayed": False,
                                    "changed": False, "transient": False, "code": "NO_LONGER_MATCHES",
                                    "detail": f"left as it is: {mismatch}"})
                    continue
                if action == "reactivate":
                    done = self._reactivate(session, instance, reason, key, acted)
                    if "refused" in done:
                        results.append({"workflow_id": workflow_id, "key": key, "ok": False, "replayed": False,
                                        "changed": False, "transient": False, "code": "INVALID_STATE",
                                        "detail": done["refused"]})
                        continue
                else:
                    done = INSTANCE_ACTIONS[action](self.conn, session.token, session.namespace, workflow_id, reason,
                                                    key)
                results.append({"workflow_id": workflow_id, "key": key, "ok": True,
                                "replayed": bool(done.get("replayed")), "changed": bool(done.get("changed", True)),
                                "transient": False, "code": "", "detail": ""})
            except errors.WeaveError as exc:
                transient = errors.is_unavailable(exc)
                if isinstance(exc, errors.TransientDatabaseError):
                    self.connections.discard()
                    away = errors.is_connection_lost(exc)
                code = exc.field_code if isinstance(exc, errors.ValidationFailed) else exc.code
                results.append({"workflow_id": workflow_id, "key": key, "ok": False, "replayed": False,
                                "changed": False, "transient": transient, "code": code, "detail": exc.detail})
        failed = [r["workflow_id"] for r in results if not r["ok"]]
        # Only what may go through another time is offered again: a refusal for the instance's state (a finished
        # instance, another namespace's) would be refused again.
        retry = [r["workflow_id"] for r in results if not r["ok"] and r["transient"]]
        self.render(req, resp, "bulk_result.html", session, action=action, reason=reason, bulk_key=run_key,
                    results=results, failed=failed, retry=retry, filters=filters, nav="bulk")

    def _reactivate(self, session: sessions.Session, instance: dict, reason: str, key: str,
                    acted: dict | None) -> dict:
        """Reactivates the one step of the instance that is in review, as read now, naming the activation it read
        (C-4: one that moved on between this read and the action is refused). An instance with several steps in
        review, or none, is left for its own page: which of them to start again, and how, is a person's choice
        there. ``acted``: this run's reactivation of it, read from the audit trail, when there was one."""
        workflow_id = instance["workflow_id"]
        steps = {(r["step_key"], r["activation_sequence"]) for r in instance["review_reasons"] if r["step_key"]}
        # The run again (a second submit, a retry after a lost answer): its reactivation, under this key, is in the
        # instance's audit trail with the step and the activation it made, and is answered as a replay.
        if acted is not None:
            done = acted["details"]
            steps = {(done["step_key"], done["activation_sequence"] - 1)}
        elif instance["status"] != "NEEDS_REVIEW" or len(steps) != 1:
            why = (f"the instance is {instance['status']}" if instance["status"] != "NEEDS_REVIEW"
                   else f"{len(steps)} steps are in review" if steps else "no step is in review")
            return {"refused": f"{why}: reactivate on the instance's page"}
        ((step_key, sequence),) = steps
        return routines.step_reactivate(self.conn, session.token, session.namespace, workflow_id, step_key, reason,
                                        key, activation_sequence=sequence)


class Missing(Page):
    """Any other path under /console: a 404 page, not the API's problem+json."""

    @page
    def __call__(self, req, resp, **params):
        raise Refused(404, "NOT_FOUND", "there is no such page in the console")
