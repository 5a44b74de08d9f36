"""The model's own tool-call formats: parse a reply into calls, and render the tools into a system
prompt for a chat template that has no tool support.

`hermes` (Hermes 2 Pro, Qwen2.5, Qwen3): each call is a JSON object
`{"name": ..., "arguments": {...}}` inside `<tool_call>...</tool_call>`; a reply may hold several.
As vLLM's hermes parser, a last `<tool_call>` left open at the end of the reply counts as closed.

`llama3` (Llama 3.1 / 3.2 JSON tool calling): the reply itself is the call, a JSON object
`{"name": ..., "parameters": {...}}` (`"arguments"` is taken too), optionally after
`<|python_tag|>`; several calls are separated by `;`. A reply that does not start with `{` (after
that tag) is a final answer.

A reply with no call is a final answer. A reply that tries a call and gets it wrong (JSON that
does not parse, no `name`, arguments that are not an object) raises `ToolCallError`, whose message
goes back to the model; the env counts it as an invalid action. Nothing here evaluates model text:
calls are read with `json.loads` only, and whatever `json` raises on a reply becomes a
`ToolCallError` too: the `RecursionError` of a call nested about 1,000 brackets deep, the
`ValueError` of an integer over 4,300 digits (Python's int-string limit). A call that parses but
nests deeper than `MAX_DEPTH` levels is refused as well, so nothing later (the schema check, a
tool, the trajectory's `json.dumps`) meets a depth near the recursion limit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

PARSERS = ("hermes", "llama3")
MAX_DEPTH = 64  # nesting levels of one call (the call object itself is level 1)


class ToolCallError(ValueError):
    """A reply tried to call a tool and the call is malformed."""


@dataclass(frozen=True)
class Call:
    """One tool call as the model wrote it: the tool's name and the arguments object."""

    name: str
    arguments: dict[str, Any]


def check_parser(name: str) -> None:
    if name not in PARSERS:
        raise ValueError(f"parser must be one of {', '.join(PARSERS)}, got {name!r}")


def depth(value: Any) -> int:
    """Nesting depth of a parsed JSON value (a scalar 0, `[]` 1, `{"a": [1]}` 2), without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            level += 1
            deepest = max(deepest, level)
            stack.extend((v, level) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def _unreadable(err: BaseException) -> str:
    """Why `json` refused a text: its own message, or the exception's type for the rest."""
    if isinstance(err, json.JSONDecodeError):
        return f"{err.msg} at character {err.pos}"
    if isinstance(err, RecursionError):
        return "nested too deep to read"
    return f"{type(err).__name__}: {str(err).split(':')[0]}"  # the int limit's advice to call Python is not the model's


def _call(obj: Any, args_keys: tuple[str, ...], where: str) -> Call:
    if not isinstance(obj, dict):
        raise ToolCallError(f"{where} is not a JSON object")
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        raise ToolCallError(f'{where} has no "name"')
    key = next((k for k in args_keys if k in obj), None)
    arguments = {} if key is None else obj[key]
    if isinstance(arguments, str):  # some models write the arguments as a JSON string, as OpenAI's API does
        try:
            arguments = json.loads(arguments)
        except Exception:  # noqa: BLE001 - whatever json raises on model text (module docstring)
            raise ToolCallError(f'the "{key}" of {where} is a string that is not a JSON object') from None
    if not isinstance(arguments, dict):
        raise ToolCallError(f'the "{key}" of {where} is not a JSON object')
    if depth(arguments) + 1 > MAX_DEPTH:
        raise ToolCallError(f"{where} is nested more than {MAX_DEPTH} levels deep")
    return Call(name, arguments)


def _json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except Exception as err:  # noqa: BLE001 - JSONDecodeError, RecursionError, the int-digit ValueError
        raise ToolCallError(f"{where} is not valid JSON ({_unreadable(err)})") from None


def parse_hermes(text: str) -> list[Call]:
    """Calls in `<tool_call>{json}</tool_call>` blocks; [] when there is none."""
    calls, pos = [], 0
    while (start := text.find("<tool_call>", pos)) >= 0:
        end = text.find("</tool_call>", start)
        body = text[start + len("<tool_call>"): end if end >= 0 else len(text)]
        where = f"tool call {len(calls) + 1}"
        calls.append(_call(_json(body.strip(), where), ("arguments",), where))
        if end < 0:
            break
        pos = end + len("</tool_call>")
    if not calls and "</tool_call>" in text:
        raise ToolCallError("</tool_call> without <tool_call>")
    return calls


def parse_llama3(text: str) -> list[Call]:
    """The reply as JSON call objects separated by `;`; [] when it does not start with `{`."""
    body = text.strip().removeprefix("<|python_tag|>").strip()
    if not body.startswith("{"):
        return []
    decoder, calls, pos = json.JSONDecoder(), [], 0
    while pos < len(body):
        where = f"tool call {len(calls) + 1}"
        try:
            obj, pos = decoder.raw_decode(body, pos)
        except Exception as err:  # noqa: BLE001 - as _json
            raise ToolCallError(f"{where} is not valid JSON ({_unreadable(err)})") from None
        calls.append(_call(obj, ("parameters", "arguments"), where))
        rest = body[pos:].lstrip()
        if not rest:
            break
        if not rest.startswith(";"):
            raise ToolCallError(f"text after {where}: calls are separated by ';' and nothing else follows them")
        pos = len(body) - len(rest) + 1
        while pos < len(body) and body[pos].isspace():
            pos += 1
    return calls


_PARSE = {"hermes": parse_hermes, "llama3": parse_llama3}


def parse_calls(text: str, parser: str) -> list[Call]:
    """The calls in a reply (the text after any reasoning); [] for a final answer. Raises
    `ToolCallError` for a malformed call."""
    return _PARSE[parser](text)


def call_text(call: Call, parser: str) -> str:
    """A call written in the parser's format (what a model following the format writes)."""
    if parser == "hermes":
        return f'<tool_call>\n{json.dumps({"name": call.name, "arguments": call.arguments})}\n</tool_call>'
    return json.dumps({"name": call.name, "parameters": call.arguments})


def tool_prompt(schemas: list[dict], parser: str) -> str:
    """The tools and the call format as system-prompt text, for a chat template that does not
    render `tools=` (the built-in SmolLM2's): Qwen2.5's tool preamble for `hermes`, Llama 3.1's
    for `llama3`, then one sentence on the final answer."""
    listed = "\n".join(json.dumps(s, ensure_ascii=False) for s in schemas)
    final = "When you know the answer, reply with the answer alone, without a function call."
    if parser == "hermes":
        return ("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
                f"{listed}\n</tools>\n\nFor each function call, return a json object with function name and "
                "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
                '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>\n\n' + final)
    return ("Given the following functions, please respond with a JSON for a function call with its proper "
            "arguments that best answers the given prompt.\n\n"
            'Respond in the format {"name": function name, "parameters": dictionary of argument name and its '
            "value}. Do not use variables.\n\n" + "\n\n".join(json.dumps(s, indent=4, ensure_ascii=False) for s in schemas)
            + "\n\n" + final)
