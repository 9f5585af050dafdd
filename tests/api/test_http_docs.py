"""docs/http-api.md is generated from the OpenAPI document and kept current (08-quality: the HTTP reference
comes from the OpenAPI document)."""

from __future__ import annotations

from api import docs
from api.openapi import document


def test_http_reference_is_generated_from_the_current_openapi_document():
    assert docs.TARGET.read_text() == docs.render(), "run: python -m api.docs"


def test_http_reference_documents_every_operation_with_its_statuses():
    text = docs.render()
    for path, item in document()["paths"].items():
        for method, op in item.items():
            heading = f"### `{method.upper()} {path}`"
            assert heading in text, f"{heading} is missing"
            section = text.split(heading, 1)[1].split("\n### ", 1)[0]
            for status in op["responses"]:
                assert f"\n| {status} |" in section, f"{method.upper()} {path}: status {status} is missing"


def test_specified_endpoints_leave_the_pending_section_once_the_document_describes_them():
    doc = document()
    method, path, *_ = docs.SPECIFIED[0]
    pending = docs.render(doc).split("## Specified, not yet", 1)
    if len(pending) == 2:
        assert f"### `{method.upper()} {path}`" in pending[1] or path in doc["paths"]
    doc["paths"][path.replace("{workflow_id}", "{id}")] = {method: {
        "summary": "Described now", "description": "Scope: `workflows:signal`.", "parameters": [],
        "responses": {"201": {"description": "receipt"}}}}
    rendered = docs.render(doc)
    tail = rendered.split("## Specified, not yet", 1)
    assert len(tail) == 1 or f"### `{method.upper()} {path}`" not in tail[1]
    assert f"### `{method.upper()} {path.replace('{workflow_id}', '{id}')}`" in rendered
