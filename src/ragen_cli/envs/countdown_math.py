"""Countdown arithmetic: a safe equation checker (no eval) and a puzzle generator.

Scoring follows TinyZero's countdown `compute_score` as used by the reference: 1.0 when the
equation uses every given number exactly once and equals the target, `format_score` (0.1) for
an arithmetic expression that is wrong, 0 when the text is not an arithmetic expression."""

from __future__ import annotations

import ast
from fractions import Fraction

import numpy as np

MAX_EXPR_CHARS = 200
_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
        ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b}


class NotAnEquation(ValueError):
    """The text is not an arithmetic expression over integers with + - * / ( )."""


def _walk(node: ast.AST, numbers: list[int]) -> Fraction:
    if isinstance(node, ast.Expression):
        return _walk(node.body, numbers)
    if isinstance(node, ast.Constant) and type(node.value) is int:
        numbers.append(node.value)
        return Fraction(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _walk(node.left, numbers), _walk(node.right, numbers)
        if isinstance(node.op, ast.Div) and right == 0:
            raise ZeroDivisionError
        return _OPS[type(node.op)](left, right)
    raise NotAnEquation(f"not allowed in an equation: {type(node).__name__}")


def parse_equation(text: str) -> tuple[Fraction | None, list[int]]:
    """'(3 + 5) * 2' -> (Fraction(16), [3, 5, 2]). A trailing '= N' is ignored. The value is
    None on division by zero. Raises `NotAnEquation` for anything else (walks the AST with a
    whitelist of node types; nothing is ever evaluated by Python)."""
    expr = text.strip().split("=")[0].strip() if text.count("=") <= 1 else ""
    if not expr or len(expr) > MAX_EXPR_CHARS or not set(expr) <= set("0123456789+-*/() \t"):
        raise NotAnEquation(f"not an equation: {text[:60]!r}")
    try:
        tree = ast.parse(expr, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise NotAnEquation(f"not an equation: {text[:60]!r}") from None
    numbers: list[int] = []
    try:
        value = _walk(tree, numbers)
    except ZeroDivisionError:
        value = None
    return value, numbers


def score(text: str, numbers: list[int], target: int, format_score: float = 0.1) -> tuple[float, bool]:
    """-> (reward, well_formed). Correct: every number used exactly once and value == target."""
    try:
        value, used = parse_equation(text)
    except NotAnEquation:
        return 0.0, False
    if sorted(used) == sorted(numbers) and value == target:
        return 1.0, True
    return format_score, True


def generate_puzzle(rng: np.random.Generator, count: int, max_number: int,
                    min_target: int, max_target: int) -> tuple[list[int], int, str]:
    """Draw `count` numbers in 1..max_number and combine them in random order with random
    operations (subtraction kept positive, division exact) until the result lies in
    [min_target, max_target]. -> (numbers, target, a solution)."""
    for _ in range(10_000):
        numbers = [int(x) for x in rng.integers(1, max_number + 1, size=count)]
        items = [(Fraction(n), str(n)) for n in numbers]
        while len(items) > 1:
            i, j = (int(k) for k in rng.choice(len(items), size=2, replace=False))
            (a, ea), (b, eb) = items[i], items[j]
            if a < b:
                (a, ea), (b, eb) = (b, eb), (a, ea)
            options = [("+", a + b), ("*", a * b)]
            if a > b:
                options.append(("-", a - b))
            if b > 1 and a % b == 0:
                options.append(("/", a / b))
            op, value = options[int(rng.integers(len(options)))]
            items = [it for k, it in enumerate(items) if k not in (i, j)] + [(value, f"({ea} {op} {eb})")]
        value, expr = items[0]
        if min_target <= value <= max_target:
            return numbers, int(value), expr[1:-1]
    raise RuntimeError("could not generate a countdown puzzle in range; widen the target range")
