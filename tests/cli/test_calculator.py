"""The calculator shared by ``agentcore-fsm demo`` and ``agentcore-fsm chat``: arithmetic parsed
with ``ast`` and computed exactly in ``Decimal``, never ``eval``."""

from __future__ import annotations

import re
from decimal import Decimal

import pydantic
import pytest

from agentcore_fsm import TextContent
from agentcore_fsm.cli.calculator import (
    MAX_EXPONENT,
    MAX_EXPRESSION,
    CalculatorArgs,
    CalculatorError,
    calculate,
    calculator_tool,
    format_number,
)
from agentcore_fsm.core.tools import ToolCallRejected, validate_arguments

# --- what it computes -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("2 + 3", "5"),
        ("(2 + 3) * 4 - 6 / 3", "18"),
        ("2 ** 10", "1024"),
        ("7 % 3", "1"),
        ("1e3 + 0.5", "1000.5"),
        ("1249.50 + 380.25 + 2112.00", "3741.75"),
        ("(1249.50 + 380.25 + 2112.00) * 1.2", "4490.1"),
        ("-2 ** 3 + 7 // 2 - 7 % 4", "-8"),
        ("1_000 / 8", "125"),
        ("+3", "3"),
        ("  4 * 2  ", "8"),
        ("0x10 + 0b1", "17"),
        ("-7 // 2", "-3"),  # Decimal truncates toward zero
        ("-7 % 2", "-1"),
        ("2 ** -2", "0.25"),
        ("4 ** 0.5", "2"),
    ],
)
def test_computes_arithmetic(expression: str, value: str) -> None:
    result = calculate(expression)
    assert isinstance(result, Decimal)
    assert result == Decimal(value)


def test_computes_in_decimal_not_binary_floating_point() -> None:
    assert calculate("0.1 + 0.2") == Decimal("0.3")  # a float sum is 0.30000000000000004
    assert calculate("1.1 * 3") == Decimal("3.3")  # 3.3000000000000003 in floats
    assert str(calculate("1 / 3")) == "0." + "3" * 28  # 28 significant digits
    assert calculate("10 ** 20 + 1") == Decimal("100000000000000000001")  # exact in 28 digits
    assert format_number(calculate("0.1 + 0.2")) == "0.3"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("4490.100", "4490.1"),
        ("1E+2", "100"),
        ("0.000", "0"),
        ("-12.50", "-12.5"),
        ("1E+1000", "1" + "0" * 1000),  # written out up to MAX_PLAIN_DIGITS
        ("1E+1001", "1E+1001"),  # then in scientific notation
        ("1.5E-1200", "1.5E-1200"),
        ("1E+999999999", "1E+999999999"),  # beyond the default context's range: no error
    ],
)
def test_format_number(value: str, text: str) -> None:
    assert format_number(Decimal(value)) == text


def test_results_too_long_to_write_out_are_shown_in_scientific_notation() -> None:
    assert format_number(calculate("(10 ** 100) ** 11")) == "1E+1100"
    assert format_number(calculate("(10 ** -100) ** 11")) == "1E-1100"


# --- what it refuses ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expression",
    [
        "x + 1",  # a name
        "pi * 2",  # no constants either
        "True + 1",  # a bool is not a number here
        "abs(-1)",  # a call
        "sqrt(16)",
        "sqrt(x=4)",
        "__import__('os').system('true')",
        "(1).real",  # an attribute
        "().__class__",
        "[1, 2][0]",  # a subscript
        "'a' * 3",  # a string
        "lambda: 1",
        "1 if 1 else 2",
        "2 ^ 10",  # not a power: refused, not read as **
        "1j * 2",  # complex
        "1 < 2",
    ],
)
def test_refuses_what_is_not_arithmetic(expression: str) -> None:
    with pytest.raises(CalculatorError, match=r"^unsupported element: "):
        calculate(expression)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("2 ** 1000", f"exponent larger than {MAX_EXPONENT}"),
        (f"2 ** {MAX_EXPONENT + 1}", f"exponent larger than {MAX_EXPONENT}"),
        (f"2 ** -{MAX_EXPONENT + 1}", f"exponent larger than {MAX_EXPONENT}"),
        ("9 ** 9 ** 9", f"exponent larger than {MAX_EXPONENT}"),
        ("((10 ** 100) ** 100) ** 100", "cannot compute: Overflow"),
        ("(-8) ** 0.5", "cannot compute: InvalidOperation"),
    ],
)
def test_refuses_huge_exponents_and_what_cannot_be_computed(expression: str, message: str) -> None:
    with pytest.raises(CalculatorError, match=re.escape(message)):
        calculate(expression)


def test_the_largest_exponent_is_accepted() -> None:
    assert calculate(f"10 ** {MAX_EXPONENT}") == Decimal(10) ** MAX_EXPONENT


@pytest.mark.parametrize(
    "expression", ["1 / 0", "1 // 0", "1 % 0", "0 / 0", "1 / (2 - 2)", "0 ** -1"]
)
def test_division_by_zero_is_a_clear_error(expression: str) -> None:
    with pytest.raises(CalculatorError) as info:
        calculate(expression)
    assert str(info.value) == "division by zero"


@pytest.mark.parametrize("expression", ["", "   ", "1 +", "(1", "1 2"])
def test_refuses_what_does_not_parse(expression: str) -> None:
    with pytest.raises(CalculatorError, match=r"^not an arithmetic expression"):
        calculate(expression)


def test_refuses_long_expressions() -> None:
    longest = "1+" * (MAX_EXPRESSION // 2 - 1) + "1"
    assert len(longest) == MAX_EXPRESSION - 1
    assert calculate(longest) == MAX_EXPRESSION // 2
    with pytest.raises(CalculatorError, match=f"longer than {MAX_EXPRESSION} characters"):
        calculate("1" * (MAX_EXPRESSION + 1))


# --- the tool ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_tool_answers_with_the_formatted_result() -> None:
    tool = calculator_tool()
    params = validate_arguments(tool, {"expression": "(1249.50 + 380.25 + 2112.00) * 1.2"})
    assert isinstance(params, CalculatorArgs)
    result = await tool.execute("c1", params, None, None)  # type: ignore[misc]
    (block,) = result.content
    assert isinstance(block, TextContent) and block.text == "4490.1"
    assert result.details == {"expression": "(1249.50 + 380.25 + 2112.00) * 1.2"}


@pytest.mark.anyio
async def test_the_tool_raises_for_a_refused_expression() -> None:
    # the loop turns the exception into an error result the model reads
    tool = calculator_tool()
    with pytest.raises(CalculatorError, match="division by zero"):
        await tool.execute("c1", CalculatorArgs(expression="1 / 0"), None, None)  # type: ignore[misc]


def test_the_tool_takes_exactly_one_expression() -> None:
    tool = calculator_tool()
    schema = tool.json_schema()
    assert schema["required"] == ["expression"]
    assert schema["additionalProperties"] is False
    for bad in ({}, {"expression": 1 + 2}, {"expression": "1", "precision": 50}):
        with pytest.raises(ToolCallRejected):
            validate_arguments(tool, bad)
    with pytest.raises(pydantic.ValidationError):
        CalculatorArgs.model_validate({"expression": "1", "extra": True})


def test_the_tool_options() -> None:
    default = calculator_tool()
    assert (default.name, default.label) == ("calculator", "")
    assert "no functions" in default.description
    custom = calculator_tool(description="Do sums.", label="Calculator")
    assert (custom.name, custom.description, custom.label) == (
        "calculator",
        "Do sums.",
        "Calculator",
    )
