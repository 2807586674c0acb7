"""Field docstrings of dataclasses: the string literal under each field, as in our params and configs."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
from functools import lru_cache


@lru_cache(maxsize=None)
def field_docs(cls: type) -> dict[str, str]:
    """{field name: its docstring} for a dataclass whose fields carry a string literal below them."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        try:
            node = ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0]
        except (OSError, TypeError, IndexError, SyntaxError):
            continue
        last = None
        for stmt in getattr(node, "body", []):
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                last = stmt.target.id
            elif last and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                docs[last] = " ".join(str(stmt.value.value).split())
                last = None
            else:
                last = None
    return docs


def describe(params) -> list[tuple[str, str, str]]:
    """(name, value, docstring) for each field of a dataclass instance or class."""
    cls = params if isinstance(params, type) else type(params)
    docs = field_docs(cls)
    value = (lambda f: getattr(params, f.name)) if not isinstance(params, type) else (lambda f: f.default)
    return [(f.name, repr(value(f)), docs.get(f.name, "")) for f in dataclasses.fields(cls)]
