"""The spec models' field docstrings, as data the models read at import.

A field's docstring (the string under it in spec/models.py) is its description: the
JSON-schema `description`, the CLI help and the SDK's docs. pydantic can read them
itself (`use_attribute_docstrings`), but it tokenizes each class's source to do so,
which cost every command that loads the models about 40 ms. `field_docs.json` holds the
same text, written from the source by `python -m peagle_deploy.spec.flags` (with the
flag table); `describe` applies it as pydantic would, and a test fails when the file
differs from the source.
"""

from __future__ import annotations

import ast
import inspect
import json
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import BaseModel

DOCS_FILE = Path(__file__).with_name("field_docs.json")
SOURCE_FILE = Path(__file__).with_name("models.py")


def from_source(source: str) -> dict[str, dict[str, str]]:
    """Class name -> field name -> docstring, for the top-level classes of `source`.

    A docstring is a string statement right after an annotated field, cleaned with
    `inspect.cleandoc`: what `use_attribute_docstrings` reads.
    """
    out: dict[str, dict[str, str]] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and (docs := _class_docs(node)):
            out[node.name] = docs
    return out


def _class_docs(node: ast.ClassDef) -> dict[str, str]:
    docs: dict[str, str] = {}
    for before, stmt in zip(node.body, node.body[1:], strict=False):
        if (
            isinstance(before, ast.AnnAssign)
            and isinstance(before.target, ast.Name)
            and isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str)
        ):
            docs[before.target.id] = inspect.cleandoc(stmt.value.value)
    return docs


def docs_json() -> str:
    """`field_docs.json`, written from spec/models.py."""
    docs = from_source(SOURCE_FILE.read_text(encoding="utf-8"))
    return json.dumps(docs, indent=1, ensure_ascii=False) + "\n"


@cache
def _docs() -> dict[str, dict[str, str]]:
    docs: dict[str, dict[str, str]] = json.loads(DOCS_FILE.read_text(encoding="utf-8"))
    return docs


def describe(model: type[BaseModel]) -> None:
    """Give each field of `model` that has no description its docstring; called when
    the class is created, before its schema is built (the models defer the build)."""
    docs = _docs().get(model.__name__, {})
    for name, info in model.__pydantic_fields__.items():
        if info.description is None and name in docs:
            info.description = docs[name]
