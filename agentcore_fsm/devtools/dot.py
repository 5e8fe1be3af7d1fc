"""DOT and SVG: Graphviz source of a machine or a run (:func:`to_dot`), rendered to SVG/PNG by
Graphviz's ``dot`` program (:func:`render`), and whether a committed SVG still matches its
declaration (:func:`svg_is_current`). See :mod:`agentcore_fsm.devtools.diagrams`.
"""

from __future__ import annotations

import hashlib
import html
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from typing import Literal

from agentcore_fsm.core.declaration import Declaration
from agentcore_fsm.devtools.diagram_model import (
    EXC,
    EXCEPTIONAL_TRIGGERS,
    FADED,
    FADED_TEXT,
    FORMATS,
    INCIDENT,
    INK,
    MUTED,
    PATH_COLOUR,
    STATE_COLOURS,
    TIMES,
    ArrowGroup,
    Format,
    NestedView,
    RunView,
    arrow_groups,
    diagram_title,
    edge_width,
    emit_lines,
    fatal_group,
    is_auto,
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
from agentcore_fsm.devtools.mermaid import to_mermaid

_RANKDIR = "TB"
_GUTTER = 10  # points between an edge and its label
_SVG_MARK = re.compile(r"<!-- agentcore-fsm: rendered from (\S+) sha256=([0-9a-f]{64}) -->")

GRAPHVIZ_MISSING = (
    "Rendering {fmt} needs Graphviz's `dot` program, which was not found{where}. Install "
    "Graphviz: `sudo apt-get install graphviz` (Debian/Ubuntu), `brew install graphviz` "
    "(macOS/Homebrew), or see https://graphviz.org/download/. Mermaid and DOT output "
    "(--format mermaid|dot) need nothing."
)


class GraphvizError(RuntimeError):
    """Graphviz's ``dot`` failed to render."""


class GraphvizNotFoundError(GraphvizError):
    """Graphviz's ``dot`` is not installed (the message says how to install it)."""


# --- DOT ----------------------------------------------------------------------------------------

_STATE_STYLE = {
    cls: {"fillcolor": fill, "color": stroke, "penwidth": width}
    for cls, (fill, stroke, width) in STATE_COLOURS.items()
}
_STATE_STYLE["unvisited"]["fontcolor"] = FADED_TEXT


def _q(text: str) -> str:
    """A DOT double-quoted string."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _h(text: str) -> str:
    return html.escape(text, quote=True)


def _attrs(**attrs: str) -> str:
    parts = []
    for key, value in attrs.items():
        if value.startswith("<") and value.endswith(">"):
            parts.append(f"{key}={value}")  # an HTML-like label
        else:
            parts.append(f"{key}={_q(value)}")
    return "[" + ", ".join(parts) + "]"


def _edge_label(decl: Declaration, group: ArrowGroup, run: RunView | None) -> str:
    lines: list[str] = []
    for entry in group.entries:
        triggers = []
        for trigger in entry.triggers:
            text = f"<b>{_h(trigger)}</b>"
            triggers.append(f"<i>{text}</i>" if is_auto(decl, trigger) else text)
        head = " | ".join(triggers)
        if entry.conditions:
            head += " " + _h(entry.conditions)
        faded = run is not None and entry.count is None
        if entry.count is not None:
            head = f'<font color="{PATH_COLOUR}"><b>{entry.count}{TIMES}</b></font> ' + head
        elif faded:
            head = f'<font color="{FADED_TEXT}">{head}</font>'
        lines.append(head)
        color = FADED_TEXT if faded else MUTED
        for line in emit_lines(entry.emits):
            lines.append(f'<font point-size="9" color="{color}">{_h(line)}</font>')
        if run is None:  # the declared variables read and set (static diagrams)
            for line in variable_label_lines(decl, group, entry):
                lines.append(
                    f'<font point-size="8" color="{VARIABLE_COLOUR}"><i>{_h(line)}</i></font>'
                )
    return _label_table(lines)


VARIABLE_COLOUR = "#7c3aed"
"""The colour of the declared variables: the note that lists them and the ``reads/sets`` lines."""


def _variables_note(decl: Declaration) -> str:
    """The note listing the declared variables (``name: type = initial``)."""
    lines = [f'<font point-size="10" color="{VARIABLE_COLOUR}"><b>variables</b></font>']
    lines += [
        f'<font point-size="9" color="{VARIABLE_COLOUR}">{_h(line)}</font>'
        for line in variable_lines(decl)
    ]
    rows = "".join(f'<tr><td align="left">{line}</td></tr>' for line in lines)
    return f'<<table border="0" cellborder="0" cellspacing="0" cellpadding="1">{rows}</table>>'


def _label_table(lines: list[str]) -> str:
    """An HTML-like label: left-aligned lines, with a gutter on the left so that the edge the
    label belongs to (which dot routes along the label's left side) does not touch the text."""
    rows = "".join(f'<tr><td align="left">{line}</td></tr>' for line in lines)
    return (
        '<<table border="0" cellborder="0" cellspacing="0" cellpadding="0">'
        f'<tr><td rowspan="{len(lines) + 1}" width="{_GUTTER}"></td></tr>{rows}</table>>'
    )


def _node_label(decl: Declaration, name: str, view: RunView | None) -> str:
    spec = decl.states[name]
    lines = [f"<b>{_h(name)}</b>"]
    if spec.effect:
        lines.append(f'<font point-size="9" color="{MUTED}"><i>{_h(spec.effect)}</i></font>')
    if spec.suspend_when and view is None:
        text = f"suspends [{spec.suspend_when}]"
        lines.append(f'<font point-size="9" color="{VARIABLE_COLOUR}"><i>{_h(text)}</i></font>')
    if view is not None:
        mark, details = state_notes(view, name)
        if mark is not None:
            cls = state_class(view, name)
            color = STATE_COLOURS[cls][1] if cls in ("incident", "warned") else "#b45309"
            lines.append(f'<font point-size="10" color="{color}"><b>{_h(mark)}</b></font>')
            lines += [f'<font point-size="9" color="{color}">{_h(d)}</font>' for d in details]
        waited = wait_text(view, name)
        if waited is not None:
            lines.append(f'<font point-size="10" color="{PATH_COLOUR}"><i>{_h(waited)}</i></font>')
    return "<" + "<br/>".join(lines) + ">"


def _legend(decl: Declaration, run: RunView | None) -> str:
    """How to read the picture (only the parts this machine uses)."""
    ts = decl.transitions
    parts = ["label: trigger"]
    if any(t.guards or t.unless for t in ts):
        parts[0] += " [guards]"
    if any(t.emits for t in ts):
        parts[0] += " / emitted events"
    if any(is_auto(decl, t.trigger) for t in ts):
        parts.append("italic: fired by the machine itself")
    if any(t.trigger in EXCEPTIONAL_TRIGGERS for t in ts):
        parts.append("dashed: abort and failure")
    if any(t.reason for t in ts):
        parts.append("agent_end(reason): the run's outcome")
    if run is None and decl.variables:
        parts.append("violet: the declared variables a transition reads and sets")
    if run is not None:
        parts[:0] = [f"N{TIMES}: times a transition fired", "thick blue: the path taken"]
        if run.incident is not None:
            parts.insert(2, f"red: where it {'failed' if run.outcome == 'error' else 'aborted'}")
        elif run.despite_tool_errors:
            parts.insert(2, "orange: tool errors")
    return " · ".join(parts)


def to_dot(decl: Declaration, run: RunView | None = None) -> str:
    """The machine as Graphviz DOT source (with ``run`` overlaid when given)."""
    title = (
        f'<<font point-size="16"><b>{_h(diagram_title(decl, run))}</b></font><br/>'
        f'<font point-size="10" color="{MUTED}">{_h(_legend(decl, run))}</font>>'
    )
    out = [
        f"// Generated from states/{decl.name}.toml by `agentcore-fsm diagram`. Do not edit.",
        f"digraph {_q(decl.name)} {{",
        "  graph "
        + _attrs(
            rankdir=_RANKDIR,
            fontname="Helvetica",
            label=title,
            labelloc="t",
            nodesep="0.45",
            ranksep="0.55",
            pad="0.3",
        )
        + ";",
        "  node "
        + _attrs(
            shape="box",
            style="rounded,filled",
            fillcolor="#f7fafc",
            color=INK,
            fontname="Helvetica",
            fontsize="12",
            fontcolor=INK,
            margin="0.15,0.06",
        )
        + ";",
        "  edge "
        + _attrs(fontname="Helvetica", fontsize="10", color=INK, fontcolor=INK, arrowsize="0.7")
        + ";",
        "  __start__ " + _attrs(shape="point", width="0.14", label="", color=INK) + ";",
    ]
    if run is None and decl.variables:
        note = _attrs(
            shape="note",
            style="filled",
            fillcolor="#faf5ff",
            color=VARIABLE_COLOUR,
            label=_variables_note(decl),
            id="variables",
        )
        out.append(f"  __variables__ {note};")
    for name in decl.states:
        attrs: dict[str, str] = {"label": _node_label(decl, name, run), "id": f"state-{name}"}
        if name == decl.final:
            attrs["peripheries"] = "2"
        if run is not None:
            cls = state_class(run, name)
            attrs.update(_STATE_STYLE[cls])
            attrs["class"] = cls
        out.append(f"  {_q(name)} {_attrs(**attrs)};")
    start_attrs = {"color": PATH_COLOUR, "penwidth": "2"} if run is not None and run.path else {}
    out.append(
        f"  __start__ -> {_q(decl.initial)}{' ' + _attrs(**start_attrs) if start_attrs else ''};"
    )
    fatal = fatal_group(decl, run)  # the arrow out of the incident state
    for group in arrow_groups(decl, run):
        attrs = {
            "label": _edge_label(decl, group, run),
            "id": f"edge-{group.source}-{group.dest}{'-x' if group.exceptional else ''}",
        }
        if group.exceptional:
            attrs.update(style="dashed", color=EXC, fontcolor=EXC, fontsize="9")
        if run is not None:
            if group.count:
                width = edge_width(group.count)
                color = (
                    INCIDENT
                    if (group.source, group.dest, group.exceptional) == fatal
                    else PATH_COLOUR
                )
                attrs.update(color=color, fontcolor=INK, penwidth=f"{width:g}")
                attrs["class"] = "taken"
            else:
                attrs.update(color=FADED)
        out.append(f"  {_q(group.source)} -> {_q(group.dest)} {_attrs(**attrs)};")
    if run is not None and run.nested:
        out[2] = out[2][:-2] + ', compound="true"];'
        out += _clusters(decl, run)
    out.append("}")
    return "\n".join(out) + "\n"


def _cluster_node(number: int, state: str) -> str:
    return _q(f"n{number}:{state}")


def _clusters(decl: Declaration, run: RunView) -> list[str]:
    """The nested runs of ``run`` as clusters (each inside its parent's), and a dotted arrow
    from the state where the parent stood while the call ran to each."""
    every = nested_clusters(run)
    inside: dict[int, list[tuple[int, NestedView]]] = {}
    for number, nested, parent in every:
        inside.setdefault(parent, []).append((number, nested))
    lines: list[str] = []

    def cluster(number: int, nested: NestedView, indent: str) -> None:
        view = nested.view
        title = (
            f'<<b>{_h(nested.label)}</b><br/><font point-size="9" color="{MUTED}">'
            f"{_h(nested_title(nested))}</font>>"
        )
        lines.append(f"{indent}subgraph {_q(f'cluster_n{number}')} {{")
        lines.append(
            f"{indent}  graph "
            + _attrs(label=title, style="rounded,dashed", color=PATH_COLOUR, id=f"nested-{number}")
            + ";"
        )
        shown = [name for name in decl.states if name in view.visited]
        for name in shown:
            cls = state_class(view, name)
            attrs = {"label": _node_label(decl, name, view), "id": f"n{number}-state-{name}"}
            attrs.update(_STATE_STYLE[cls])
            attrs["class"] = cls
            lines.append(f"{indent}  {_cluster_node(number, name)} {_attrs(**attrs)};")
        for group in taken_groups(decl, view):
            label = "<br/>".join(_h(line) for line in taken_label(group))
            attrs = {
                "label": f"<{label}>",
                "color": PATH_COLOUR,
                "penwidth": f"{edge_width(group.count):g}",
                "class": "taken",
            }
            if group.exceptional:
                attrs["style"] = "dashed"
            source, dest = _cluster_node(number, group.source), _cluster_node(number, group.dest)
            lines.append(f"{indent}  {source} -> {dest} {_attrs(**attrs)};")
        for child, inner in inside.get(number, []):
            cluster(child, inner, indent + "  ")
        lines.append(f"{indent}}}")

    for number, nested in inside.get(0, []):
        cluster(number, nested, "  ")
    for number, nested, parent in every:
        source = _q(nested.where) if parent == 0 else _cluster_node(parent, nested.where)
        first = _cluster_node(number, decl.initial)
        attrs = {
            "style": "dotted",
            "color": PATH_COLOUR,
            "label": nested.label.rsplit(" > ", 1)[-1],
            "lhead": f"cluster_n{number}",
            "id": f"nested-call-{number}",
        }
        lines.append(f"  {source} -> {first} {_attrs(**attrs)};")
    return lines


# --- Graphviz -----------------------------------------------------------------------------------


def find_dot(dot_binary: str | None = None) -> str | None:
    """The path of Graphviz's ``dot`` (``dot_binary`` if given and it exists), or None."""
    return shutil.which(dot_binary or "dot")


def render_dot(source: str, fmt: Literal["svg", "png"], *, dot_binary: str | None = None) -> bytes:
    """Run DOT ``source`` through Graphviz's ``dot`` and return the SVG or PNG bytes."""
    exe = find_dot(dot_binary)
    if exe is None:
        where = f" (looked for {dot_binary!r})" if dot_binary else " on PATH"
        raise GraphvizNotFoundError(GRAPHVIZ_MISSING.format(fmt=fmt.upper(), where=where))
    args = [exe, f"-T{fmt}"]
    if fmt == "png":
        args.append("-Gdpi=110")
    proc = subprocess.run(args, input=source.encode("utf-8"), capture_output=True, timeout=120)
    if proc.returncode != 0:
        detail = proc.stderr.decode("utf-8", "replace").strip()
        raise GraphvizError(f"dot -T{fmt} failed (exit {proc.returncode}): {detail}")
    return proc.stdout


def dot_digest(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def _stamp_svg(svg: bytes, dot_name: str, source: str) -> str:
    """The SVG text with a comment naming the DOT source (and its hash) it was rendered from."""
    text = svg.decode("utf-8")
    mark = f"<!-- agentcore-fsm: rendered from {dot_name} sha256={dot_digest(source)} -->\n"
    at = text.find("<svg")
    if at < 0:
        raise GraphvizError("dot produced no <svg> element")
    return text[:at] + mark + text[at:]


def render(
    decl: Declaration,
    fmt: Format = "mermaid",
    run: RunView | None = None,
    *,
    dot_binary: str | None = None,
) -> str | bytes:
    """The diagram of ``decl`` (and ``run``) as text (mermaid, dot, svg) or bytes (png)."""
    if fmt == "mermaid":
        return to_mermaid(decl, run)
    source = to_dot(decl, run)
    if fmt == "dot":
        return source
    if fmt == "svg":
        return _stamp_svg(
            render_dot(source, "svg", dot_binary=dot_binary), decl.name + ".dot", source
        )
    if fmt == "png":
        return render_dot(source, "png", dot_binary=dot_binary)
    raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")


# --- checking an SVG ----------------------------------------------------------------------------


def svg_is_current(svg: str, decl: Declaration, dot_source: str | None = None) -> list[str]:
    """Why the SVG ``svg`` is not a current render of ``decl`` (an empty list when it is):
    it must be well-formed XML, carry the hash of the DOT source rendered now, and name every
    state in its text."""
    dot_source = to_dot(decl) if dot_source is None else dot_source
    problems: list[str] = []
    try:
        root = ET.fromstring(svg)
    except ET.ParseError as exc:
        return [f"not well-formed XML: {exc}"]
    if not root.tag.endswith("svg"):
        problems.append(f"the root element is {root.tag!r}, not svg")
    match = _SVG_MARK.search(svg)
    if match is None:
        problems.append("no 'rendered from' comment")
    elif match.group(2) != dot_digest(dot_source):
        problems.append("rendered from an older DOT source")
    texts = {"".join(el.itertext()).strip() for el in root.iter() if el.tag.endswith("text")}
    missing = [name for name in decl.states if name not in texts]
    if missing:
        problems.append(f"states missing from the drawing: {', '.join(missing)}")
    return problems
