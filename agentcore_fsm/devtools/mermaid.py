"""Mermaid output: a declared machine as a ``stateDiagram-v2`` (:func:`to_mermaid`), a run on it
as a ``flowchart`` (:func:`run_to_mermaid`: a state diagram cannot style a single arrow, a
flowchart's ``linkStyle`` can). See :mod:`agentcore_fsm.devtools.diagrams`.
"""

from __future__ import annotations

import json
import re

from agentcore_fsm.core.declaration import Declaration
from agentcore_fsm.devtools.diagram_model import (
    FADED,
    FADED_TEXT,
    INCIDENT,
    INK,
    PATH_COLOUR,
    STATE_COLOURS,
    TIMES,
    ArrowEntry,
    NestedView,
    RunView,
    arrow_groups,
    diagram_title,
    edge_width,
    emit_lines,
    fatal_group,
    nested_clusters,
    nested_title,
    state_class,
    state_notes,
    taken_groups,
    taken_label,
    variable_label_lines,
    variable_lines,
    wait_text,
)

# --- Mermaid ------------------------------------------------------------------------------------

_MERMAID_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MERMAID_ESCAPES = {"#": "#35;", ";": "#59;", ":": "#58;", "<": "#lt;", ">": "#gt;", '"': "#quot;"}


def mermaid_text(text: str) -> str:
    """Text made safe inside a Mermaid label (entity codes for the characters it parses)."""
    return "".join(_MERMAID_ESCAPES.get(ch, ch) for ch in text)


_MERMAID_KEYWORDS = frozenset(
    {"state", "note", "class", "classDef", "style", "click", "scale", "default", "direction"}
)
# words a flowchart reads as syntax where a node id would stand
_FLOWCHART_KEYWORDS = frozenset(
    {
        "end",
        "graph",
        "flowchart",
        "subgraph",
        "style",
        "linkstyle",
        "classdef",
        "class",
        "click",
        "call",
        "href",
        "direction",
        "default",
        "interpolate",
    }
)


def _mermaid_ids(decl: Declaration, flowchart: bool = False) -> dict[str, str]:
    """Mermaid ids: the state's name where Mermaid accepts it, else a fresh ``state_N``. In a
    flowchart a keyword (any case) cannot be an id, nor a name that starts with ``o`` or ``x``
    (``a --o b`` is an arrow with a circle end)."""
    ids: dict[str, str] = {}
    taken = set(decl.states)
    for n, name in enumerate(decl.states):
        usable = _MERMAID_ID.match(name) is not None and name not in _MERMAID_KEYWORDS
        if flowchart:
            usable = usable and name.lower() not in _FLOWCHART_KEYWORDS
            usable = usable and name[0] not in "oxOX" and not name.startswith("_")
        if usable:
            ids[name] = name
            continue
        alias = f"state_{n}"
        while alias in taken:
            alias += "_"
        taken.add(alias)
        ids[name] = alias
    return ids


def _entry_head(entry: ArrowEntry) -> str:
    head = " ".join(x for x in (" | ".join(entry.triggers), entry.conditions) if x)
    return f"{entry.count}{TIMES} {head}" if entry.count is not None else head


def to_mermaid(decl: Declaration, run: RunView | None = None) -> str:
    """The machine as Mermaid text: a ``stateDiagram-v2`` of the declaration, or with ``run``
    a ``flowchart`` of the run on it (:func:`run_to_mermaid`)."""
    if run is not None:
        return run_to_mermaid(decl, run)
    ids = _mermaid_ids(decl)
    out = [
        "---",
        f"title: {json.dumps(diagram_title(decl), ensure_ascii=False)}",
        "---",
        "stateDiagram-v2",
        f"    %% Generated from states/{decl.name}.toml by `agentcore-fsm diagram`. Do not edit.",
        "    direction TB",
    ]
    for name, spec in decl.states.items():
        # a state's label: its name, and in italics the effect the driver performs on entering
        # (``id : text`` would replace the name with the text, so the label is spelled out)
        if spec.effect:
            label = f"{mermaid_text(name)}<br/><i>{mermaid_text(spec.effect)}</i>"
            out.append(f'    state "{label}" as {ids[name]}')
        elif ids[name] != name:
            out.append(f'    state "{mermaid_text(name)}" as {ids[name]}')
    out.append(f"    [*] --> {ids[decl.initial]}")
    for group in arrow_groups(decl, None):
        lines: list[str] = []
        for entry in group.entries:
            lines += [mermaid_text(line) for line in (_entry_head(entry), *emit_lines(entry.emits))]
            # the declared variables the transitions read and set, in italics
            lines += [f"<i>{mermaid_text(v)}</i>" for v in variable_label_lines(decl, group, entry)]
        label = "<br/>".join(lines)
        out.append(f"    {ids[group.source]} --> {ids[group.dest]} : {label}")
    out.append(f"    {ids[decl.final]} --> [*]")
    if decl.variables:  # the declared variables, in a note beside the initial state
        listed = "<br/>".join(mermaid_text(line) for line in variable_lines(decl))
        out.append(f"    note left of {ids[decl.initial]} : <b>variables</b><br/>{listed}")
    return "\n".join(out) + "\n"


