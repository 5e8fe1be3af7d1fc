"""The top-level package keeps the names a program that builds an agent needs
(docs/reference.md); the names that moved to their subpackage are still given from the top
level, with a DeprecationWarning that names the module to import them from."""

from __future__ import annotations

import importlib
import warnings

import pytest

import agentcore_fsm

MOVED = agentcore_fsm._MOVED


def test_the_front_door_is_small_and_holds_what_an_agent_needs() -> None:
    assert len(agentcore_fsm.__all__) == 39
    for name in ("Agent", "AgentTool", "tool", "run_agent_loop", "handoff", "LoopMachine"):
        assert name in agentcore_fsm.__all__
    assert not set(MOVED) & set(agentcore_fsm.__all__)


@pytest.mark.parametrize("name", sorted(MOVED))
def test_a_moved_name_still_imports_with_a_warning_naming_its_module(name: str) -> None:
    module = MOVED[name]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = getattr(agentcore_fsm, name)
    assert value is getattr(importlib.import_module(module), name)
    (warning,) = caught
    assert warning.category is DeprecationWarning
    assert str(warning.message).startswith(
        f"importing {name} from agentcore_fsm is deprecated: import it from {module} "
    )
    assert warning.filename == __file__  # points at the importing line


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        agentcore_fsm.Nope  # noqa: B018
