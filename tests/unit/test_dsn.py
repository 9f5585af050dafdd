"""The DSN forms: one host exactly as before, several hosts for a cluster, connection timeouts and the
failover order. Connecting is tested against the real server in tests/sql/test_connect.py."""

from __future__ import annotations

import pytest

from procedures.db import Dsn


def test_a_single_host_dsn_parses_and_prints_as_before():
    dsn = Dsn.parse("mysql://app:secret@db.example:3307/weave_prod")
    assert (dsn.host, dsn.port, dsn.user, dsn.password, dsn.database) == ("db.example", 3307, "app", "secret",
                                                                         "weave_prod")
    assert dsn.hosts == () and not dsn.clustered and dsn.addresses == (("db.example", 3307),)
    assert dsn.url() == "mysql://app:secret@db.example:3307/weave_prod"
    assert dsn.redacted() == "mysql://app:***@db.example:3307/weave_prod"
    assert Dsn.parse("mysql://root@localhost/w?unix_socket=/run/m.sock").url() == \
        "mysql://root@localhost:3306/w?unix_socket=/run/m.sock"
    assert Dsn.parse("mysql:///w") == Dsn(database="w")


def test_several_hosts_keep_their_order_and_options_and_round_trip():
    url = "mysql://root@10.0.0.1:3306,10.0.0.2,[fd00::3]:3307/weave?connect_timeout=2&read_timeout=10&failover=loadbalance"
    dsn = Dsn.parse(url)
    assert dsn.addresses == (("10.0.0.1", 3306), ("10.0.0.2", 3306), ("fd00::3", 3307))
    assert (dsn.host, dsn.port) == ("10.0.0.1", 3306) and dsn.clustered
    assert dsn.timeout("connect_timeout") == 2.0 and dsn.timeout("read_timeout") == 10.0
    assert dsn.timeout("write_timeout") == 120.0
    assert Dsn.parse(dsn.url()) == dsn
    assert dsn.with_database("other").addresses == dsn.addresses
    single = dsn.single("10.0.0.2", 3306)
    assert not single.clustered and single.url(options=False) == "mysql://root@10.0.0.2:3306/weave"


@pytest.mark.parametrize("url", ["mysql://root@h1,,h2/w", "mysql://root@h1:x/w", "mysql://root@h/w?read_timeout=0",
                                 "mysql://root@h/w?connect_timeout=soon", "mysql://root@h1,h2/w?failover=nearest",
                                 "mysql://root@h:99999/w", "mysql://root@h:0/w", "mysql://root@h1,[::1]:70000/w",
                                 "mysql://root@h:3306\u00b2/w", "mysql://root@h:\u0663\u0663\u0660\u0666/w",
                                 "mysql://root@h/we`ave", "mysql://root@h/" + "w" * 65, "mysql://root@h/a/b",
                                 "mysql://root@h/weave "])
def test_malformed_dsns_are_refused(url):
    with pytest.raises(ValueError):
        Dsn.parse(url)


def test_a_password_with_url_characters_survives_the_url_every_process_is_handed():
    """The operator percent-encodes a password's special characters; the URL the engine hands on (to the migration
    tool, to the API's serving processes, to `weave dev`'s children) must carry them encoded too. It carried them
    bare: ``p@ss/w:rd`` made a host named ``ss`` and every connection went there."""
    dsn = Dsn.parse("mysql://we%40ve:p%40ss%2Fw%3Ard%23%3F%25x@db1:3307/weave?read_timeout=9")
    assert (dsn.user, dsn.password, dsn.host, dsn.port) == ("we@ve", "p@ss/w:rd#?%x", "db1", 3307)
    assert Dsn.parse(dsn.url()) == dsn
    assert Dsn.parse(dsn.url(options=False)) == Dsn.parse("mysql://we%40ve:p%40ss%2Fw%3Ard%23%3F%25x@db1:3307/weave")
    assert "p@ss" not in dsn.redacted() and "p%40ss" not in dsn.redacted()
    assert dsn.redacted() == "mysql://we%40ve:***@db1:3307/weave?read_timeout=9"


@pytest.mark.parametrize("url", [
    "mysq://weave:S3cretPw@db/weave",  # a mistyped scheme
    "postgres://weave:S3cretPw@db:3306/weave",
    "mysql://weave:S3cr/etPw@db/weave",  # a bare '/', '?' or '#' in the password ends the URL's user part early
    "mysql://weave:S3c?retPw@db/weave",
    "mysql://weave:S3c#retPw@db/weave",
    "mysql://weave:S3cretP/w@db1,db2/weave",
])
def test_a_malformed_dsn_is_refused_without_its_password(url):
    """A DSN refused as malformed is said on stderr, in logs and in a gunicorn boot failure: its message named the
    URL as given, the password with it (whole for a mistyped scheme, a piece of it when a bare '/', '?' or '#'
    ended the user part early and the rest read as a host or a port)."""
    with pytest.raises(ValueError) as refused:
        Dsn.parse(url)
    text = str(refused.value)
    assert not any(piece in text for piece in ("S3c", "cret", "retP", "etPw", "Pw"))
    assert refused.value.__cause__ is None and refused.value.__suppress_context__
    assert "S3cretPw" not in repr(Dsn.parse("mysql://weave:S3cretPw@db/weave"))