def _link_style(stroke: str, width: float, text: str, dashed: bool = False) -> str:
    style = f"stroke:{stroke},stroke-width:{width:g}px,color:{text}"
    return style + (",stroke-dasharray:6 4" if dashed else "")


def run_to_mermaid(decl: Declaration, run: RunView) -> str:
    """A run on its machine as a Mermaid ``flowchart``.

    A state diagram (``stateDiagram-v2``, what the static diagrams are) cannot style a single
    arrow, so a run is drawn as a flowchart, whose ``linkStyle`` can. The arrows the run took
    are thick and blue, each line with how many times it fired in front of its trigger (``4``
    and a multiplication sign); the others are thin and faded; the arrow of the step where the
    run failed or was aborted is red. Abort and failure arrows are dashed. The states are
    classed ``visited``, ``unvisited``, ``current`` (the final or current state), ``incident``
    (where it failed or was aborted: red, with the error text inside) and ``warned`` (the
    final state of a run that ended well despite tool errors: orange, with the tool errors
    inside). A waiting state (:data:`WAIT_STATES`) says, in italics, how long the run waited
    there when that is known (``waited 2.3 s``). Marks are written inside the states, never in
    notes, so none can be laid out beside the wrong state. Arrows and labels are the static
    diagram's, plus the counts.
    """
    ids = _mermaid_ids(decl, flowchart=True)
    used = set(ids.values())

    def fresh(base: str) -> str:
        while base in used:
            base += "_"
        used.add(base)
        return base

    start, end = fresh("start"), fresh("finish")
    out = [
        "---",
        f"title: {json.dumps(diagram_title(decl, run), ensure_ascii=False)}",
        "---",
        "flowchart TB",
        f"    %% A run on states/{decl.name}.toml, drawn by `agentcore-fsm diagram`: thick",
        f"    %% blue arrows were taken (N{TIMES}: times fired), faded ones were not, a red one",
        "    %% is where the run failed or was aborted; dashed: abort and failure.",
        f'    {start}((" "))',
    ]
    for name, spec in decl.states.items():
        lines = [f"<b>{mermaid_text(name)}</b>"]
        if spec.effect:
            lines.append(f"<i>{mermaid_text(spec.effect)}</i>")
        mark, details = state_notes(run, name)
        if mark is not None:
            lines.append(f"<b>{mermaid_text(mark)}</b>")
        lines += [mermaid_text(line) for line in details]
        waited = wait_text(run, name)
        if waited is not None:
            lines.append(f"<i>{mermaid_text(waited)}</i>")
        out.append(f'    {ids[name]}("{"<br/>".join(lines)}")')
    out.append(f'    {end}(((" ")))')
    fatal = fatal_group(decl, run)
    links: list[tuple[str, str, str, bool, str]] = []  # source, dest, label, dashed, style
    began = bool(run.path)
    links.append(
        (
            start,
            ids[decl.initial],
            "",
            False,
            _link_style(PATH_COLOUR, 3, INK) if began else _link_style(FADED, 1, FADED_TEXT),
        )
    )
    for group in arrow_groups(decl, run):
        lines = []
        for entry in group.entries:
            head = mermaid_text(_entry_head(entry))
            if entry.count is not None:
                head = f"<b>{head}</b>"
            lines += [head, *(mermaid_text(line) for line in emit_lines(entry.emits))]
        if group.count:
            red = (group.source, group.dest, group.exceptional) == fatal
            colour = INCIDENT if red else PATH_COLOUR
            style = _link_style(colour, edge_width(group.count), INK, group.exceptional)
        else:
            style = _link_style(FADED, 1, FADED_TEXT, group.exceptional)
        links.append(
            (ids[group.source], ids[group.dest], "<br/>".join(lines), group.exceptional, style)
        )
    links.append(
        (
            ids[decl.final],
            end,
            "",
            False,
            _link_style(PATH_COLOUR, 3, INK) if run.finished else _link_style(FADED, 1, FADED_TEXT),
        )
    )
    for source, dest, label, dashed, _ in links:
        arrow = "-.->" if dashed else "-->"
        out.append(
            f'    {source} {arrow}|"{label}"| {dest}' if label else f"    {source} {arrow} {dest}"
        )
    clustered: dict[str, list[str]] = {}
    if run.nested:
        cluster_lines, cluster_styles, clustered = _clusters(decl, run, ids)
        out += cluster_lines
        links += [("", "", "", False, style) for style in cluster_styles]
    for number, (*_, style) in enumerate(links):
        out.append(f"    linkStyle {number} {style}")
    for cls, (fill, stroke, width) in STATE_COLOURS.items():
        text = FADED_TEXT if cls == "unvisited" else INK
        out.append(
            f"    classDef {cls} fill:{fill},stroke:{stroke},stroke-width:{width}px,color:{text}"
        )
    out.append(f"    classDef terminal fill:{INK},stroke:{INK}")
    classes: dict[str, list[str]] = {}
    for name in decl.states:
        classes.setdefault(state_class(run, name), []).append(ids[name])
    for cls, names in clustered.items():
        classes.setdefault(cls, []).extend(names)
    for cls in STATE_COLOURS:
        if cls in classes:
            out.append(f"    class {','.join(classes[cls])} {cls}")
    out.append(f"    class {start},{end} terminal")
    return "\n".join(out) + "\n"


