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
