"""The spec models' descriptions come from field_docs.json, which must be their docstrings."""

from __future__ import annotations

import pydantic

from peagle_deploy.spec import models
from peagle_deploy.spec.field_docs import DOCS_FILE, docs_json, from_source


def _spec_models() -> list[type[pydantic.BaseModel]]:
    return [
        value
        for value in vars(models).values()
        if isinstance(value, type)
        and issubclass(value, pydantic.BaseModel)
        and value.__module__ == models.__name__
        and value.model_fields
    ]


def test_the_docs_file_is_the_models_docstrings() -> None:
    """After editing a docstring in spec/models.py: `python -m peagle_deploy.spec.flags`."""
    assert DOCS_FILE.read_text(encoding="utf-8") == docs_json()


def test_each_description_is_what_pydantic_reads_from_the_source() -> None:
    """The same descriptions as `use_attribute_docstrings=True` gives, field for field
    (pydantic's own reader, on each model's source)."""
    checked = 0
    for model in _spec_models():
        pydantic_docs = _pydantic_docstrings(model)
        for name, info in model.model_fields.items():
            assert info.description == pydantic_docs.get(name), f"{model.__name__}.{name}"
            checked += 1
    assert checked > 60


def _pydantic_docstrings(model: type[pydantic.BaseModel]) -> dict[str, str]:
    from pydantic._internal._docs_extraction import extract_docstrings_from_cls

    return extract_docstrings_from_cls(model, use_inspect=True)


def test_a_field_docstring_is_the_string_right_after_the_field() -> None:
    source = '''
class A:
    """Class doc, not a field's."""

    x: int = 1
    """X's doc,
       on two lines."""
    y: int = 2
    z = 3
    """Not a field's: z has no annotation."""

    def f(self) -> None:
        w: int = 4
        """Not a field's: inside a function."""
'''
    assert from_source(source) == {"A": {"x": "X's doc,\non two lines."}}
