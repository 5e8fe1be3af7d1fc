"""The viewer's diagram of a declared machine, as inline SVG (see
:mod:`agentcore_fsm.devtools.viewer`).

The viewer draws a **compact** diagram: each state a box holding its name, each arrow of the
machine (:func:`~agentcore_fsm.devtools.diagram_model.arrow_groups`, as the full diagrams draw
them) a line whose tooltip names its triggers. The labels, guards, emits and variables of the
full diagrams (``diagrams/*.svg``, ``agentcore-fsm diagram``) make a picture several metres
wide that cannot be read beside a transcript, and so do the abort and failure arrows, which go
from nearly every state to the final one: the compact diagram leaves them out. The step panel
says which transition a step took, and a step that takes an abort or failure arrow outlines
the state it left in red (class ``incident``).

Every state is a ``<g id="state-NAME">`` and every arrow a ``<g id="edge-SOURCE-DEST">``
(``-x`` appended for an abort or failure arrow), the ids :func:`~agentcore_fsm.devtools.dot.
to_dot` gives, which the page's script colours as the run moves.

**Layout.** When Graphviz's ``dot`` is installed it lays the diagram out
(:func:`compact_dot` rendered by :func:`~agentcore_fsm.devtools.dot.render_dot`). Graphviz is
an operating-system package a user may not have, and a viewer that refused to work without it
would be a poor debugger, so otherwise (``layout="auto"``) the diagram is laid out here
(:func:`simple_svg`): states in rows by their distance from the initial state, arrows as
curves. ``layout="dot"`` insists on Graphviz (an error when it is missing), ``layout="simple"``
never uses it. Both drawings carry the same ids, so the page works the same on either.
"""

from __future__ import annotations

import html
import math
import re
from collections import deque
from typing import Literal

from agentcore_fsm.core.declaration import Declaration
from agentcore_fsm.devtools.diagram_model import arrow_groups
from agentcore_fsm.devtools.dot import find_dot, render_dot

Layout = Literal["auto", "dot", "simple"]
LAYOUTS: tuple[Layout, ...] = ("auto", "dot", "simple")

_BOX_W, _BOX_H, _GAP_X, _GAP_Y, _PAD = 170, 34, 40, 70, 30


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _triggers(decl: Declaration) -> dict[tuple[str, str, bool], list[str]]:
    """For each arrow, the triggers of its transitions, in declaration order, each once."""
    out: dict[tuple[str, str, bool], list[str]] = {}
    for group in arrow_groups(decl, None):
        names: list[str] = []
        for entry in group.entries:
            for spec in entry.specs:
                if spec.trigger not in names:
                    names.append(spec.trigger)
        out[(group.source, group.dest, group.exceptional)] = names
    return out


def compact_dot(decl: Declaration) -> str:
    """The compact diagram of ``decl`` as Graphviz DOT source (see the module docstring)."""
    out = [
        f"digraph {_q(decl.name)} {{",
        '  graph [rankdir="TB", fontname="Helvetica", nodesep="0.3", ranksep="0.45", pad="0.2"];',
        '  node [shape="box", style="rounded,filled", fillcolor="#f7fafc", color="#2d3748", '
        'fontname="Helvetica", fontsize="11", margin="0.12,0.04", height="0.3"];',
        '  edge [fontname="Helvetica", fontsize="8", color="#718096", fontcolor="#4a5568", '
        'arrowsize="0.6"];',
    ]
    for name in decl.states:
        extra = ', peripheries="2"' if name == decl.final else ""
        out.append(f'  {_q(name)} [id={_q("state-" + name)}, class="state"{extra}];')
    for (source, dest, exceptional), triggers in _triggers(decl).items():
        ident = f"edge-{source}-{dest}{'-x' if exceptional else ''}"
        if exceptional:
            continue  # abort/fail arrows (from nearly every state): see the module docstring
        tip = f"{source} → {dest}: {' | '.join(triggers)}"
        out.append(f"  {_q(source)} -> {_q(dest)} [id={_q(ident)}, tooltip={_q(tip)}];")
    out.append("}")
    return "\n".join(out) + "\n"


def _ranks(decl: Declaration) -> dict[str, int]:
    """Each state's distance from the initial state along the declared transitions
    (unreachable states one row below the farthest)."""
    nexts: dict[str, list[str]] = {name: [] for name in decl.states}
    for spec in decl.transitions:
        for source in spec.source:
            if source in nexts and spec.dest not in nexts[source]:
                nexts[source].append(spec.dest)
    rank = {decl.initial: 0}
    queue = deque([decl.initial])
    while queue:
        state = queue.popleft()
        for dest in nexts.get(state, ()):
            if dest not in rank:
                rank[dest] = rank[state] + 1
                queue.append(dest)
    deepest = max(rank.values(), default=0)
    return {name: rank.get(name, deepest + 1) for name in decl.states}


