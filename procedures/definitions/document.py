"""The whole document: its name, its steps (each checked by the module of its type) and the `after` graph."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any, NamedTuple

from ..jsontext import FieldError
from . import poll, signal, task, timer
from .fields import Checker, describe
from .model import (
    DEFINITION_NAME,
    MAX_QUEUE_LIST_CHARS,
    MAX_STEPS,
    STEP_KEY,
    CompiledStep,
    Definition,
    DefinitionError,
    empty_compiled,
)


class StepType(NamedTuple):
    fields: frozenset[str]
    check: Callable[[Checker, dict[str, Any], str, int, dict[str, Any], CompiledStep], None]


# Step type -> its allowed fields and its check, from the module of that type; in the order messages list.
STEP_TYPES: dict[str, StepType] = {name: StepType(module.FIELDS, module.check) for name, module in (
    ("TIMER", timer), ("POLL", poll), ("SIGNAL", signal), ("TASK", task))}


class DocumentChecker(Checker):
    def definition(self, doc: Any) -> Definition:
        if not isinstance(doc, dict):
            raise DefinitionError(
                [FieldError("", "INVALID_TYPE", f"a definition must be a JSON object, got {describe(doc)}")]
            )
        self.reject_unknown(doc, "", frozenset({"name", "steps"}))
        name = self.text(doc, "", "name", DEFINITION_NAME)
        steps, compiled = self.steps(doc)
        if self.problems.listed:
            raise DefinitionError(self.problems.listed, self.problems.unlisted)
        assert name is not None
        canonical_json = json.dumps(
            {"name": name, "steps": steps}, sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
        return Definition(
            name=name,
            steps=steps,
            canonical_json=canonical_json,
            digest=hashlib.sha256(canonical_json.encode("utf-8")).hexdigest(),
            queues=sorted({step["queue"] for step in steps if step["type"] in ("POLL", "TASK")}),
            compiled=compiled,
            compiled_json=json.dumps(compiled, sort_keys=True, separators=(",", ":")),
        )

    def steps(self, doc: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, CompiledStep]]:
        steps: list[dict[str, Any]] = []
        compiled: dict[str, CompiledStep] = {}
        if not self.present(doc, "", "steps", required=True):
            return steps, compiled
        raw_steps = doc["steps"]
        if not isinstance(raw_steps, list):
            self.error("steps", "INVALID_TYPE", f"steps must be an array, got {describe(raw_steps)}")
            return steps, compiled
        if not 1 <= len(raw_steps) <= MAX_STEPS:
            # Past the limit the steps are not checked one by one: that bounds the work on hostile input.
            self.error("steps", "INVALID_VALUE", f"steps must hold 1 to {MAX_STEPS} steps, got {len(raw_steps)}")
            return steps, compiled
        self.graph.index_steps(raw_steps)
        queues: set[str] = set()
        for index, raw in enumerate(raw_steps):
            checked = self.step(index, raw)
            if checked is not None:
                steps.append(checked[0])
                compiled[checked[0]["key"]] = checked[1]
                self.queue_list(checked[0], index, queues)
        for cycle in self.graph.cycles():
            self.error(*cycle)
        return steps, compiled

    def queue_list(self, step: dict[str, Any], index: int, queues: set[str]) -> None:
        """Adds the step's queue to the definition's; reported at the step whose queue makes the list too long."""
        queue = step.get("queue")
        if step["type"] not in ("POLL", "TASK") or not isinstance(queue, str) or queue in queues:
            return
        before = sum(map(len, queues)) + len(queues) - 1
        queues.add(queue)
        after = sum(map(len, queues)) + len(queues) - 1
        if before <= MAX_QUEUE_LIST_CHARS < after:
            self.error(f"steps[{index}].queue", "INVALID_VALUE",
                       f"the definition's distinct queues take more than {MAX_QUEUE_LIST_CHARS:,} characters "
                       "as a comma-separated list from this step on; use fewer queues or shorter names")

    def step(self, index: int, raw: Any) -> tuple[dict[str, Any], CompiledStep] | None:
        path = f"steps[{index}]"
        if not isinstance(raw, dict):
            self.error(path, "INVALID_TYPE", f"a step must be a JSON object, got {describe(raw)}")
            return None
        key = self.text(raw, path, "key", STEP_KEY)
        if key is not None and self.graph.key_index[key] != index:
            self.error(f"{path}.key", "DUPLICATE_STEP_KEY",
                       f"step key {describe(key)} is already used by steps[{self.graph.key_index[key]}]")
        step_type = self.step_type(raw, path)
        after = self.after(raw, path)
        if step_type is None:
            return None  # the allowed fields depend on the type, so nothing more can be checked
        kind = STEP_TYPES[step_type]
        self.reject_unknown(raw, path, kind.fields)
        step: dict[str, Any] = {"key": key, "type": step_type, "after": after}
        compiled = empty_compiled()
        kind.check(self, raw, path, index, step, compiled)
        return step, compiled

    def step_type(self, raw: dict[str, Any], path: str) -> str | None:
        if not self.present(raw, path, "type", required=True):
            return None
        value = raw["type"]
        if not isinstance(value, str):
            self.error(f"{path}.type", "INVALID_TYPE", f"type must be a string, got {describe(value)}")
            return None
        if value not in STEP_TYPES:
            self.error(f"{path}.type", "UNKNOWN_TYPE",
                       f"type must be one of {', '.join(STEP_TYPES)}, got {describe(value)}")
            return None
        return value
