"""The option tables of the data adapters in docs/envs.md, generated from their config
dataclasses (one definition: the field, its default, the string under it in the class body).
`python scripts/gen_docs.py` rewrites each block between `<!-- options: NAME -->` and
`<!-- /options -->`; tests/test_docs.py fails when a block is stale."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import re
import textwrap

ADAPTERS = ("dataset", "tools", "agent")
_BLOCK = re.compile(r"(<!-- options: (\w+) -->\n).*?(<!-- /options -->)", re.S)


def field_help(cls: type) -> dict[str, str]:
    """Each field's help string, from the class and its bases (a subclass's wins)."""
    docs: dict[str, str] = {}
    for klass in reversed([k for k in cls.__mro__ if dataclasses.is_dataclass(k)]):
        try:
            body = ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0].body
        except (OSError, TypeError, SyntaxError, IndexError):
            continue
        for node, nxt in zip(body, body[1:]):
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(nxt, ast.Expr)
                    and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str)):
                docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def _default(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        value = f.default_factory()  # type: ignore[misc]
    else:
        return "required"
    return "required" if value == "" and f.name in ("path", "entry") else f"`{json.dumps(value)}`"


def options_table(name: str) -> str:
    """The markdown table of env `name`'s config fields."""
    from ragen_cli.envs.registry import resolve

    cls = resolve(name)[0].config_class
    docs = field_help(cls)
    rows = [f"| `{f.name}` | {_default(f)} | {docs.get(f.name, '').replace('|', chr(92) + '|')} |"
            for f in dataclasses.fields(cls)]
    return "| option | default | meaning |\n|---|---|---|\n" + "\n".join(rows) + "\n"


def update(text: str) -> str:
    """`text` (docs/envs.md) with every options block regenerated."""
    return _BLOCK.sub(lambda m: m.group(1) + options_table(m.group(2)) + m.group(3), text)
