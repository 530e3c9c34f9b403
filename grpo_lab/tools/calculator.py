"""The built-in `calculator` tool: arithmetic read from an AST, never `eval` of model text.

Only number literals, + - * / // % ** and parentheses are allowed; anything else (names, calls,
attributes, strings) is an error the model reads. Exponents and operand sizes are bounded, so
"9**9**9" is refused at once instead of running for hours inside the trainer.
"""

from __future__ import annotations

import ast
import operator

MAX_DIGITS = 200  # an operand or result longer than this is refused
MAX_EXPONENT = 1000
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def _check(value: int | float) -> int | float:
    if isinstance(value, int) and len(str(abs(value))) > MAX_DIGITS:
        raise ValueError(f"number longer than {MAX_DIGITS} digits")
    return value


def _value(node: ast.AST) -> int | float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return _check(node.value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_value(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _value(node.left), _value(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ValueError(f"exponent above {MAX_EXPONENT}")
        return _check(_BINARY[type(node.op)](left, right))
    raise ValueError(f"not arithmetic: {type(node).__name__}")


def evaluate(expression: str) -> int | float:
    """The value of an arithmetic expression.

    >>> evaluate("12345+67890"), evaluate("(2+3)*-4"), evaluate("7/2")
    (80235, -20, 3.5)
    >>> evaluate("__import__('os')")
    Traceback (most recent call last):
    ...
    ValueError: not arithmetic: Call
    """
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        raise ValueError(f"not an arithmetic expression: {expression[:60]!r}") from None
    return _value(tree.body)


def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression with + - * / // % ** and parentheses.

    Args:
        expression: the expression, for example "12345+67890".

    >>> calculator("12345+67890"), calculator("6/4"), calculator("8/4")
    ('80235', '1.5', '2')
    """
    value = evaluate(expression)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)  # "2", not "2.0": the character model writes whole numbers
    return str(value) if isinstance(value, int) else f"{value:.12g}"
