"""The loop guide (docs/loop.md, "The agent loop") shows its five examples: a minimal agent,
consuming events with ``agent_loop``, stepping the machine by hand, stepping steering,
follow-ups and abort, and stepping an approval. ``tests/test_readme.py`` runs them (and
compares what they print with the output shown under them)."""

from __future__ import annotations

import re

from tests.readme_sections import DOCS, code_blocks, section

TEXT = section("The agent loop")
BLOCKS = re.findall(r"^```python\n(.*?)^```", TEXT, re.S | re.M)


def test_the_guide_has_the_five_examples() -> None:
    assert TEXT.startswith("## The agent loop\n")
    assert len(BLOCKS) == 5
    assert "run_agent_loop" in BLOCKS[0] and "AgentTool" in BLOCKS[0]
    assert "agent_loop(" in BLOCKS[1]
    assert "LoopMachine" in BLOCKS[2] and "feed(" in BLOCKS[2]
    for name in ("SteeringPolled", "FollowUpPolled", "Abort()", "get_steering_messages="):
        assert name in BLOCKS[3], name
    for name in ("requires_approval=True", "AwaitApproval", "ApprovalDecided("):
        assert name in BLOCKS[4], name


def test_the_examples_that_print_show_their_output() -> None:
    blocks = [b for b in code_blocks(DOCS / "loop.md") if b.lang == "python"]
    assert [b.output is not None for b in blocks] == [True, True, False, True, True]
    assert 'toolResult call_1 add: "5"' in (blocks[0].output or "")
    assert "stopped True aborted" in (blocks[3].output or "")
    assert "run ended: completed" in (blocks[1].output or "")
    assert "executing ['approval_decided']" in (blocks[4].output or "")


def test_the_stepping_example_states_what_it_shows() -> None:
    # its comments are what a reader checks the printed lines against
    stepping = BLOCKS[2]
    for comment in ("# idle", "# stopped completed", "not accepted in state 'executing'"):
        assert comment in stepping
