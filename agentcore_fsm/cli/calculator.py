"""The ``calculator`` tool of ``agentcore-fsm demo`` and ``agentcore-fsm chat``: exact arithmetic,
never ``eval``.

:func:`calculate` parses the expression with :mod:`ast` and walks only number literals, the
operators ``+ - * / // % **`` and parentheses; anything else (names, calls, attributes,
subscripts, strings, ``^``, ...) is refused with :class:`CalculatorError`. It computes in
:class:`~decimal.Decimal` with 28 significant digits, reading each literal from its source
text, so ``0.1 + 0.2`` is exactly ``0.3``. Sizes are bounded so that no expression can make the
tool spin or flood the model's context: the expression is at most :data:`MAX_EXPRESSION`
characters, an exponent at most :data:`MAX_EXPONENT` in size, and a result too far from 1 to
write out in :data:`MAX_PLAIN_DIGITS` digits is shown in scientific notation
(:func:`format_number`).

:data:`calculator` is the tool: a function decorated with
:func:`~agentcore_fsm.core.function_tools.tool`, whose parameters make the pydantic model
:data:`CalculatorArgs`; :func:`calculator_tool` gives it another description or label. A
refused expression becomes an error result the model reads.
"""

from __future__ import annotations

import ast
import dataclasses
import decimal
import operator
from collections.abc import Callable
from decimal import Decimal

from pydantic import BaseModel

from agentcore_fsm.core.function_tools import FunctionTool, tool
from agentcore_fsm.core.messages import TextContent
from agentcore_fsm.core.tools import AgentToolResult

__all__ = [
    "DESCRIPTION",
    "MAX_EXPONENT",
    "MAX_EXPRESSION",
    "MAX_PLAIN_DIGITS",
    "PRECISION",
    "CalculatorArgs",
    "CalculatorError",
    "calculate",
    "calculator",
    "calculator_tool",
    "format_number",
]

MAX_EXPRESSION = 200
"""The longest expression accepted, in characters."""
MAX_EXPONENT = 100
"""The largest exponent accepted (in absolute value) on the right of ``**``."""
PRECISION = 28
"""Significant digits of every intermediate and final result."""
MAX_PLAIN_DIGITS = 1000
"""Results of a magnitude up to ``10**MAX_PLAIN_DIGITS`` (and down to its inverse) are written
out in plain notation; others in scientific notation (``1E+1200``)."""


class CalculatorError(ValueError):
    """The expression is not plain arithmetic, or cannot be computed."""


_BINARY: dict[type[ast.operator], Callable[[Decimal, Decimal], Decimal]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_DIVISIONS = (ast.Div, ast.FloorDiv, ast.Mod)
_UNARY: dict[type[ast.unaryop], Callable[[Decimal], Decimal]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}


def calculate(expression: str) -> Decimal:
    """Evaluate ``expression`` (numbers, ``+ - * / // % **``, parentheses) exactly in decimal.

    The text is parsed with :mod:`ast` and only those node types are walked; anything else
    (names, calls, attributes, ...) raises :class:`CalculatorError`, as do a division by zero
    (by ``/``, ``//``, ``%``, or ``0`` to a negative power), an exponent larger than
    :data:`MAX_EXPONENT` and a result beyond what :class:`~decimal.Decimal` can hold. Number
    literals are read from their source text, so ``0.1 + 0.2`` is exactly ``0.3``. ``//`` and
    ``%`` follow :class:`~decimal.Decimal` (they truncate toward zero: ``-7 // 2 == -3``), and
    results carry :data:`PRECISION` significant digits.
    """
    if len(expression) > MAX_EXPRESSION:
        raise CalculatorError(f"expression longer than {MAX_EXPRESSION} characters")
    source = expression.strip()
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise CalculatorError(f"not an arithmetic expression: {exc.msg}") from None

    def walk(node: ast.AST) -> Decimal:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            text = (ast.get_source_segment(source, node) or "").replace("_", "")
            try:
                return Decimal(text)
            except decimal.InvalidOperation:  # e.g. 0x1F: take the value Python read
                return Decimal(repr(node.value))
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
                raise CalculatorError(f"exponent larger than {MAX_EXPONENT}")
            if isinstance(node.op, _DIVISIONS) and right == 0:
                raise CalculatorError("division by zero")
            if isinstance(node.op, ast.Pow) and left == 0 and right < 0:  # 1 / 0 ** n
                raise CalculatorError("division by zero")
            return _BINARY[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](walk(node.operand))
        raise CalculatorError(f"unsupported element: {ast.dump(node)[:40]}")

    traps = [decimal.DivisionByZero, decimal.InvalidOperation, decimal.Overflow]
    try:
        with decimal.localcontext(decimal.Context(prec=PRECISION, traps=traps)):
            return walk(tree)
    except (decimal.DivisionByZero, ZeroDivisionError):
        raise CalculatorError("division by zero") from None
    except decimal.DecimalException as exc:
        raise CalculatorError(f"cannot compute: {type(exc).__name__}") from None


def format_number(value: Decimal) -> str:
    """The result as the model reads it: plain notation, trailing zeros dropped (``4490.100``
    -> ``4490.1``), rounded to :data:`PRECISION` digits; scientific notation (``1E+1200``) for a
    magnitude that would take more than :data:`MAX_PLAIN_DIGITS` digits to write out."""
    # the widest exponent range, so that any literal fits (1E+999999999 is a valid expression)
    wide = decimal.Context(prec=PRECISION, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
    value = value.normalize(wide)
    if value.is_finite() and value and abs(value.adjusted()) > MAX_PLAIN_DIGITS:
        return str(value)
    return format(value, "f")


@tool
async def calculator(expression: str) -> AgentToolResult:
    """Evaluate an arithmetic expression exactly (no variables, no functions).

    Args:
        expression: Arithmetic, e.g. '(2 + 3) * 1.2'
    """
    value = calculate(expression)  # a CalculatorError becomes an error result
    return AgentToolResult(
        content=[TextContent(text=format_number(value))], details={"expression": expression}
    )


DESCRIPTION = calculator.description
"""The tool's default description for the model (the first line of :data:`calculator`'s
docstring)."""
CalculatorArgs: type[BaseModel] = calculator.args_model
"""The calculator's parameters, the pydantic model made from :data:`calculator`'s signature:
``{"expression": str}``, nothing else (the tool receives an instance)."""


def calculator_tool(*, description: str = DESCRIPTION, label: str = "") -> FunctionTool:
    """The ``calculator`` tool: :func:`calculate` on ``{"expression": "..."}``, answering with
    :func:`format_number` of the result (and the expression in ``details``). ``description`` is
    what the model is told about it; ``label`` is its name for people (default: none)."""
    return dataclasses.replace(calculator, description=description, label=label)
