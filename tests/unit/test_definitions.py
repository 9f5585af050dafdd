"""Definition documents: error codes per rule, defaults, canonical digest and compiled expressions."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from procedures.definitions import DefinitionError, parse_json_strict, validate

# The step examples of the spec, verbatim but for one line break. The TIMER example leaves `after`
# as `[...]`, which is not JSON, so it is written out here; a TASK named "charge" is added because
# the POLL waits for it.
POLL_EXAMPLE = """
{"key": "check_payment", "type": "POLL", "after": ["charge"],
 "queue": "payments", "handler": "payments.check", "handler_version": "1",
 "input": {"order_id": "$.input.order_id"},
 "interval_ms": 30000, "max_rounds": 20, "timeout_ms": 3600000,
 "task_timeout_ms": 10000, "priority": 5,
 "retry": {"max_attempts": 3, "initial_backoff_ms": 1000, "backoff_coefficient": 2.0,
           "max_backoff_ms": 60000},
 "business_key": "$.input.order_id", "mutex_key": "$.input.account_id",
 "result": {"pending": ["PENDING"], "success": ["DONE", "PAID"], "review": ["MANUAL_CHECK"]},
 "final_signal": {"name": "payment.final", "payload_version": "1", "correlation": "$.input.order_id"}}
"""
SIGNAL_EXAMPLE = """
{"key": "approval", "type": "SIGNAL", "after": ["check_payment"],
 "signal": {"name": "approval.decided", "payload_version": "1", "payload_type": "object"},
 "correlation": "$.input.order_id", "timeout_ms": 86400000}
