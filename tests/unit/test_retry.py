"""The retry wrapper every engine process calls its routines through (R-12): a first try that succeeds is a plain
call, and a transient failure starts the retry loop with that failure counted as its first attempt."""

from __future__ import annotations

import pytest

from procedures import connections, errors
from procedures.connections import retry_transient


class Script:
    """A routine stand-in that fails with the given errors, in order, and then answers ``done``."""

    def __init__(self, *failures: Exception):
        self.failures = list(failures)
        self.calls = 0
        self.retries = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "done"

    def on_retry(self) -> None:
        self.retries += 1


def transient(n: int) -> list[Exception]:
    return [errors.TransientDatabaseError(f"lost connection {i}") for i in range(n)]


def test_R12_a_first_try_that_succeeds_never_builds_the_retry_loop(monkeypatch):
    def no_loop(*args, **kwargs):
        raise AssertionError("the retry loop was built for a call that succeeded")

    monkeypatch.setattr(connections, "Retrying", no_loop)
    script = Script()
    assert retry_transient(script, on_retry=script.on_retry) == "done"
    assert (script.calls, script.retries) == (1, 0)


@pytest.mark.parametrize("failures", [1, 2, 4])
def test_R12_transient_failures_are_tried_again_until_one_succeeds(failures):
    script = Script(*transient(failures))
    assert retry_transient(script, attempts=5, on_retry=script.on_retry) == "done"
    assert (script.calls, script.retries) == (failures + 1, failures)


@pytest.mark.parametrize("attempts", [1, 2, 5])
def test_R12_after_its_attempts_the_last_transient_failure_is_raised(attempts):
    failures = transient(attempts + 1)
    script = Script(*failures)
    with pytest.raises(errors.TransientDatabaseError) as info:
        retry_transient(script, attempts=attempts, on_retry=script.on_retry)
    assert info.value is failures[attempts - 1]
    assert (script.calls, script.retries) == (attempts, attempts)


@pytest.mark.parametrize("first", [True, False])
def test_R12_any_other_error_is_raised_at_once_and_never_retried(first):
    other = errors.NotFound("no such instance")
    script = Script(other) if first else Script(*transient(1), other)
    with pytest.raises(errors.NotFound) as info:
        retry_transient(script, attempts=5, on_retry=script.on_retry)
    assert info.value is other
    assert (script.calls, script.retries) == ((1, 0) if first else (2, 1))
