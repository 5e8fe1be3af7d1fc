"""The per-call machine (``states/tool_call.toml``) stepped through the loop, case by case.

The fixed bank (``prop_tool_calls.CALL_BANK``) takes every declared transition of a tool call
from every one of its source states; generated cases mix tools with and without
``prepare_arguments``, hook outcomes, modes, completion orders and interruptions at random. Each
case is checked against the oracle of ``prop_tool_calls`` (results, the effects each call asks
for and their arguments, effects pending only where the loop performs them, the event grammar).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from prop_tool_calls import CALL_BANK, CallCase, call_cases, run_case


@pytest.mark.parametrize("name", list(CALL_BANK))
def test_call_bank_case(name: str) -> None:
    run_case(CALL_BANK[name], record=True)


@given(case=call_cases())
def test_generated_call_cases(case: CallCase) -> None:
    run_case(case, record=True)
