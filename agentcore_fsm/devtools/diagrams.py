"""Diagrams of the declared machines, and of live or recorded runs on them: the rendering.

Everything is drawn from the declarations in ``states/`` (:mod:`agentcore_fsm.core.declaration`),
so a
diagram can never disagree with the engine. Three outputs:

* **Mermaid** (:func:`to_mermaid`) — needs nothing; GitHub renders it. A declared machine is a
  ``stateDiagram-v2``; a run on it is a ``flowchart`` (:func:`run_to_mermaid`), because a state
  diagram cannot style a single arrow and a flowchart's ``linkStyle`` can.
* **DOT** source for Graphviz (:func:`to_dot`) — written here, no Python package needed.
* **SVG/PNG** (:func:`render`) — the DOT source run through Graphviz's ``dot`` program. When it
  is not installed this raises :class:`GraphvizNotFoundError`, which names the package to install.

How a transition is labelled: the trigger in bold, then its guards in brackets (``not g`` for an
``unless`` guard): ``steering_polled [first_turn]``; on the next line(s), after a ``/``, the emit
actions it runs, in order: ``/ assistant_end, turn_end, agent_end``. To keep the picture legible,
all transitions from one state to another are drawn as one arrow with their labels stacked (a
transition declared with several sources appears on each source's arrow), and transitions on one
arrow that share guards and emits share a line: ``abort | fail [turn_open]``. Abort and failure
transitions (:data:`EXCEPTIONAL_TRIGGERS`) get arrows of their own, dashed and muted, so that the
normal flow reads first. Triggers the machine fires itself (not under ``[inputs]``) are italic.

A **run** (:class:`RunView`) overlays what happened, the same way in Mermaid and in DOT: visited
states are filled, the taken transitions are drawn thick and blue, each line with how many times
it fired, and the rest fade; the current or final state is marked; when the run ended in error or
abort, the state where that happened (the source of the run's last abort or failure transition)
is red and holds the error text, and the arrow of that step is red. A run that ended well
despite tool errors has its final state in orange, listing them, and says so in its title. A
state where the run waited for a person (:data:`WAIT_STATES`: ``awaiting_approval``) says how
long, when the records carry clock readings (a recording does): ``waited 2.3 s``. Every
mark is written inside its state, so none can be drawn beside the wrong one. Build a view with
:func:`run_view` (transition records), :func:`view_of_machine` (a live ``LoopMachine``) or
:func:`view_of_recording` (a recording made by
:class:`~agentcore_fsm.persist.recorder.RunRecorder`).

The **steps** of a run (:func:`run_steps`) are the ordered companion of its diagram: step 1, 2,
3 ... with the trigger, source → destination, the guards that held, the transitions tried
before it that did not hold, the emit actions, the time waited before a step out of a waiting
state and the events recorded after it. They are written
as a Markdown table (:func:`steps_markdown`; it reads in a terminal and renders on a web page)
or a Mermaid sequence diagram with the same numbers (:func:`steps_mermaid`);
``agentcore-fsm diagram --run RUN.jsonl --steps`` prints them.

Every SVG rendered here carries a comment with the SHA-256 of the DOT source it was rendered
from; :func:`svg_is_current` uses it to tell whether an SVG still matches its declaration
without comparing bytes (Graphviz versions lay out and serialise differently).

This module is the front: every name above is importable from here. The code is in
:mod:`~agentcore_fsm.devtools.diagram_model` (the model of a drawing and the run views),
:mod:`~agentcore_fsm.devtools.mermaid`, :mod:`~agentcore_fsm.devtools.dot` (DOT, Graphviz and SVG)
and :mod:`~agentcore_fsm.devtools.run_views` (recordings and the steps of a run). The modules
around these: :mod:`agentcore_fsm.devtools.diagram_files` keeps the committed
``diagrams/`` folder in step with the declarations, and :mod:`agentcore_fsm.cli.diagram` is the
``agentcore-fsm diagram`` command. This module is never imported by the engine; it imports only
the standard library and the declaration loader at the top (the recording module only inside
the functions that read a run).
"""

from __future__ import annotations

from agentcore_fsm.devtools.diagram_model import (
    EXCEPTIONAL_TRIGGERS,
    FORMATS,
    MACHINE_ALIASES,
    WAIT_STATES,
    Format,
    RunView,
    diagram_title,
    run_view,
    view_of_machine,
)
from agentcore_fsm.devtools.dot import (
    GraphvizError,
    GraphvizNotFoundError,
    dot_digest,
    find_dot,
    render,
    render_dot,
    svg_is_current,
    to_dot,
)
from agentcore_fsm.devtools.mermaid import (
    run_to_mermaid,
    to_mermaid,
)
from agentcore_fsm.devtools.run_views import (
    STEPS_FORMATS,
    RunStep,
    StepsFormat,
    render_steps,
    run_steps,
    steps_markdown,
    steps_mermaid,
    view_of_recording,
)

__all__ = [
    "EXCEPTIONAL_TRIGGERS",
    "FORMATS",
    "MACHINE_ALIASES",
    "STEPS_FORMATS",
    "WAIT_STATES",
    "Format",
    "GraphvizError",
    "GraphvizNotFoundError",
    "RunStep",
    "RunView",
    "StepsFormat",
    "diagram_title",
    "dot_digest",
    "find_dot",
    "render",
    "render_dot",
    "render_steps",
    "run_steps",
    "run_to_mermaid",
    "run_view",
    "steps_markdown",
    "steps_mermaid",
    "svg_is_current",
    "to_dot",
    "to_mermaid",
    "view_of_machine",
    "view_of_recording",
]
