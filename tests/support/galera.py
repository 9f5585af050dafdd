"""A private 3-node MariaDB Galera cluster for HA tests: every node is a ``mariadbd`` process of our own, with
its datadir under a temporary directory, its own SQL, group-communication, IST and SST ports, and its own
socket. It never touches the machine's own server. Nodes can be killed with -9, hung with SIGSTOP, and
restarted; ``close()`` kills and removes everything, whatever state the nodes are in.

Nodes run as the ``mysql`` user (when we are root) so that the rsync state transfer can write the joiner's
datadir. Group-communication timeouts are shortened so that a dead node leaves the cluster in seconds.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pymysql

from orchestrator.embedded import ServerFiles
from procedures.db import Dsn
from tests.support.waiting import wait_for

PROVIDERS = ("/usr/lib/galera/libgalera_smm.so", "/usr/lib/libgalera_smm.so", "/usr/lib64/galera-4/libgalera_smm.so",
             "/usr/lib64/galera/libgalera_smm.so")
INSTALL_HINT = ("The Galera tests need MariaDB with the Galera provider and rsync "
                "(Debian: apt-get install mariadb-server galera-4 rsync).")

# Failure detection: a node that stops answering is suspected after 2 s and dropped from the view soon after;
# the defaults (5 s / 15 s) would make every failover test wait that long.
GROUP_OPTIONS = ("evs.keepalive_period=PT0.5S;evs.suspect_timeout=PT2S;evs.inactive_timeout=PT4S;"
                 "evs.inactive_check_period=PT0.5S;evs.install_timeout=PT4S;gcache.size=64M;"
                 "pc.wait_prim_timeout=PT10S")


def find_provider() -> str | None:
    explicit = os.environ.get("WEAVE_GALERA_PROVIDER")
    for path in ((explicit,) if explicit else PROVIDERS):
        if path and os.path.exists(path):
            return path
    return None


# A node's group-communication, IST and SST ports, as offsets from its SQL port.
PORT_OFFSETS = {"group": 1100, "ist": 1110, "sst": 1120}


def _free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_port_block(size: int, start: int = 3501) -> int:
    """The first base port from ``start`` on where base+i (SQL) and the group/IST/SST ports are all free."""
    for base in range(start, start + 400, 10):
        ports = [sql + offset for sql in range(base, base + size) for offset in (0, *PORT_OFFSETS.values())]
        if all(_free(p) for p in ports):
            return base
    raise RuntimeError(f"no free block of ports for a {size}-node cluster from {start}")


@dataclass
class Node(ServerFiles):
    index: int
    directory: Path
    sql_port: int
    provider: str
    cluster_address: str
    cluster_name: str
    process: subprocess.Popen | None = None
    stopped: bool = False  # SIGSTOPped

    def port(self, of: str) -> int:
        """The node's ``group`` communication, ``ist`` or ``sst`` port."""
        return self.sql_port + PORT_OFFSETS[of]

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.sql_port}"

    def dsn(self, database: str) -> Dsn:
        return Dsn(host="127.0.0.1", port=self.sql_port, database=database)

    def args(self, bootstrap: bool) -> list[str]:
        user = ["--user=mysql"] if os.geteuid() == 0 else []
        args = [shutil.which("mariadbd", path="/usr/sbin:/usr/local/sbin:" + os.environ.get("PATH", "")) or "mariadbd",
                *self.file_options(), f"--port={self.sql_port}", "--bind-address=127.0.0.1",
                "--skip-name-resolve", "--max-connections=400",
                "--innodb-buffer-pool-size=64M", "--innodb-log-file-size=32M", "--innodb-flush-log-at-trx-commit=2",
                "--default-storage-engine=InnoDB", "--binlog-format=ROW", "--innodb-autoinc-lock-mode=2",
                "--wsrep-on=ON", f"--wsrep-provider={self.provider}", f"--wsrep-cluster-name={self.cluster_name}",
                f"--wsrep-cluster-address={'gcomm://' if bootstrap else self.cluster_address}",
                f"--wsrep-node-name=node{self.index + 1}", "--wsrep-node-address=127.0.0.1",
                f"--wsrep-node-incoming-address={self.address}",
                f"--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:{self.port('group')};"
                f"ist.recv_addr=127.0.0.1:{self.port('ist')};{GROUP_OPTIONS}",
                "--wsrep-sst-method=rsync", f"--wsrep-sst-receive-address=127.0.0.1:{self.port('sst')}",
                "--wsrep-slave-threads=2", *user]
        if bootstrap:
            args.append("--wsrep-new-cluster")
        return args

    def start(self, bootstrap: bool = False, extra: list[str] | None = None) -> None:
        if self.process and self.process.poll() is None:
            raise RuntimeError(f"node{self.index + 1} is already running")
        with open(self.directory / "stdout.log", "ab") as out:
            self.process = subprocess.Popen([*self.args(bootstrap), *(extra or [])], stdout=out,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        self.stopped = False

    def recovered_position(self) -> str | None:
        """After a crash: the last committed ``uuid:seqno`` that InnoDB holds (``--wsrep-recover``), so that
        the node can ask for an incremental state transfer instead of a full copy."""
        recover_log = self.directory / "recover.log"
        args = [a for a in self.args(False) if not a.startswith("--log-error=")]
        subprocess.run([*args, "--wsrep-recover", f"--log-error={recover_log}"], capture_output=True, timeout=120)
        text = recover_log.read_text(errors="replace") if recover_log.exists() else ""
        found = [line.rsplit("Recovered position:", 1)[1].strip() for line in text.splitlines()
                 if "Recovered position:" in line]
        return found[-1] if found and not found[-1].endswith(":-1") else None

    def restart(self) -> str | None:
        """Start a node that was killed: it rejoins the running cluster, by an incremental state transfer when
        its recovered position is still in a donor's cache, else by a full one. Returns the position."""
        position = self.recovered_position()
        self.start(extra=[f"--wsrep-start-position={position}"] if position else [])
        return position

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill9(self) -> None:
        if self.alive():
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(30)
        self.stopped = False

    def sigstop(self) -> None:
        os.kill(self.process.pid, signal.SIGSTOP)
        self.stopped = True

    def sigcont(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)
        self.stopped = False

    def stop(self, timeout: float = 30) -> None:
        if not self.alive():
            return
        if self.stopped:
            self.sigcont()
        self.process.terminate()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill9()

    def status(self) -> dict[str, str]:
        """wsrep status of this node (empty when it does not answer)."""
        try:
            conn = pymysql.connect(host="127.0.0.1", port=self.sql_port, user="root", connect_timeout=1,
                                   read_timeout=2, write_timeout=2)
        except pymysql.err.MySQLError:
            return {}
        try:
            with conn.cursor() as cur:
                cur.execute("SHOW GLOBAL STATUS LIKE 'wsrep%%'")
                return {k: v for k, v in cur.fetchall()}
        except pymysql.err.MySQLError:
            return {}
        finally:
            conn.close()

    def synced(self) -> bool:
        st = self.status()
        return st.get("wsrep_ready") == "ON" and st.get("wsrep_local_state") == "4"

    def wait_synced(self, timeout: float = 120) -> float:
        """Seconds until this node is Synced; raises with the log tail if it exits or takes too long."""
        began = time.monotonic()

        def synced() -> bool:
            if not self.alive():
                raise RuntimeError(f"node{self.index + 1} exited:\n{self.tail()}")
            return self.synced()

        if wait_for(synced, timeout=timeout, interval=0.1):
            return time.monotonic() - began
        raise RuntimeError(f"node{self.index + 1} not Synced within {timeout:.0f}s:\n{self.tail()}")

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else "(no log)"


@dataclass
class GaleraCluster:
    """``start()`` bootstraps node 1 and joins the others by state transfer; ``dsn()`` lists every node."""

    size: int = 3
    base_port: int | None = None
    directory: Path | None = None
    nodes: list[Node] = field(default_factory=list)

    def start(self, timeout: float = 180) -> GaleraCluster:
        provider = find_provider()
        if provider is None or shutil.which("rsync") is None:
            raise RuntimeError(INSTALL_HINT)
        self.directory = Path(self.directory or tempfile.mkdtemp(prefix="weave-galera-"))
        base = self.base_port or free_port_block(self.size)
        name = f"weave-test-{os.getpid()}-{base}"
        ports = [base + i for i in range(self.size)]
        address = "gcomm://" + ",".join(f"127.0.0.1:{p + 1100}" for p in ports)
        self.nodes = [Node(i, self.directory / f"node{i + 1}", p, provider, address, name) for i, p in enumerate(ports)]
        try:
            self._initialise()
            self.nodes[0].start(bootstrap=True)
            self.nodes[0].wait_synced(timeout)
            for node in self.nodes[1:]:
                node.start()
                node.wait_synced(timeout)  # one joiner at a time: a donor serves one state transfer
        except BaseException:
            self.close()
            raise
        return self

    def _initialise(self) -> None:
        # One system database, copied to every node: the joiners receive the donor's state anyway, and one
        # install instead of three saves several seconds on a small machine.
        first = self.nodes[0]
        for node in self.nodes:
            node.tmpdir.mkdir(parents=True)
        self._give_to_mysql()
        installer = shutil.which("mariadb-install-db") or shutil.which("mysql_install_db")
        if installer is None:
            raise RuntimeError(INSTALL_HINT)
        user = ["--user=mysql"] if os.geteuid() == 0 else []
        result = subprocess.run([installer, "--no-defaults", f"--datadir={first.datadir}", f"--tmpdir={first.tmpdir}",
                                 "--skip-test-db", "--auth-root-authentication-method=normal", *user],
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"mariadb-install-db failed:\n{result.stdout}\n{result.stderr}")
        for node in self.nodes[1:]:
            shutil.copytree(first.datadir, node.datadir, symlinks=True)
        self._give_to_mysql()

    def _give_to_mysql(self) -> None:
        if os.geteuid() == 0:
            mysql = pwd.getpwnam("mysql")
            for path in [self.directory, *self.directory.rglob("*")]:
                os.chown(path, mysql.pw_uid, mysql.pw_gid, follow_symlinks=False)

    def dsn(self, database: str, *, order: list[int] | None = None, **options: str | float) -> Dsn:
        """A DSN that lists every node (in ``order`` of node indexes when given)."""
        chosen = [self.nodes[i] for i in (order if order is not None else range(self.size))]
        return Dsn.parse(f"mysql://root@{','.join(n.address for n in chosen)}/{database}").with_options(**options)

    def node_of(self, port: int) -> Node:
        return next(n for n in self.nodes if n.sql_port == port)

    def synced_nodes(self) -> list[Node]:
        return [n for n in self.nodes if n.alive() and not n.stopped and n.synced()]

    def cluster_size(self) -> int:
        for node in self.synced_nodes():
            return int(node.status().get("wsrep_cluster_size", "0"))
        return 0

    def wait_cluster_size(self, size: int, timeout: float = 60) -> float:
        began = time.monotonic()
        if wait_for(lambda: self.cluster_size() == size, timeout=timeout, interval=0.1):
            return time.monotonic() - began
        raise RuntimeError(f"the cluster did not reach size {size} within {timeout:.0f}s")

    def close(self) -> None:
        """Kill every node (there is nothing to keep) and remove the directory."""
        for node in self.nodes:
            if node.process is not None and node.process.poll() is None:
                try:
                    if node.stopped:
                        node.sigcont()
                    node.kill9()
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    pass
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