def simple_svg(decl: Declaration) -> str:
    """The compact diagram of ``decl`` laid out without Graphviz (see the module docstring)."""
    ranks = _ranks(decl)
    rows: dict[int, list[str]] = {}
    for name in decl.states:
        rows.setdefault(ranks[name], []).append(name)
    widest = max((len(r) for r in rows.values()), default=1)
    width = _PAD * 2 + widest * _BOX_W + (widest - 1) * _GAP_X
    height = _PAD * 2 + len(rows) * _BOX_H + (len(rows) - 1) * _GAP_Y
    centre: dict[str, tuple[float, float]] = {}
    for row, (_, names) in enumerate(sorted(rows.items())):
        span = len(names) * _BOX_W + (len(names) - 1) * _GAP_X
        x0 = (width - span) / 2
        for i, name in enumerate(names):
            x = x0 + i * (_BOX_W + _GAP_X) + _BOX_W / 2
            centre[name] = (x, _PAD + row * (_BOX_H + _GAP_Y) + _BOX_H / 2)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="Helvetica,sans-serif">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" '
        'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
        '<path d="M0,0 L10,5 L0,10 z" fill="#718096"/></marker></defs>',
    ]
    for n, ((source, dest, exceptional), triggers) in enumerate(_triggers(decl).items()):
        if exceptional:
            continue  # abort/fail arrows (from nearly every state): see the module docstring
        ident = f"edge-{source}-{dest}{'-x' if exceptional else ''}"
        (x1, y1), (x2, y2) = centre[source], centre[dest]
        title = html.escape(f"{source} → {dest}: {' | '.join(triggers)}")
        if source == dest:
            d = f"M{x1 + _BOX_W / 2 - 10},{y1 - _BOX_H / 2} c30,-30 50,10 {10},{_BOX_H / 2 + 10}"
        else:
            y1 += _BOX_H / 2 if y2 > y1 else -_BOX_H / 2 if y2 < y1 else 0
            y2 += -_BOX_H / 2 if y2 > y1 else _BOX_H / 2 if y2 < y1 else 0
            length = math.hypot(x2 - x1, y2 - y1) or 1.0
            bend = (12 + (n % 3) * 10) * (1 if n % 2 else -1)
            mx = (x1 + x2) / 2 + bend * (y2 - y1) / length
            my = (y1 + y2) / 2 - bend * (x2 - x1) / length
            d = f"M{x1:.1f},{y1:.1f} Q{mx:.1f},{my:.1f} {x2:.1f},{y2:.1f}"
        out.append(
            f'<g id="{ident}" class="edge"><title>{title}</title>'
            f'<path d="{d}" fill="none" stroke="#718096" marker-end="url(#arrow)"/></g>'
        )
    for name in decl.states:
        x, y = centre[name]
        double = name == decl.final
        out.append(
            f'<g id="state-{html.escape(name)}" class="node state"><title>{html.escape(name)}'
            f'</title><rect x="{x - _BOX_W / 2}" y="{y - _BOX_H / 2}" width="{_BOX_W}" '
            f'height="{_BOX_H}" rx="8" fill="#f7fafc" stroke="#2d3748" '
            f'stroke-width="{2 if double else 1}"/>'
            f'<text x="{x}" y="{y + 4}" text-anchor="middle" font-size="12" fill="#2d3748">'
            f"{html.escape(name)}</text></g>"
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


_PROLOG = re.compile(r"\A.*?(?=<svg\b)", re.S)


def diagram_svg(
    decl: Declaration, layout: Layout = "auto", *, dot_binary: str | None = None
) -> tuple[str, str]:
    """The compact diagram of ``decl`` as SVG text to put inside a page, and which layout drew
    it (``"dot"`` or ``"simple"``; see the module docstring for ``layout``). ``layout="dot"``
    without Graphviz raises :class:`~agentcore_fsm.devtools.dot.GraphvizNotFoundError`."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; expected one of {', '.join(LAYOUTS)}")
    if layout == "simple" or (layout == "auto" and find_dot(dot_binary) is None):
        return simple_svg(decl), "simple"
    svg = render_dot(compact_dot(decl), "svg", dot_binary=dot_binary).decode("utf-8")
    return _PROLOG.sub("", svg, count=1), "dot"
