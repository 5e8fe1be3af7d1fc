"""The one interface of durable engines (no server needed): the engines by name, the shared
agent class, and no SDK imported by the package."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentcore_fsm.integrations import dbos, durable_api, engines, temporal

SHARED = ("register", "start_run", "follow_async", "send_decision_async", "abort_async")


def test_engines_by_name_are_the_engine_modules() -> None:
    assert engines.engine("dbos") is dbos
    assert engines.engine("temporal") is temporal
    assert engines.ENGINES == ("dbos", "temporal")
    with pytest.raises(ValueError, match=r"no durable engine named 'celery' \(engines: dbos"):
        engines.engine("celery")


def test_both_engines_have_every_method_of_the_interface() -> None:
    members = [m for m in vars(durable_api.DurableEngine) if not m.startswith("_")]
    assert sorted(members) == sorted([*SHARED, "result_async"])
    for module in (dbos, temporal):
        for name in members:
            assert callable(getattr(module, name)), (module.__name__, name)


def test_one_agent_class_for_every_engine() -> None:
    assert dbos.DurableAgent is durable_api.DurableAgent is temporal.DurableAgent


def test_the_package_imports_no_temporal_sdk() -> None:
    code = (
        "import sys, agentcore_fsm, agentcore_fsm.integrations, "
        "agentcore_fsm.integrations.durable_api; print('temporalio' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr
