"""The `after` graph of a definition: which steps must succeed before which, and the cycles."""

from __future__ import annotations

from typing import Any

from ..jsontext import FieldError


class StepGraph:
    def __init__(self) -> None:
        self.key_index: dict[str, int] = {}  # step key -> position of its first use
        self.step_keys: list[str | None] = []
        self.predecessors: list[list[int]] = []  # positions each step names in `after`
        self._ancestors: dict[int, set[int]] = {}

    def index_steps(self, raw_steps: list[Any]) -> None:
        """Records keys and `after` edges before any step is checked, so references can be resolved.

        Any string key is indexed, even one that breaks the key rules, so that the key itself is
        reported and not every reference to it as well.
        """
        for raw in raw_steps:
            key = raw.get("key") if isinstance(raw, dict) else None
            self.step_keys.append(key if isinstance(key, str) else None)
        for index, key in enumerate(self.step_keys):
            if key is not None:
                self.key_index.setdefault(key, index)
        for raw in raw_steps:
            after = raw.get("after") if isinstance(raw, dict) else None
            names = [name for name in after if isinstance(name, str)] if isinstance(after, list) else []
            known = {self.key_index[name] for name in names if name in self.key_index}
            self.predecessors.append(sorted(known))

    def ancestors(self, index: int) -> set[int]:
        """Every step that must succeed before step `index` activates, directly or transitively."""
        if index not in self._ancestors:
            seen: set[int] = set()
            frontier = list(self.predecessors[index])
            while frontier:
                node = frontier.pop()
                if node not in seen:
                    seen.add(node)
                    frontier.extend(self.predecessors[node])
            self._ancestors[index] = seen
        return self._ancestors[index]

    def cycles(self) -> list[FieldError]:
        """One CYCLIC_AFTER per group of steps that wait for each other, at its first step."""
        errors: list[FieldError] = []
        reported: set[int] = set()
        for index in range(len(self.predecessors)):
            if index in reported or index not in self.ancestors(index):
                continue
            group = {other for other in self.ancestors(index) if index in self.ancestors(other)}
            reported |= group
            loop = " -> ".join(str(self.step_keys[node]) for node in self.shortest_loop(index, group))
            errors.append(FieldError(f"steps[{index}].after", "CYCLIC_AFTER",
                                     f"steps wait for each other in a cycle: {loop} (each waits for the next)"))
        return errors

    def shortest_loop(self, start: int, group: set[int]) -> list[int]:
        parents: dict[int, int] = {}
        frontier = [start]
        while frontier:
            next_frontier: list[int] = []
            for node in frontier:
                for successor in self.predecessors[node]:
                    if successor == start:
                        loop = [node]
                        while loop[-1] != start:
                            loop.append(parents[loop[-1]])
                        return [*reversed(loop), start]
                    if successor in group and successor not in parents:
                        parents[successor] = node
                        next_frontier.append(successor)
            frontier = next_frontier
        raise AssertionError("start lies on a cycle, so the search returns before the frontier empties")
