"""The Python SDK's transport, measured against the two ways a Python client can talk HTTP, in one run on one
`weave api` (gunicorn, its defaults): a raw ``http.client`` connection kept for the whole run (the floor), and a
new connection per call through ``urllib`` (the SDK's transport before it kept connections, and still its
transport through a proxy). For each: calls/s, and the CPU time per call of the client and of the API's
processes. Two calls: ``GET /healthz`` (no database) and ``GET /workflows/{id}`` (one routine call).
Run: python -m tests.benchmarks.bench_sdk [--calls 2000] [--threads 4]"""

from __future__ import annotations

import argparse
import json
import resource
import threading
import time
import urllib.request
from collections.abc import Callable
from http.client import HTTPConnection

from api.client import WeaveClient
from tests.benchmarks.common import check_invariants, cpu_seconds, figure, fresh_database, process_logs, world_on
from tests.support.processes import start_api

TIMER = {"name": "sdk-bench", "steps": [{"key": "wait", "type": "TIMER", "delay_ms": 3_600_000}]}


def kept(url: str, token: str) -> Callable[[str], Callable[[], None]]:
    host, port = url.removeprefix("http://").split(":")

    def per_thread(path: str) -> Callable[[], None]:
        conn = HTTPConnection(host, int(port))

        def call() -> None:
            conn.request("GET", path, headers={"Authorization": f"Bearer {token}", "Accept": "application/json"})
            answer = conn.getresponse()
            json.loads(answer.read())
            assert answer.status == 200, answer.status
        return call
    return per_thread


def per_call(url: str, token: str) -> Callable[[str], Callable[[], None]]:
    def per_thread(path: str) -> Callable[[], None]:
        def call() -> None:
            req = urllib.request.Request(url + path, headers={"Authorization": f"Bearer {token}",
                                                              "Accept": "application/json"})
            with urllib.request.urlopen(req, timeout=30) as answer:
                json.loads(answer.read())
        return call
    return per_thread


def sdk(url: str, token: str) -> Callable[[str], Callable[[], None]]:
    client = WeaveClient(url, token, "acme")

    def per_thread(path: str) -> Callable[[], None]:
        def call() -> None:
            client.request("GET", path)
        return call
    return per_thread


def measure(make: Callable[[str], Callable[[], None]], path: str, calls: int, threads: int, api_pid: int) -> dict:
    workers = [make(path) for _ in range(threads)]
    for call in workers:  # warm: connections made, code paths run
        for _ in range(20):
            call()
    per = calls // threads
    go = threading.Barrier(threads + 1)

    def run(call: Callable[[], None]) -> None:
        go.wait()
        for _ in range(per):
            call()

    pool = [threading.Thread(target=run, args=(call,)) for call in workers]
    for t in pool:
        t.start()
    before, api_before = resource.getrusage(resource.RUSAGE_SELF), cpu_seconds(api_pid)
    go.wait()
    start = time.perf_counter()
    for t in pool:
        t.join()
    seconds = time.perf_counter() - start
    after, api_after = resource.getrusage(resource.RUSAGE_SELF), cpu_seconds(api_pid)
    done = per * threads
    client_cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return {"calls_per_s": round(done / seconds, 1), "client_cpu_ms_per_call": round(client_cpu * 1000 / done, 3),
            "api_cpu_ms_per_call": round((api_after - api_before) * 1000 / done, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=2000, help="calls per transport and path")
    parser.add_argument("--threads", type=int, default=4, help="client threads (each with its own connection)")
    args = parser.parse_args()
    dsn = fresh_database("weave_bench_sdk")
    world = world_on(dsn)
    world.publish(TIMER)
    wf = world.start("sdk-bench")
    with process_logs("sdk") as logs:
        api, url = start_api(dsn, logs / "api.log")
        try:
            for path in ("/healthz", f"/v1/namespaces/acme/workflows/{wf}"):
                # Alternated, so that a change of the machine's speed during the run weighs on each alike.
                for name, make in (("raw http.client, one kept connection", kept),
                                   ("SDK (WeaveClient)", sdk),
                                   ("urllib, a new connection per call", per_call)):
                    row = measure(make(url, world.token), path, args.calls, args.threads, api.proc.pid)
                    figure("SDK transport", transport=name, path=path.replace(wf, "{id}"), threads=args.threads,
                           **row)
        finally:
            api.terminate()
            api.close()
    world.db.close()
    check_invariants(dsn)


if __name__ == "__main__":
    main()