def _clusters(
    decl: Declaration, run: RunView, ids: dict[str, str]
) -> tuple[list[str], list[str], dict[str, list[str]]]:
    """The nested runs of ``run`` as subgraphs (each inside its parent's) holding the states
    they visited and the arrows they took, and a dotted arrow from the state where the parent
    stood while the call ran to each: the lines, the links' styles (in the order the lines
    define the links) and the nodes of each state class."""
    every = nested_clusters(run)
    inside: dict[int, list[tuple[int, NestedView]]] = {}
    for number, nested, parent in every:
        inside.setdefault(parent, []).append((number, nested))
    lines: list[str] = []
    styles: list[str] = []
    classes: dict[str, list[str]] = {}

    def node(number: int, state: str) -> str:
        return f"n{number}_{ids[state]}"

    def cluster(number: int, nested: NestedView, indent: str) -> None:
        view = nested.view
        title = f"<b>{mermaid_text(nested.label)}</b><br/>{mermaid_text(nested_title(nested))}"
        lines.append(f'{indent}subgraph nested_{number}["{title}"]')
        for name in decl.states:
            if name not in view.visited:
                continue
            text = [f"<b>{mermaid_text(name)}</b>"]
            mark, details = state_notes(view, name)
            if mark is not None:
                text.append(f"<b>{mermaid_text(mark)}</b>")
            text += [mermaid_text(line) for line in details]
            lines.append(f'{indent}    {node(number, name)}("{"<br/>".join(text)}")')
            classes.setdefault(state_class(view, name), []).append(node(number, name))
        for group in taken_groups(decl, view):
            label = "<br/>".join(mermaid_text(line) for line in taken_label(group))
            arrow = "-.->" if group.exceptional else "-->"
            source, dest = node(number, group.source), node(number, group.dest)
            lines.append(f'{indent}    {source} {arrow}|"{label}"| {dest}')
            styles.append(_link_style(PATH_COLOUR, edge_width(group.count), INK, group.exceptional))
        for child, inner in inside.get(number, []):
            cluster(child, inner, indent + "    ")
        lines.append(f"{indent}end")

    for number, nested in inside.get(0, []):
        cluster(number, nested, "    ")
    for number, nested, parent in every:
        source = ids[nested.where] if parent == 0 else node(parent, nested.where)
        call = mermaid_text(nested.label.rsplit(" > ", 1)[-1])
        lines.append(f'    {source} -.->|"{call}"| nested_{number}')
        styles.append(_link_style(PATH_COLOUR, 1.5, INK, dashed=True))
    return lines, styles, classes
