"""The Agent lifecycle (``states/agent.toml``) as seen from outside, over a plain run, an
aborted run and a plain run again (``prop_lifecycle``); between them they take every declared
lifecycle transition."""

from __future__ import annotations

from prop_lifecycle import lifecycle_runs


def test_lifecycle_over_plain_and_aborted_runs() -> None:
    lifecycle_runs(record=True)
