"""TLS to the database (docs/operations.md, "The database"): the DSN's ssl_mode, ssl_ca, ssl_cert and ssl_key, as the
MySQL and MariaDB clients name them, against a private server of our own that speaks TLS with a certificate of a
test CA. A mode that checks refuses what it checks for, with an error that says why; the engine runs over TLS as
it runs without; and a server that offers no TLS is refused by every mode that needs it."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pymysql
import pytest

from orchestrator.embedded import EmbeddedServer, find_server_binary
from procedures import db as dbmod
from procedures import errors, installer, routines
from tests.support.server import _remove, private_server
from tests.support.tls import Pki, make_pki

pytestmark = pytest.mark.process


@pytest.fixture(scope="module")
def tls_server():
    """A private server on a free port of 127.0.0.1 with a certificate for localhost (not for 127.0.0.1) signed by
    a test CA, migrated over VERIFY_IDENTITY; a user who must present a client certificate of that CA; the PKI, and
    a second CA that vouches for none of it."""
    if not find_server_binary():
        pytest.fail("this test needs a mariadbd/mysqld binary on PATH to start a private server")
    root = Path(tempfile.mkdtemp(prefix="weave-tls-"))
    pki = make_pki(root / "pki", ("localhost",))
    stranger = make_pki(root / "other", ("localhost",), label="someone-else")
    server = EmbeddedServer(root / "server", database="weave_tls", fast_commit=True, tcp=True,
                            options=(f"--ssl-ca={pki.ca}", f"--ssl-cert={pki.server_cert}",
                                     f"--ssl-key={pki.server_key}"))
    try:
        plain = server.start()
        dsn = _with(plain, ssl_mode="VERIFY_IDENTITY", ssl_ca=pki.ca, host="localhost")
        installer.migrate(dsn, test_clock=True)
        admin = dbmod.connect(dsn, database=False)
        with admin.cursor() as cur:
            for host in ("%", "localhost"):
                cur.execute(f"CREATE USER 'certified'@'{host}' REQUIRE X509")
                cur.execute(f"GRANT ALL PRIVILEGES ON `{plain.database}`.* TO 'certified'@'{host}'")
        admin.close()
        yield plain, pki, stranger
    finally:
        _remove(server)
        shutil.rmtree(root, ignore_errors=True)


def _with(dsn: dbmod.Dsn, *, host: str | None = None, user: str | None = None, **options) -> dbmod.Dsn:
    """``dsn`` as a URL with these TLS options (paths as text), parsed as a process would parse it."""
    query = "&".join(f"{k}={v}" for k, v in options.items())
    url = dsn.url().replace("127.0.0.1", host or "127.0.0.1", 1).replace("//root@", f"//{user or 'root'}@", 1)
    return dbmod.Dsn.parse(url + ("&" if "?" in url else "?") + query if query else url)


def _cipher(dsn: dbmod.Dsn) -> str:
    """The cipher of a new connection's TLS session, '' without TLS (asked of the server)."""
    conn = dbmod.connect(dsn, database=False)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
            return cur.fetchone()["Value"]
    finally:
        conn.close()


@pytest.mark.parametrize("mode", ["PREFERRED", "REQUIRED", "VERIFY_CA", "VERIFY_IDENTITY"])
def test_every_mode_but_disabled_speaks_tls_to_a_server_that_offers_it(tls_server, mode):
    plain, pki, _ = tls_server
    assert _cipher(_with(plain, ssl_mode=mode, ssl_ca=pki.ca, host="localhost")) != ""
    assert _cipher(_with(plain, ssl_mode="DISABLED")) == ""


def test_a_ca_given_alone_checks_the_certificate(tls_server):
    """As the MySQL client does, an ssl_ca without a mode means VERIFY_CA: a server whose certificate that CA did not
    sign is refused, where PREFERRED (the default) and REQUIRED would take it unchecked."""
    plain, pki, stranger = tls_server
    assert _with(plain, ssl_ca=pki.ca).ssl_mode == "VERIFY_CA"
    assert _cipher(_with(plain, ssl_ca=pki.ca)) != ""
    with pytest.raises(errors.TransientDatabaseError, match="CERTIFICATE_VERIFY_FAILED"):
        dbmod.connect(_with(plain, ssl_ca=stranger.ca))
    assert _cipher(_with(plain, ssl_mode="REQUIRED")) != ""  # encrypted, but whose certificate it is goes unchecked


def test_verify_identity_refuses_a_certificate_that_does_not_name_the_host(tls_server):
    plain, pki, _ = tls_server
    by_address = _with(plain, ssl_mode="VERIFY_IDENTITY", ssl_ca=pki.ca)  # the same server, by a name not in it
    with pytest.raises(errors.TransientDatabaseError, match="CERTIFICATE_VERIFY_FAILED.*127.0.0.1"):
        dbmod.connect(by_address)
    assert _cipher(_with(plain, ssl_mode="VERIFY_CA", ssl_ca=pki.ca)) != ""  # the CA is checked, not the name


def test_a_client_certificate_is_presented_to_a_user_that_requires_one(tls_server):
    plain, pki, _ = tls_server
    certified = _with(plain, user="certified", ssl_ca=pki.ca, ssl_cert=pki.client_cert, ssl_key=pki.client_key)
    assert _cipher(certified) != ""
    with pytest.raises(pymysql.err.OperationalError, match="Access denied"):  # the same user without one
        dbmod.connect(_with(plain, user="certified", ssl_ca=pki.ca))


def test_an_owner_that_must_present_a_certificate_migrates(tls_server):
    """The migration tool's connection dropped the DSN's TLS options: an owner made to present a client certificate
    was refused (1045) by `weave migrate` alone. It connects as every other connection does now."""
    plain, pki, _ = tls_server
    certified = _with(plain, user="certified", ssl_mode="VERIFY_IDENTITY", host="localhost", ssl_ca=pki.ca,
                      ssl_cert=pki.client_cert, ssl_key=pki.client_key)
    assert installer.migrate(certified, test_clock=True).migrations_applied == []


def test_the_engine_runs_over_tls_and_the_server_sees_every_session_encrypted(tls_server):
    """Routine calls, as every process makes them, over a verified connection: a namespace, a definition, a start."""
    plain, pki, _ = tls_server
    dsn = _with(plain, ssl_mode="VERIFY_IDENTITY", ssl_ca=pki.ca, host="localhost")
    conn = dbmod.connect(dsn)
    try:
        admin = routines.namespace_bootstrap(conn, "tls")["token"]
        assert routines.app_put(conn, admin, "tls", "billing", 10)["name"] == "billing"
        with conn.cursor() as cur:
            cur.execute("SHOW SESSION STATUS LIKE 'Ssl_version'")
            assert cur.fetchone()["Value"] in ("TLSv1.2", "TLSv1.3")
    finally:
        conn.close()


def test_a_mode_that_needs_tls_refuses_a_server_without_it():
    """A server that offers no TLS: PREFERRED goes on in the clear, every mode that needs TLS refuses it, as transient
    (a daemon backs off and tries again: the server may be restarted with TLS, or be an impostor in between)."""
    with private_server("weave-plain-", "weave_plain", options=("--skip-ssl",), migrated=False) as (_, dsn):
        assert _cipher(dsn) == "" and dsn.ssl_mode == "PREFERRED"
        for mode in ("REQUIRED", "VERIFY_CA", "VERIFY_IDENTITY"):
            with pytest.raises(errors.TransientDatabaseError, match="2026"):
                dbmod.connect(dsn.with_options(ssl_mode=mode))


def test_tls_options_that_would_not_apply_as_written_are_refused(tmp_path):
    pki: Pki = make_pki(tmp_path / "pki", ("localhost",))
    base = "mysql://weave@db:3306/weave?"
    for query, said in [("ssl_mode=verify_full", "ssl_mode must be one of"),
                        ("sslmode=require", "unknown TLS option 'sslmode'"),
                        ("ssl_verify_cert=true", "unknown TLS option"),
                        (f"ssl_mode=DISABLED&ssl_ca={pki.ca}", "DISABLED cannot take"),
                        (f"ssl_key={pki.client_key}", "ssl_key needs"),
                        (f"ssl_ca={tmp_path}/missing.pem", "ssl_ca must name a readable PEM file")]:
        with pytest.raises(ValueError, match=said):
            dbmod.Dsn.parse(base + query)
    parsed = dbmod.Dsn.parse(f"{base}ssl_mode=verify_identity&ssl_ca={pki.ca}")
    assert parsed.ssl_mode == "VERIFY_IDENTITY" and dbmod.Dsn.parse(parsed.url()) == parsed
    assert dbmod.Dsn.parse(f"{base}ssl_cert={pki.client_cert}&ssl_key={pki.client_key}").ssl_mode == "REQUIRED"