"""
TIMER_EXAMPLE = """{"key": "cool_off", "type": "TIMER", "after": ["approval"], "delay_ms": 60000}"""

DEFAULT_RETRY = {
    "max_attempts": 3, "initial_backoff_ms": 1000, "backoff_coefficient": 2.0, "max_backoff_ms": 60000,
}


def task(key: str = "charge", **fields: Any) -> dict[str, Any]:
    return {"key": key, "type": "TASK", "queue": "payments", "handler": "payments.charge",
            "handler_version": "1", **fields}


def timer(key: str = "cool_off", **fields: Any) -> dict[str, Any]:
    return {"key": key, "type": "TIMER", "delay_ms": 60000, **fields}


def poll(key: str = "check_payment", **fields: Any) -> dict[str, Any]:
    return {"key": key, "type": "POLL", "queue": "payments", "handler": "payments.check",
            "handler_version": "1", "interval_ms": 30000, "max_rounds": 20, "timeout_ms": 3600000,
            "result": {"pending": ["PENDING"], "success": ["DONE"]}, **fields}


def signal(key: str = "approval", **fields: Any) -> dict[str, Any]:
    return {"key": key, "type": "SIGNAL", "signal": {"name": "approval.decided", "payload_version": "1"},
            "correlation": "$.input.order_id", "timeout_ms": 86400000, **fields}


def definition(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"name": "order-flow", "steps": list(steps)}


def spec_definition() -> dict[str, Any]:
    return definition(task(), *(json.loads(step) for step in (POLL_EXAMPLE, SIGNAL_EXAMPLE, TIMER_EXAMPLE)))


def errors_of(doc: Any) -> list[tuple[str, str]]:
    with pytest.raises(DefinitionError) as caught:
        validate(doc)
    return [(error.field, error.code) for error in caught.value.errors]


def reversed_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: reversed_keys(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [reversed_keys(item) for item in value]
    return value


# Valid documents and defaults


def test_spec_examples_are_valid() -> None:
    result = validate(spec_definition())

    assert [step["key"] for step in result.steps] == ["charge", "check_payment", "approval", "cool_off"]
    assert result.queues == ["payments"]
    assert result.digest == hashlib.sha256(result.canonical_json.encode("utf-8")).hexdigest()
    assert result.compiled["check_payment"]["mutex_key"] == {
        "skeleton": None, "bindings": [["$", "$.input.account_id"]],
    }
    assert result.compiled["approval"]["correlation"] == {
        "skeleton": None, "bindings": [["$", "$.input.order_id"]],
    }
    assert result.compiled_json == json.dumps(result.compiled, sort_keys=True, separators=(",", ":"))


def test_raw_json_bytes_and_text_give_the_parsed_documents_digest() -> None:
    doc = spec_definition()
    expected = validate(doc).digest

    assert validate(json.dumps(doc)).digest == expected
    assert validate(json.dumps(doc).encode("utf-8")).digest == expected


def test_task_step_is_normalised_with_every_default() -> None:
    [step] = validate(definition(task())).steps

    assert step == {
        "key": "charge", "type": "TASK", "after": [], "queue": "payments", "handler": "payments.charge",
        "handler_version": "1", "input": {}, "task_timeout_ms": 30000, "priority": 0,
        "retry": DEFAULT_RETRY, "business_key": None, "mutex_key": None,
    }


def test_poll_step_gets_empty_review_and_null_final_signal() -> None:
    [step] = validate(definition(poll())).steps

    assert step["result"] == {"pending": ["PENDING"], "success": ["DONE"], "review": []}
    assert step["final_signal"] is None
    assert step["retry"] == DEFAULT_RETRY


def test_signal_payload_type_defaults_to_any() -> None:
    [step] = validate(definition(signal())).steps

    assert step["signal"] == {"name": "approval.decided", "payload_version": "1", "payload_type": "any"}


def test_partial_retry_takes_the_missing_members_from_the_defaults() -> None:
    [step] = validate(definition(task(retry={"max_attempts": 7, "backoff_coefficient": 3}))).steps

    assert step["retry"] == {**DEFAULT_RETRY, "max_attempts": 7, "backoff_coefficient": 3.0}
    assert isinstance(step["retry"]["backoff_coefficient"], float)


def test_the_distinct_queues_fit_2048_characters_comma_separated() -> None:
    """As weave_definitions.queues stores them; reported at the step whose queue makes the list too long."""
    queues = [f"{n:02d}".ljust(64, "q") for n in range(31)]  # 2014 characters with their commas
    fits = [task(f"s{n}", queue=queue) for n, queue in enumerate([*queues, "z" * 33, queues[0]])]
    assert len(",".join(validate(definition(*fits)).queues)) == 2048

    over = [task(f"s{n}", queue=queue) for n, queue in enumerate([*queues, queues[0], "z" * 34, "y"])]
    assert errors_of(definition(*over)) == [("steps[32].queue", "INVALID_VALUE")]


def test_queues_are_sorted_and_distinct() -> None:
    doc = definition(task("a", queue="zeta"), task("b", queue="alpha"), poll("c", queue="zeta"), timer("d"))

    assert validate(doc).queues == ["alpha", "zeta"]


def test_validated_steps_do_not_share_objects_with_the_document() -> None:
    doc = definition(task(input={"items": [{"sku": "A"}]}))
    result = validate(doc)
    doc["steps"][0]["input"]["items"][0]["sku"] = "changed"

    assert result.steps[0]["input"] == {"items": [{"sku": "A"}]}


# Canonical form and digest


def test_key_order_and_whitespace_do_not_change_the_digest() -> None:
    doc = spec_definition()
    reordered = json.dumps(reversed_keys(doc), indent=4)

    assert validate(reordered).digest == validate(doc).digest
    assert validate(reordered).compiled_json == validate(doc).compiled_json


def test_explicit_defaults_do_not_change_the_digest() -> None:
    explicit = task(after=[], input={}, task_timeout_ms=30000, priority=0, retry=DEFAULT_RETRY,
                    business_key=None, mutex_key=None)
    explicit_poll = poll(result={"pending": ["PENDING"], "success": ["DONE"], "review": []},
                         final_signal=None)
    explicit_signal = signal(signal={"name": "approval.decided", "payload_version": "1",
                                     "payload_type": "any"})

    assert validate(definition(explicit)).digest == validate(definition(task())).digest
    assert validate(definition(explicit_poll)).digest == validate(definition(poll())).digest
    assert validate(definition(explicit_signal)).digest == validate(definition(signal())).digest


def test_integer_backoff_coefficient_digests_like_the_float() -> None:
    as_int = task(retry={"backoff_coefficient": 2})

    assert validate(definition(as_int)).digest == validate(definition(task())).digest


@pytest.mark.parametrize("change", [
    lambda doc: doc.update(name="order-flow-2"),
    lambda doc: doc["steps"][0].update(priority=1),
    lambda doc: doc["steps"][1]["input"].update(order_id="$.input.id"),
    lambda doc: doc["steps"][1]["result"]["review"].append("HOLD"),
    lambda doc: doc["steps"].reverse(),
])
def test_a_real_change_changes_the_digest(change: Any) -> None:
    changed = spec_definition()
    change(changed)

    assert validate(changed).digest != validate(spec_definition()).digest


def test_canonical_json_is_sorted_compact_and_keeps_non_ascii() -> None:
    result = validate(definition(task(input={"b": 1, "a": "café"})))

    assert result.canonical_json.startswith('{"name":"order-flow","steps":[{"after":[],"business_key":null')
    assert '"input":{"a":"café","b":1}' in result.canonical_json
    assert json.loads(result.canonical_json) == {"name": result.name, "steps": result.steps}


# Compiled expressions


def test_nested_objects_and_arrays_compile_to_a_skeleton_and_bindings() -> None:
    doc = definition(task(input={
        "order": {"id": "$.input.order_id",
                  "lines": ["$.input.items[0]", 5, {"sku": "$.input.items[1].sku"}]},
        "note": "plain",
    }))

    assert validate(doc).compiled["charge"]["input"] == {
        "skeleton": {"note": "plain", "order": {"id": None, "lines": [None, 5, {"sku": None}]}},
        "bindings": [
            ["$.order.id", "$.input.order_id"],
            ["$.order.lines[0]", "$.input.items[0]", ["$.items"]],  # found only where $.items is an array
            ["$.order.lines[2].sku", "$.input.items[1].sku", ["$.items"]],
        ],
    }


def test_an_expression_through_array_items_names_each_place_that_must_hold_an_array() -> None:
    """The server's JSON paths are lax: `$[0]` of a value that is no array is the value itself. Each binding that
    reads an item names the paths, within the document that keeps the value, that must be arrays."""
    doc = definition(timer("first"), task(input={"a": "$.steps.first.output[2][0].x[1]", "b": "$.input[0]"},
                                          after=["first"]))
    assert validate(doc).compiled["charge"]["input"]["bindings"] == [
        ["$.a", "$.steps.first.output[2][0].x[1]", ["$", "$[2]", "$[2][0].x"]],
        ["$.b", "$.input[0]", ["$"]],
    ]


def test_keys_that_are_not_plain_identifiers_are_double_quoted_in_both_paths() -> None:
    doc = definition(task(input={
        "order id": "$.input[\"order id\"]",
        'say "hi"\\': "$.input['it\\'s'].x-y",
    }))

    assert validate(doc).compiled["charge"]["input"]["bindings"] == [
        ['$."order id"', '$.input."order id"'],
        ['$."say \\"hi\\"\\\\"', '$.input."it\'s"."x-y"'],
    ]


def test_bare_expression_has_a_null_skeleton_and_one_binding_at_the_root() -> None:
    doc = definition(task(input="$.input", business_key="$.input.order_id"))
    compiled = validate(doc).compiled["charge"]

    assert compiled["input"] == {"skeleton": None, "bindings": [["$", "$.input"]]}
    assert compiled["business_key"] == {"skeleton": None, "bindings": [["$", "$.input.order_id"]]}


def test_fields_without_expressions_have_no_bindings() -> None:
    doc = definition(task(input={"amount": 5, "currency": "$EUR"}, business_key="order-1"), timer("wait"))
    compiled = validate(doc).compiled

    assert compiled["charge"] == {
        "input": {"skeleton": {"amount": 5, "currency": "$EUR"}, "bindings": []},
        "business_key": {"skeleton": "order-1", "bindings": []},
        "mutex_key": None,
        "correlation": None,
    }
    assert compiled["wait"]["input"] == {"skeleton": {}, "bindings": []}


def test_a_transitive_predecessors_output_can_be_read() -> None:
    doc = definition(
        task("pay.v2"),
        timer("wait", after=["pay.v2"]),
        task("ship", after=["wait"], input={"charge": "$.steps[\"pay.v2\"].output.id"},
             mutex_key="$.steps['pay.v2'].output"),
    )
    compiled = validate(doc).compiled["ship"]

    assert compiled["input"]["bindings"] == [["$.charge", '$.steps."pay.v2".output.id']]
    assert compiled["mutex_key"] == {"skeleton": None, "bindings": [["$", '$.steps."pay.v2".output']]}


def test_final_signal_correlation_is_the_polls_correlation_template() -> None:
    contract = {"name": "payment.final", "payload_version": "1", "correlation": "fixed"}
    doc = definition(poll(final_signal=contract))

    assert validate(doc).compiled["check_payment"]["correlation"] == {"skeleton": "fixed", "bindings": []}


# Errors: one code each


def test_document_must_be_an_object() -> None:
    assert errors_of([1, 2]) == [("", "INVALID_TYPE")]


@pytest.mark.parametrize(("doc", "expected"), [
    ({"steps": [timer()]}, ("name", "MISSING_FIELD")),
    ({"name": "order-flow"}, ("steps", "MISSING_FIELD")),
    (definition({"type": "TIMER", "delay_ms": 5}), ("steps[0].key", "MISSING_FIELD")),
    (definition({"key": "a", "delay_ms": 5}), ("steps[0].type", "MISSING_FIELD")),
    (definition({"key": "a", "type": "TIMER"}), ("steps[0].delay_ms", "MISSING_FIELD")),
    (definition({k: v for k, v in task().items() if k != "handler_version"}),
     ("steps[0].handler_version", "MISSING_FIELD")),
    (definition({k: v for k, v in poll().items() if k != "result"}), ("steps[0].result", "MISSING_FIELD")),
    (definition(poll(result={"pending": ["P"]})), ("steps[0].result.success", "MISSING_FIELD")),
    (definition(poll(final_signal={"name": "n", "payload_version": "1"})),
     ("steps[0].final_signal.correlation", "MISSING_FIELD")),
    (definition({k: v for k, v in signal().items() if k != "correlation"}),
     ("steps[0].correlation", "MISSING_FIELD")),
    (definition(signal(signal={"name": "n"})), ("steps[0].signal.payload_version", "MISSING_FIELD")),
])
def test_missing_required_field(doc: dict[str, Any], expected: tuple[str, str]) -> None:
    assert errors_of(doc) == [expected]


@pytest.mark.parametrize(("step", "field"), [
    (timer(delay_ms="60000"), "steps[0].delay_ms"),
    (timer(delay_ms=True), "steps[0].delay_ms"),
    (timer(delay_ms=60000.0), "steps[0].delay_ms"),
    (task(priority=False), "steps[0].priority"),
    (task(retry={"max_attempts": None}), "steps[0].retry.max_attempts"),
    (task(retry={"backoff_coefficient": True}), "steps[0].retry.backoff_coefficient"),
    (task(retry=[]), "steps[0].retry"),
    (task(after="start"), "steps[0].after"),
    (task(business_key=42), "steps[0].business_key"),
    (task(queue=7), "steps[0].queue"),
    (task(input={"when": {1, 2}}), "steps[0].input.when"),
    (poll(result={"pending": "PENDING", "success": ["DONE"]}), "steps[0].result.pending"),
    (signal(correlation=["a"]), "steps[0].correlation"),
    (signal(signal="approval.decided"), "steps[0].signal"),
    ({"key": "a", "type": 3}, "steps[0].type"),
    ("cool_off", "steps[0]"),
])
def test_wrong_json_type(step: Any, field: str) -> None:
    assert errors_of(definition(step)) == [(field, "INVALID_TYPE")]


@pytest.mark.parametrize(("step", "field"), [
    (timer(delay_ms=0), "steps[0].delay_ms"),
    (timer(delay_ms=31_536_000_001), "steps[0].delay_ms"),
    (task(priority=1001), "steps[0].priority"),
    (task(priority=-1001), "steps[0].priority"),
    (task(task_timeout_ms=86_400_001), "steps[0].task_timeout_ms"),
    (task(retry={"max_attempts": 0}), "steps[0].retry.max_attempts"),
    (task(retry={"initial_backoff_ms": -1}), "steps[0].retry.initial_backoff_ms"),
    (task(retry={"backoff_coefficient": 0.5}), "steps[0].retry.backoff_coefficient"),
    (task(retry={"backoff_coefficient": 10.01}), "steps[0].retry.backoff_coefficient"),
    (task(retry={"initial_backoff_ms": 5000, "max_backoff_ms": 4999}), "steps[0].retry.max_backoff_ms"),
    (task(retry={"initial_backoff_ms": 61_000}), "steps[0].retry.max_backoff_ms"),
    (poll(interval_ms=0), "steps[0].interval_ms"),
    (poll(max_rounds=10_001), "steps[0].max_rounds"),
    (signal(timeout_ms=31_536_000_001), "steps[0].timeout_ms"),
])
def test_out_of_range(step: dict[str, Any], field: str) -> None:
    assert errors_of(definition(step)) == [(field, "OUT_OF_RANGE")]


def test_range_bounds_are_inclusive() -> None:
    doc = definition(
        timer("a", delay_ms=31_536_000_000),
        task("b", priority=-1000, task_timeout_ms=86_400_000,
             retry={"max_attempts": 100, "initial_backoff_ms": 0, "backoff_coefficient": 10,
                    "max_backoff_ms": 0}),
        poll("c", interval_ms=1, max_rounds=10_000, timeout_ms=31_536_000_000),
    )

    assert len(validate(doc).steps) == 3


@pytest.mark.parametrize(("doc", "field"), [
    ({"name": "order flow", "steps": [timer()]}, "name"),
    ({"name": "x" * 129, "steps": [timer()]}, "name"),
    ({"name": "order-flow", "steps": []}, "steps"),
    ({"name": "order-flow", "steps": [timer(f"t{n}") for n in range(257)]}, "steps"),
    (definition(timer("k" * 65)), "steps[0].key"),
    (definition(timer("a/b")), "steps[0].key"),
    (definition(task(queue="pay ments")), "steps[0].queue"),
    (definition(task(handler="")), "steps[0].handler"),
    (definition(task(handler_version="v\u00e9")), "steps[0].handler_version"),
    (definition(task(business_key="")), "steps[0].business_key"),
    (definition(task(mutex_key="m" * 257)), "steps[0].mutex_key"),
    (definition(signal(correlation="\u00e9" * 257)), "steps[0].correlation"),
    (definition(signal(signal={"name": "n", "payload_version": "1", "payload_type": "text"})),
     "steps[0].signal.payload_type"),
    (definition(signal(signal={"name": "n" * 129, "payload_version": "1"})), "steps[0].signal.name"),
    (definition(poll(result={"pending": [], "success": ["DONE"]})), "steps[0].result.pending"),
    (definition(poll(result={"pending": ["P"], "success": ["DONE", ""]})), "steps[0].result.success[1]"),
    (definition(poll(result={"pending": ["P", "P"], "success": ["DONE"]})), "steps[0].result.pending[1]"),
    (definition(timer("a"), timer("b", after=["a", "a"])), "steps[1].after[1]"),
    (definition(task(input={"amount": float("nan")})), "steps[0].input.amount"),
    (definition(task(input={"note": "\ud800"})), "steps[0].input.note"),
])
def test_invalid_value(doc: dict[str, Any], field: str) -> None:
    assert errors_of(doc) == [(field, "INVALID_VALUE")]


def test_correlation_limit_counts_utf8_bytes() -> None:
    assert validate(definition(signal(correlation="\u00e9" * 256))).steps[0]["correlation"] == "\u00e9" * 256


def test_input_nested_too_deeply() -> None:
    nested: Any = "leaf"
    for _ in range(70):
        nested = [nested]

    assert [code for _, code in errors_of(definition(task(input=nested)))] == ["INVALID_VALUE"]


def nested_input(levels: int, innermost: Any) -> Any:
    """`innermost` inside `levels` objects."""
    for _ in range(levels):
        innermost = {"a": innermost}
    return innermost


def test_input_may_nest_28_levels_of_arrays_and_objects_as_the_database_reads_32() -> None:
    """The document holds the input at its fourth level, and MariaDB reads no JSON deeper than 32 levels."""
    assert validate(definition(task(input=nested_input(27, {})))).steps[0]["input"] == nested_input(27, {})
    assert validate(definition(task(input=nested_input(28, "$.input.x")))).compiled["charge"]["input"][
        "bindings"] == [["$" + ".a" * 28, "$.input.x"]]

    assert errors_of(definition(task(input=nested_input(28, {})))) == [
        ("steps[0].input" + ".a" * 28, "INVALID_VALUE")]
    assert errors_of(definition(task(input=nested_input(27, [[]])))) == [
        ("steps[0].input" + ".a" * 27 + "[0]", "INVALID_VALUE")]


@pytest.mark.parametrize(("doc", "field"), [
    ({**definition(timer()), "version": 2}, "version"),
    (definition(timer(delay=5)), "steps[0].delay"),
    (definition(timer(input={})), "steps[0].input"),
    (definition(signal(queue="payments")), "steps[0].queue"),
    (definition(task(retry={"max_attemps": 5})), "steps[0].retry.max_attemps"),
    (definition(poll(result={"pending": ["P"], "success": ["D"], "failure": ["F"]})),
     "steps[0].result.failure"),
    (definition(poll(final_signal={"name": "n", "payload_version": "1", "correlation": "c", "type": "x"})),
     "steps[0].final_signal.type"),
    (definition(signal(signal={"name": "n", "payload_version": "1", "schema": {}})),
     "steps[0].signal.schema"),
])
def test_unknown_field(doc: dict[str, Any], field: str) -> None:
    assert errors_of(doc) == [(field, "UNKNOWN_FIELD")]


def test_unknown_type() -> None:
    doc = definition({"key": "a", "type": "timer", "delay_ms": 5})

    assert errors_of(doc) == [("steps[0].type", "UNKNOWN_TYPE")]


def test_duplicate_step_key_is_reported_on_the_second_use() -> None:
    assert errors_of(definition(timer("a"), task("a"))) == [("steps[1].key", "DUPLICATE_STEP_KEY")]


def test_after_naming_a_missing_step() -> None:
    doc = definition(timer("a"), timer("b", after=["a", "c"]))

    assert errors_of(doc) == [("steps[1].after[1]", "UNKNOWN_AFTER")]


@pytest.mark.parametrize(("steps", "loop"), [
    ([timer("a", after=["a"])], "a -> a"),
    ([timer("a", after=["b"]), timer("b", after=["a"])], "a -> b -> a"),
    ([timer("start"), timer("a", after=["c", "start"]), timer("b", after=["a"]), timer("c", after=["b"])],
     "a -> c -> b -> a"),
])
def test_cyclic_after_names_the_cycle(steps: list[dict[str, Any]], loop: str) -> None:
    with pytest.raises(DefinitionError) as caught:
        validate(definition(*steps))

    [error] = caught.value.errors
    first = next(index for index, step in enumerate(steps) if step["key"] == "a")
    assert (error.field, error.code) == (f"steps[{first}].after", "CYCLIC_AFTER")
    assert loop in error.message


def test_each_separate_cycle_is_reported_once() -> None:
    doc = definition(timer("a", after=["b"]), timer("b", after=["a"]), timer("c", after=["c"]), timer("d"))

    assert errors_of(doc) == [("steps[0].after", "CYCLIC_AFTER"), ("steps[2].after", "CYCLIC_AFTER")]


@pytest.mark.parametrize("expression", [
    "$.", "$..a", "$.input.", "$.input[", "$.input[]", "$.input[0", "$.input[01]", "$.input[-1]",
    "$.input[*]", "$.input.*", "$.input[?(@.a)]", "$.input.a b", "$.input[\"a\"", "$.input['']",
    "$.input[\"a\\n\"]", "$.input[99999999999]", "$.foo", "$.steps", "$.steps.x", "$.steps.x.status",
    "$.steps[0].output", "$.1input",
])
def test_bad_expression(expression: str) -> None:
    doc = definition(task(input={"value": expression}))

    assert errors_of(doc) == [("steps[0].input.value", "BAD_EXPRESSION")]


@pytest.mark.parametrize("steps", [
    [task("a", input="$.steps.ghost.output")],
    [task("a", input="$.steps.a.output")],
    [timer("b"), task("a", input="$.steps.b.output")],
    [task("a", input={"x": ["$.steps.b.output.id"]}), timer("b", after=["a"])],
])
def test_reference_to_a_step_that_is_not_a_predecessor(steps: list[dict[str, Any]]) -> None:
    [(field, code)] = errors_of(definition(*steps))

    assert code == "UNKNOWN_STEP_REFERENCE"
    assert field.startswith(f"steps[{[step['key'] for step in steps].index('a')}].input")


def test_an_expression_reads_at_most_31_legs_deep_as_the_database_finds_nothing_deeper() -> None:
    assert validate(definition(task(input="$.input" + ".a" * 30))).compiled["charge"]["input"]["bindings"] == [
        ["$", "$.input" + ".a" * 30]]

    assert errors_of(definition(task(input="$.input" + "[0]" * 31))) == [("steps[0].input", "BAD_EXPRESSION")]


def test_an_expression_and_its_place_in_input_are_json_paths_of_at_most_2048_characters() -> None:
    """The activation reads both paths into VARCHAR(2048) variables."""
    source = "k" * 2040  # $.input.kk…k is 2048 characters
    target = "w" * 2046  # $.ww…w likewise
    compiled = validate(definition(task(input={target: f'$.input["{source}"]'}))).compiled["charge"]["input"]
    assert [len(path) for path in compiled["bindings"][0]] == [2048, 2048]

    assert errors_of(definition(task(input={"v": f'$.input["{source}k"]'}))) == [
        ("steps[0].input.v", "BAD_EXPRESSION")]
    assert errors_of(definition(task(input={target + "w": "$.input.x", "short": "$.input.x"}))) == [
        (f"steps[0].input.{target}w", "INVALID_VALUE")]
    # $.q[0].ww…w is 2049 characters
    assert errors_of(definition(task(input={"q": [{target[:2042]: "$.input.x"}]}))) == [
        (f"steps[0].input.q[0].{target[:2042]}", "INVALID_VALUE")]


def test_a_member_name_that_begins_with_a_dash_is_refused_where_a_json_path_would_name_it() -> None:
    """MariaDB's JSON paths cannot name a member that begins with "-" (tests/sql/test_stalls.py shows the
    server refusing it): a step key, an expression reading such a member, or a template placing an expression's
    value inside one would publish and then fail every activation. Elsewhere in a name, and in a template member that
    holds no expression, the dash is fine."""
    assert errors_of(definition(task("-charge"))) == [("steps[0].key", "INVALID_VALUE")]
    assert errors_of(definition(task(input={"v": '$.input["-x"]', "w": "$.input.a['-b']"}))) == [
        ("steps[0].input.v", "BAD_EXPRESSION"), ("steps[0].input.w", "BAD_EXPRESSION")]
    assert errors_of(definition(task(input={"-x": "$.input.a", "-y": {"z": ["$.input.b"]}}))) == [
        ('steps[0].input["-x"]', "INVALID_VALUE"), ('steps[0].input["-y"].z[0]', "INVALID_VALUE")]
    doc = definition(task("charge-1", input={"x-": '$.input["x-y"]', "-z": 5, "a": {"-b": [1]}}))
    assert validate(doc).compiled["charge-1"]["input"]["bindings"] == [['$."x-"', '$.input."x-y"']]


def test_a_step_key_or_definition_name_of_only_a_dot_or_two_is_refused_as_no_path_can_name_it() -> None:
    """A definition's name and a step's key are segments of the API's and the console's paths, where a browser or
    curl resolves "." and ".." away before sending the request: such a step could never be explained, continued or
    resolved over HTTP. Dots elsewhere in a name are fine."""
    assert errors_of(definition(task("."))) == [("steps[0].key", "INVALID_VALUE")]
    assert errors_of(definition(task(".."))) == [("steps[0].key", "INVALID_VALUE")]
    for name in (".", ".."):
        assert errors_of({**definition(task("charge")), "name": name}) == [("name", "INVALID_VALUE")]
    doc = {**definition(task("...")), "name": "..."}
    assert list(validate(doc).compiled) == ["..."]
    assert list(validate(definition(task(".a."))).compiled) == [".a."]


def test_an_expression_naming_a_step_key_that_must_be_quoted_says_how_to_write_it() -> None:
    doc = definition(timer("a.b"), timer("1st"), task(input={"x": "$.steps.a.b.output", "y": "$.steps.1st.output.v",
                                                           "z": '$.steps["a.b"].output'}, after=["a.b", "1st"]))
    with pytest.raises(DefinitionError) as caught:
        validate(doc)
    messages = {e.field: e.message for e in caught.value.errors}
    assert set(messages) == {"steps[2].input.x", "steps[2].input.y"}
    assert messages["steps[2].input.x"].endswith('quoted, as in $.steps["a.b"].output')
    assert messages["steps[2].input.y"].endswith('quoted, as in $.steps["1st"].output')


def test_expressions_in_key_and_correlation_fields_are_checked() -> None:
    doc = definition(
        task("a", business_key="$.nope", mutex_key="$.steps.b.output"),
        timer("b"),
        signal("c", correlation="$.input..x"),
        poll("d", final_signal={"name": "n", "payload_version": "1", "correlation": "$.steps.d.output"}),
    )

    assert errors_of(doc) == [
        ("steps[0].business_key", "BAD_EXPRESSION"),
        ("steps[0].mutex_key", "UNKNOWN_STEP_REFERENCE"),
        ("steps[2].correlation", "BAD_EXPRESSION"),
        ("steps[3].final_signal.correlation", "UNKNOWN_STEP_REFERENCE"),
    ]


def test_result_classes_must_not_overlap() -> None:
    doc = definition(poll(result={"pending": ["PENDING"], "success": ["DONE"], "review": ["DONE"]}))

    assert errors_of(doc) == [("steps[0].result.review[0]", "RESULT_CLASS_OVERLAP")]


def test_duplicate_json_keys_are_rejected_with_their_path() -> None:
    raw = '{"name": "a", "steps": [{"retry": {"max_attempts": 1, "max_attempts": 2}}], "name": "b"}'
    expected = [("name", "DUPLICATE_JSON_KEY"), ("steps[0].retry.max_attempts", "DUPLICATE_JSON_KEY")]

    with pytest.raises(DefinitionError) as caught:
        parse_json_strict(raw)

    assert [(e.field, e.code) for e in caught.value.errors] == expected
    assert errors_of(raw.encode("utf-8")) == expected


@pytest.mark.parametrize("raw", [
    '{"name": "a",', '{"a": NaN}', '{"a": Infinity}', '{"a": -Infinity}', '{"a": 1e999}',
    b'{"name": "\xff"}', "",
])
def test_invalid_json(raw: str | bytes) -> None:
    with pytest.raises(DefinitionError) as caught:
        parse_json_strict(raw)

    assert [(e.field, e.code) for e in caught.value.errors] == [("", "INVALID_JSON")]


def test_parse_json_strict_accepts_plain_json() -> None:
    assert parse_json_strict(b'{"a": [1, 2.5, null, "\\u00e9"]}') == {"a": [1, 2.5, None, "\u00e9"]}


# Several problems at once


def test_every_problem_is_reported_at_once() -> None:
    doc = {
        "name": "bad name",
        "steps": [
            task("a", priority="high", retry={"max_attempts": 0}, colour="red"),
            timer("b", after=["zz"], delay_ms=0),
            poll("c", result={"pending": ["X"], "success": ["X"]}, input={"v": "$.steps.b.output"}),
            {"key": "a", "type": "WAIT"},
        ],
    }

    with pytest.raises(DefinitionError) as caught:
        validate(doc)

    found = [(error.field, error.code) for error in caught.value.errors]
    assert sorted(found) == sorted([
        ("name", "INVALID_VALUE"),
        ("steps[0].colour", "UNKNOWN_FIELD"),
        ("steps[0].priority", "INVALID_TYPE"),
        ("steps[0].retry.max_attempts", "OUT_OF_RANGE"),
        ("steps[1].after[0]", "UNKNOWN_AFTER"),
        ("steps[1].delay_ms", "OUT_OF_RANGE"),
        ("steps[2].input.v", "UNKNOWN_STEP_REFERENCE"),
        ("steps[2].result.success[0]", "RESULT_CLASS_OVERLAP"),
        ("steps[3].key", "DUPLICATE_STEP_KEY"),
        ("steps[3].type", "UNKNOWN_TYPE"),
    ])
    assert all(field in str(caught.value) for field, _ in found)


# Property: the canonical form is a fixed point

STEP_KEYS = st.from_regex(r"(?!\.\.?\Z)[A-Za-z0-9_.][A-Za-z0-9_.-]{0,11}", fullmatch=True)
LITERALS = st.text(max_size=12).filter(lambda text: not text.startswith("$."))
INPUT_EXPRESSIONS = [
    "$.input", "$.input.order_id", '$.input["order id"]', "$.input.items[0]['sku']", "$.input.a-b",
]
INTEGERS = {"delay_ms": 31_536_000_000, "task_timeout_ms": 86_400_000, "interval_ms": 86_400_000,
            "max_rounds": 10_000, "timeout_ms": 31_536_000_000}


def expressions(readable: list[str]) -> st.SearchStrategy[str]:
    paths = st.sampled_from(INPUT_EXPRESSIONS)
    if readable:
        paths |= st.builds(
            lambda key, tail: f'$.steps["{key}"].output{tail}',
            st.sampled_from(readable), st.sampled_from(["", ".id", "[0]", '["a b"]']),
        )
    return paths


def json_values(leaves: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    scalars = (st.none() | st.booleans() | st.integers(-(2**63), 2**63) | LITERALS | leaves
               | st.floats(allow_nan=False, allow_infinity=False))
    return st.recursive(
        scalars,
        lambda children: st.lists(children, max_size=3)
        | st.dictionaries(st.text(max_size=6).filter(lambda key: not key.startswith("-")), children, max_size=3),
        max_leaves=8,
    )


@st.composite
def valid_definitions(draw: st.DrawFn) -> dict[str, Any]:
    keys = draw(st.lists(STEP_KEYS, min_size=1, max_size=5, unique=True))
    ancestors: dict[str, set[str]] = {}
    steps = []
    for position, key in enumerate(keys):
        after = draw(st.lists(st.sampled_from(keys[:position]), unique=True, max_size=3)) if position else []
        ancestors[key] = set(after).union(*(ancestors[name] for name in after))
        expression = expressions(sorted(ancestors[key]))
        step_type = draw(st.sampled_from(["TIMER", "POLL", "SIGNAL", "TASK"]))
        step: dict[str, Any] = {"key": key, "type": step_type}

        def maybe(name: str, strategy: st.SearchStrategy[Any], target: dict[str, Any] = step) -> None:
            """Sets an optional member, or leaves it to its default."""
            if draw(st.booleans()):
                target[name] = draw(strategy)

        if after or draw(st.booleans()):
            step["after"] = after
        if step_type == "TIMER":
            step["delay_ms"] = draw(st.integers(1, INTEGERS["delay_ms"]))
        if step_type == "SIGNAL":
            step["timeout_ms"] = draw(st.integers(1, INTEGERS["timeout_ms"]))
            contract = {"name": draw(st.sampled_from(["approval.decided", "a b"])), "payload_version": "1"}
            if draw(st.booleans()):
                contract["payload_type"] = draw(st.sampled_from(["object", "array", "null", "any"]))
            step["signal"] = contract
            step["correlation"] = draw(expression | LITERALS.filter(bool))
        if step_type in ("POLL", "TASK"):
            step.update(queue=draw(st.sampled_from(["payments", "q:2"])), handler="payments.check",
                        handler_version=draw(st.sampled_from(["1", "v 2"])))
            maybe("input", json_values(expression))
            maybe("task_timeout_ms", st.integers(1, INTEGERS["task_timeout_ms"]))
            maybe("priority", st.integers(-1000, 1000))
            maybe("retry", st.fixed_dictionaries({}, optional={
                "max_attempts": st.integers(1, 100),
                "initial_backoff_ms": st.integers(0, 60_000),
                "backoff_coefficient": st.floats(1.0, 10.0) | st.integers(1, 10),
                "max_backoff_ms": st.integers(60_000, 86_400_000),
            }))
            maybe("business_key", st.none() | expression | LITERALS.filter(bool))
            maybe("mutex_key", st.none() | expression | LITERALS.filter(bool))
        if step_type == "POLL":
            for name in ("interval_ms", "max_rounds", "timeout_ms"):
                step[name] = draw(st.integers(1, INTEGERS[name]))
            statuses = draw(st.permutations(["PENDING", "WAIT", "DONE", "PAID", "CHECK", "MANUAL"]))
            step["result"] = {"pending": statuses[:2], "success": statuses[2:4]}
            maybe("review", st.just(statuses[4:]), step["result"])
            maybe("final_signal", st.none() | st.fixed_dictionaries({
                "name": st.just("payment.final"), "payload_version": st.just("1"),
                "correlation": expression | LITERALS.filter(bool),
            }))
        steps.append(step)
    return {"name": draw(st.from_regex(r"(?!\.\.?\Z)[A-Za-z0-9_.:-]{1,20}", fullmatch=True)), "steps": steps}


@settings(max_examples=200, deadline=None)
@given(valid_definitions())
def test_canonical_json_validates_to_the_same_digest(doc: dict[str, Any]) -> None:
    first = validate(copy.deepcopy(doc))
    again = validate(json.loads(first.canonical_json))

    assert again.digest == first.digest
    assert again.canonical_json == first.canonical_json
    assert again.compiled_json == first.compiled_json
    assert validate(json.dumps(reversed_keys(doc), indent=1)).digest == first.digest
