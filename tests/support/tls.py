"""Certificates for the tests of TLS to the database, made with the openssl command line: a certificate authority,
a server certificate it signs for the names given, and a client certificate."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _signed(directory: Path, name: str, subject: str, ca: str, ca_key: str, extensions: str) -> None:
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj",
             subject, cwd=directory)
    (directory / f"{name}.ext").write_text(extensions)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-days", "2",
             "-sha256", "-extfile", f"{name}.ext", "-out", f"{name}.pem", cwd=directory)


def make_pki(directory: Path, server_names: tuple[str, ...], label: str = "weave-test") -> Pki:
    """A CA, a server certificate for ``server_names`` (DNS names, or IP addresses), and a client certificate, in
    ``directory``. Another call with another directory makes a CA that trusts none of these."""
    directory.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
             "-sha256", "-subj", f"/CN={label} CA", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)
    names = ",".join(f"IP:{n}" if n.replace(".", "").isdigit() or ":" in n else f"DNS:{n}" for n in server_names)
    _signed(directory, "server", f"/CN={server_names[0]}", "ca.pem", "ca.key",
            f"subjectAltName={names}\nextendedKeyUsage=serverAuth\n")
    _signed(directory, "client", "/CN=weave-client", "ca.pem", "ca.key", "extendedKeyUsage=clientAuth\n")
    return Pki(ca=directory / "ca.pem", server_cert=directory / "server.pem", server_key=directory / "server.key",
               client_cert=directory / "client.pem", client_key=directory / "client.key")
