"""Expressions resolved at activation (R-7): the instance's input and each output a step's templates name are handed
to the templates one document at a time, each output once (_weave_template_resolve); the frozen values are what one
context of all of them would give."""

from __future__ import annotations

import json

from procedures import pulse
from tests.sql.test_pulse import claim, task_step
from tests.support.signals import send, signal_step

OUTPUTS = {"a1": {"v": "x1"}, "a10": {"v": 10, "list": [7, 8]}, "a.b": {"v": {"deep": True}}}


def test_R7_a_join_freezes_what_each_of_its_expressions_finds_in_the_input_and_in_each_output(world, orch):
    """Keys that are prefixes of one another (a1, a10), a key that must be quoted, an item of an array and an item of
    a value that is no array, a whole output, and the keys of the task, each from its own document."""
    join = task_step("join", after=list(OUTPUTS), business_key="$.steps.a10.output.v", mutex_key="$.input.order_id",
                     input={"one": "$.steps.a1.output.v", "ten": "$.steps.a10.output.v",
                            "dotted": '$.steps["a.b"].output.v', "first": "$.steps.a10.output.list[1]",
                            "lax": "$.steps.a1.output.v[0]", "order": "$.input.order_id",
                            "whole": "$.steps.a1.output", "literal": "steps a1 and a10, not read",
                            "nested": {"again": "$.steps.a10.output.v"}})
    world.publish({"name": "joined", "steps": [task_step(key) for key in OUTPUTS] + [join]})
    wf = world.start("joined", {"order_id": "o-1"})
    orch.drain()
    for _ in OUTPUTS:
        (task,) = claim(world)
        pulse.attempt_complete(world.db.conn, task["attempt_id"], "w1", OUTPUTS[task["step_key"]])
    orch.drain()
    row = world.db.row("SELECT input, business_key, mutex_key FROM pulse_tasks WHERE instance_id = %s "
                       "AND step_key = 'join'", world.internal_id(wf))
    assert json.loads(row["input"]) == {
        "one": "x1", "ten": 10, "dotted": {"deep": True}, "first": 8, "lax": None, "order": "o-1",
        "whole": {"v": "x1"}, "literal": "steps a1 and a10, not read", "nested": {"again": 10}}
    assert (row["business_key"], row["mutex_key"]) == ("10", "o-1")


def test_R7_an_expression_finds_a_key_that_its_document_spells_with_escapes_of_characters_that_need_none(world, orch):
    """JSON is the same content however its strings are escaped, and the engine treats it so (a start replayed with
    "\\u0061mount" for "amount" is the same request), but MariaDB's JSON_EXTRACT finds a key only as the document
    spells it. An input written by an encoder that escapes "/" (PHP's json_encode) or every character, or a mix,
    froze null where the expression named the key, with no error: a charge task ran with a null amount, and a
    correlation read that way sent the instance to review. Each is found through its characters now, in the input,
    in an output (a signal payload, kept as it was sent) and in a correlation; a key that is not there stays null."""
    output = "$.steps.approval.output"
    world.publish({"name": "escaped-keys", "steps": [
        signal_step(correlation='$.input["order_id"]'),
        task_step("charge", after=["approval"], input={
            "amount": "$.input.amount", "callback": '$.input["callback/url"]', "cafe": '$.input["café"]',
            "items": "$.input.items[1]", "ref": f'{output}["psp/ref"]', "who": f"{output}.who",
            "none": "$.input.missing", "none_out": f"{output}.missing"})]})
    wf = world.start("escaped-keys", input_json='{"order\\u005fid": "o-1", "\\u0061mount": 100, '
                     '"callback\\/url": "https:\\/\\/shop.example\\/cb", "\\u0063af\\u00e9": 1, '
                     '"\\u0069tems": [1, 2]}')
    assert world.step(wf, "approval")["status"] == "ACTIVE"  # its correlation resolved
    send(world, wf, payload='{"psp\\/ref": "ch_1", "\\u0077ho": "desk"}')
    orch.drain()
    task = world.db.scalar("SELECT input FROM pulse_tasks WHERE instance_id = %s", world.internal_id(wf))
    assert json.loads(task) == {"amount": 100, "callback": "https://shop.example/cb", "cafe": 1, "items": 2,
                                "ref": "ch_1", "who": "desk", "none": None, "none_out": None}
    assert world.instance(wf)["status"] == "RUNNING"
