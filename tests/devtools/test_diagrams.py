"""Diagrams of the declared machines (static) and of runs on them.

The Mermaid output is read back by a small parser written here (``stateDiagram-v2`` for the
static diagrams, ``flowchart`` for run views), so that the tests check what a reader of the
diagram sees: every declared state and transition (trigger, guards, emits), and for a run, the
counts on the transitions it took and how each arrow is styled. tests/test_mermaid_render.py
renders the same text with the real Mermaid in a browser.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentcore_fsm import (
    AbortController,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    LoopMachine,
    Model,
    TextContent,
    UserMessage,
    run_agent_loop,
)
from agentcore_fsm.cli import commands as agent_cli
from agentcore_fsm.cli import diagram as diagram_cli
from agentcore_fsm.core.declaration import (
    Declaration,
    TransitionSpec,
    declaration_names,
    load_declaration,
    parse_declaration,
)
from agentcore_fsm.core.declared import TransitionRecord
from agentcore_fsm.devtools import diagram_files, diagrams
from agentcore_fsm.devtools.diagram_files import regenerate
from agentcore_fsm.devtools.diagrams import (
    GraphvizNotFoundError,
    RunView,
    render,
    run_steps,
    run_view,
    steps_markdown,
    steps_mermaid,
    svg_is_current,
    to_dot,
    to_mermaid,
    view_of_machine,
    view_of_recording,
)
from agentcore_fsm.integrations.providers.faux import (
    FauxError,
    FauxProvider,
    faux_response,
    faux_tool_call,
)
from agentcore_fsm.persist.recorder import RunRecorder, describe_event, load_run
from tests.readme_sections import section

ROOT = Path(__file__).resolve().parents[2]
DIAGRAMS = ROOT / "diagrams"
NAMES = declaration_names()
HAS_DOT = shutil.which("dot") is not None
needs_dot = pytest.mark.skipif(not HAS_DOT, reason="Graphviz `dot` is not installed")
TIMES = "\N{MULTIPLICATION SIGN}"


# --- a small parser of the Mermaid these diagrams use ---------------------------------------------

_ENTITIES = {"#35;": "#", "#59;": ";", "#58;": ":", "#lt;": "<", "#gt;": ">", "#quot;": '"'}
_ID = r"[A-Za-z_][A-Za-z0-9_]*"
_HEAD = re.compile(rf"^(?:(\d+){TIMES} )?(\w+(?: \| \w+)*)(?: \[([^\]]*)\])?$")


class MermaidSyntaxError(ValueError):
    pass


@dataclass
class Link:
    """One arrow of a flowchart: its ends (state names), whether dashed, label and style."""

    source: str
    dest: str
    dashed: bool
    label: str
    style: dict[str, str] = field(default_factory=dict)


@dataclass
class Mermaid:
    """What a stateDiagram-v2 or flowchart text says, as far as these diagrams use the syntax."""

    title: str | None = None
    states: dict[str, str] = field(default_factory=dict)  # id -> name
    descriptions: dict[str, str] = field(default_factory=dict)
    initial: str | None = None
    final: str | None = None
    # (source, dest, trigger, conditions, emits) for every transition a label names
    transitions: Counter[tuple[str, str, str, str, tuple[str, ...]]] = field(
        default_factory=Counter
    )
    # (source, dest, trigger) -> the declared variables its label line reads and sets
    variables: dict[tuple[str, str, str], str] = field(default_factory=dict)
    # (source, dest, trigger, conditions) -> the count shown on a taken transition
    counts: dict[tuple[str, str, str, str], int] = field(default_factory=dict)
    class_defs: set[str] = field(default_factory=set)
    classes: dict[str, str] = field(default_factory=dict)  # state name -> class
    notes: dict[str, str] = field(default_factory=dict)  # a run's mark in (or beside) a state
    details: dict[str, list[str]] = field(default_factory=dict)  # lines under a state's mark
    waits: dict[str, str] = field(default_factory=dict)  # a run's time waited in a state
    kind: str = "stateDiagram-v2"
    links: list[Link] = field(default_factory=list)  # a flowchart's arrows, in order


def _unescape(text: str) -> str:
    for code, char in _ENTITIES.items():
        text = text.replace(code, char)
    return text


def _parse_label(
    label: str, variables: list[str] | None = None
) -> list[tuple[int | None, list[str], str, tuple[str, ...]]]:
    """A transition label -> [(count, triggers, conditions, emits)]; the italic lines of the
    declared variables (``reads ... · sets ...``), joined per entry, go to ``variables``."""
    entries: list[tuple[int | None, list[str], str, list[str]]] = []
    continuing = False
    for raw in label.split("<br/>"):
        line = _unescape(raw).strip()
        if variables is not None and (m := re.fullmatch(r"<i>([^<]*)</i>", line)):
            if not entries:
                raise MermaidSyntaxError(f"variables before a trigger: {label!r}")
            while len(variables) < len(entries):
                variables.append("")
            variables[len(entries) - 1] = f"{variables[len(entries) - 1]} {m.group(1)}".strip()
            continuing = False
            continue
        if line.startswith("/ ") or continuing:
            if not entries:
                raise MermaidSyntaxError(f"emits before a trigger: {label!r}")
            text = line[2:] if line.startswith("/ ") else line
            entries[-1][3].extend(x.strip() for x in text.split(",") if x.strip())
            continuing = line.endswith(",")
            continue
        match = _HEAD.match(re.sub(r"</?b>", "", line))
        if match is None:
            raise MermaidSyntaxError(f"not a 'trigger [guards]' line: {line!r}")
        count = int(match.group(1)) if match.group(1) else None
        entries.append((count, match.group(2).split(" | "), match.group(3) or "", []))
    return [(c, t, g, tuple(e)) for c, t, g, e in entries]


def parse_mermaid(text: str) -> Mermaid:
    lines = text.splitlines()
    out = Mermaid()
    if lines and lines[0] == "---":
        end = lines.index("---", 1)
        for line in lines[1:end]:
            key, _, value = line.partition(": ")
            if key == "title":
                out.title = value.strip('"')
        lines = lines[end + 1 :]
    if lines and lines[0].strip() == "flowchart TB":
        return _parse_flowchart(lines[1:], out)
    if not lines or lines[0].strip() != "stateDiagram-v2":
        raise MermaidSyntaxError("does not start with stateDiagram-v2 or flowchart TB")

    def state(token: str) -> str:
        return out.states.setdefault(token, token)

    for number, raw in enumerate(lines[1:], 2):
        line = raw.strip()
        if not line or line.startswith("%%") or re.fullmatch(r"direction (TB|BT|LR|RL)", line):
            continue
        if m := re.fullmatch(rf'state "([^"]+)" as ({_ID})', line):
            name, *rest = m.group(1).split("<br/>")
            out.states[m.group(2)] = _unescape(name)
            if rest:
                out.descriptions[_unescape(name)] = _unescape(
                    re.sub(r"</?i>", "", "<br/>".join(rest))
                )
        elif m := re.fullmatch(rf"\[\*\] --> ({_ID})", line):
            out.initial = state(m.group(1))
        elif m := re.fullmatch(rf"({_ID}) --> \[\*\]", line):
            out.final = state(m.group(1))
        elif m := re.fullmatch(rf"({_ID}) --> ({_ID})(?: : (.+))?", line):
            source, dest = state(m.group(1)), state(m.group(2))
            if m.group(3) is None:
                raise MermaidSyntaxError(f"line {number}: a transition without a label")
            variables: list[str] = []
            for number_in_label, (count, triggers, conds, emits) in enumerate(
                _parse_label(m.group(3), variables)
            ):
                for trigger in triggers:
                    out.transitions[(source, dest, trigger, conds, emits)] += 1
                    if count is not None:
                        out.counts[(source, dest, trigger, conds)] = count
                    if number_in_label < len(variables) and variables[number_in_label]:
                        key = (source, dest, trigger)
                        known = out.variables.get(key)
                        text = variables[number_in_label]
                        out.variables[key] = text if known is None else f"{known} | {text}"
        elif m := re.fullmatch(rf"classDef ({_ID}) (\S+)", line):
            out.class_defs.add(m.group(1))
        elif m := re.fullmatch(rf"class ({_ID}(?:,{_ID})*) ({_ID})", line):
            if m.group(2) not in out.class_defs:
                raise MermaidSyntaxError(f"line {number}: class {m.group(2)!r} is not defined")
            for token in m.group(1).split(","):
                out.classes[out.states[token]] = m.group(2)
        elif m := re.fullmatch(rf"note (?:right|left) of ({_ID}) : (.+)", line):
            out.notes[out.states[m.group(1)]] = _unescape(m.group(2))
        else:
            raise MermaidSyntaxError(f"line {number}: cannot parse {line!r}")
    return out


def _parse_flowchart(lines: list[str], out: Mermaid) -> Mermaid:
    """A run view: rounded states whose label is the name (bold), the effect (italic), a mark
    (bold), detail lines and the time waited there (italic, ``waited ...``); terminals
    ``((" "))`` (start) and ``(((" ")))`` (end); labelled arrows, solid or dashed; one
    ``linkStyle`` per arrow; classes."""
    out.kind = "flowchart"
    start = end = None
    ids: dict[str, str] = {}  # id -> state name
    for number, raw in enumerate(lines, 2):
        line = raw.strip()
        if not line or line.startswith("%%"):
            continue
        if m := re.fullmatch(rf'({_ID})\(\(\(" "\)\)\)', line):
            end = m.group(1)
        elif m := re.fullmatch(rf'({_ID})\(\(" "\)\)', line):
            start = m.group(1)
        elif m := re.fullmatch(rf'({_ID})\("([^"]*)"\)', line):
            first, *rest = m.group(2).split("<br/>")
            name_match = re.fullmatch(r"<b>([^<]*)</b>", first)
            if name_match is None:
                raise MermaidSyntaxError(f"line {number}: a state label without a bold name")
            name = _unescape(name_match.group(1))
            ids[m.group(1)] = name
            out.states[m.group(1)] = name
            if rest and (waited := re.fullmatch(r"<i>(waited [^<]*)</i>", rest[-1])):
                out.waits[name] = _unescape(waited.group(1))
                rest = rest[:-1]
            if rest and (effect := re.fullmatch(r"<i>([^<]*)</i>", rest[0])):
                out.descriptions[name] = _unescape(effect.group(1))
                rest = rest[1:]
            if rest:
                mark = re.fullmatch(r"<b>([^<]*)</b>", rest[0])
                if mark is None:
                    raise MermaidSyntaxError(f"line {number}: detail lines without a mark")
                out.notes[name] = _unescape(mark.group(1))
                out.details[name] = [_unescape(x) for x in rest[1:]]
        elif m := re.fullmatch(rf'({_ID}) (-->|-\.->)(?:\|"([^"]*)"\|)? ({_ID})', line):
            source, arrow, label, dest = m.groups()
            for token in (source, dest):
                if token not in ids and token not in (start, end):
                    raise MermaidSyntaxError(f"line {number}: {token!r} was not declared")
            if source == start:
                out.initial = ids[dest]
            elif dest == end:
                out.final = ids[source]
            else:
                if not label:
                    raise MermaidSyntaxError(f"line {number}: an arrow between states unlabelled")
                for count, triggers, conds, emits in _parse_label(label):
                    for trigger in triggers:
                        key = (ids[source], ids[dest], trigger, conds)
                        out.transitions[(*key, emits)] += 1
                        if count is not None:
                            out.counts[key] = count
            names = {**ids, start: "[*]", end: "[*]"}
            out.links.append(Link(names[source], names[dest], arrow == "-.->", label or ""))
        elif m := re.fullmatch(r"linkStyle (\d+) (\S+(?: \S+)*)", line):
            index = int(m.group(1))
            if index >= len(out.links) or out.links[index].style:
                raise MermaidSyntaxError(f"line {number}: linkStyle {index} names no new arrow")
            pairs = (item.split(":", 1) for item in m.group(2).split(","))
            out.links[index].style = {k: v for k, v in pairs}
        elif m := re.fullmatch(rf"classDef ({_ID}) (\S+)", line):
            out.class_defs.add(m.group(1))
        elif m := re.fullmatch(rf"class ({_ID}(?:,{_ID})*) ({_ID})", line):
            if m.group(2) not in out.class_defs:
                raise MermaidSyntaxError(f"line {number}: class {m.group(2)!r} is not defined")
            for token in m.group(1).split(","):
                if token in ids:
                    out.classes[ids[token]] = m.group(2)
        else:
            raise MermaidSyntaxError(f"line {number}: cannot parse {line!r}")
    unstyled = [n for n, link in enumerate(out.links) if not link.style]
    if unstyled:
        raise MermaidSyntaxError(f"arrows without a linkStyle: {unstyled}")
    return out


def conditions(spec: TransitionSpec) -> str:
    return ", ".join([*spec.guards, *(f"not {g}" for g in spec.unless)])


def declared(decl: Declaration) -> Counter[tuple[str, str, str, str, tuple[str, ...]]]:
    return Counter(
        (source, t.dest, t.trigger, conditions(t), shown_emits(t))
        for t in decl.transitions
        for source in t.source
    )


def shown_emits(t: TransitionSpec) -> tuple[str, ...]:
    """A transition's emit actions as the diagrams draw them: agent_end with its reason."""
    if t.reason is None:
        return t.emits
    return tuple(f"agent_end({t.reason})" if e == "agent_end" else e for e in t.emits)


def test_the_parser_rejects_what_it_does_not_understand() -> None:
    with pytest.raises(MermaidSyntaxError):
        parse_mermaid("graph TD\n  a --> b\n")
    with pytest.raises(MermaidSyntaxError):
        parse_mermaid("stateDiagram-v2\n  a -> b : x\n")
    with pytest.raises(MermaidSyntaxError):
        parse_mermaid("stateDiagram-v2\n  a --> b : x [g<br/>\n")
    with pytest.raises(MermaidSyntaxError):
        parse_mermaid("stateDiagram-v2\n  a --> b : x\n  class a undefined\n")


# --- static diagrams ----------------------------------------------------------------------------


def test_both_machines_are_declared() -> None:
    assert "agent_loop" in NAMES
    # the Agent lifecycle is rendered whenever it is declared; nothing below is specific to it
    assert diagram_cli.resolve_name("loop") == "agent_loop"


@pytest.mark.parametrize("name", NAMES)
def test_mermaid_has_every_state_and_transition(name: str) -> None:
    decl = load_declaration(name)
    parsed = parse_mermaid(to_mermaid(decl))
    assert set(parsed.states.values()) == set(decl.states)
    assert parsed.initial == decl.initial
    assert parsed.final == decl.final
    assert parsed.transitions == declared(decl)
    assert parsed.counts == {}  # a static diagram shows no run
    effects = {n: s.effect for n, s in decl.states.items() if s.effect}
    assert parsed.descriptions == effects
    assert parsed.title is not None and decl.title in parsed.title


def test_mermaid_shares_lines_only_between_equal_guards_and_emits() -> None:
    text = to_mermaid(load_declaration("agent_loop"))
    # every way into `stopped` shows the reason it declares, so abort and a failure after the
    # signal fired (both "aborted") and a plain failure ("error") keep lines of their own
    line = next(x for x in text.splitlines() if x.strip().startswith("streaming --> stopped : ab"))
    assert line.strip() == (
        # the deadline of usage limits (docs/policies.md) ends the run as an abort, reason limit
        "streaming --> stopped : abort [deadline_passed]<br/>/ limit_deadline,<br/>"
        "deadline_message, assistant_end,<br/>turn_end, agent_end(limit)<br/>"
        "abort<br/>/ assistant_end, turn_end,<br/>agent_end(aborted)"
        "<br/>fail [failed_after_abort]<br/>/ assistant_end, turn_end,<br/>agent_end(aborted)"
        "<br/>fail<br/>/ assistant_end, turn_end,<br/>agent_end(error)"
    )
    # transitions with equal guards and emits share a line
    decl = parse_declaration(
        """
        name = "share"
        initial = "a"
        final = "b"
        [states.a]
        [states.b]
        [inputs.x]
        kind = "trigger"
        [inputs.y]
        kind = "trigger"
        [guards]
        [emits]
        done = "done"
        [[transitions]]
        trigger = "x"
        source = "a"
        dest = "b"
        emits = ["done"]
        [[transitions]]
        trigger = "y"
        source = "a"
        dest = "b"
        emits = ["done"]
        """
    )
    assert "a --> b : x | y<br/>/ done" in to_mermaid(decl)


def test_a_generic_declaration_renders_with_awkward_names() -> None:
    decl = parse_declaration(
        """
        name = "odd"
        title = "Odd: a machine"
        initial = "new-item"
        final = "done"
        [states."new-item"]
        effect = "load #1; then: wait"
        [states.state]
        [states.state_0]
        [states.done]
        [inputs.go]
        kind = "trigger"
        [guards]
        ready = "ready"
        [emits]
        hello = "hello"
        [[transitions]]
        trigger = "go"
        source = "new-item"
        dest = "state"
        unless = ["ready"]
        emits = ["hello"]
        [[transitions]]
        trigger = "auto_done"
        source = ["new-item", "state", "state_0"]
        dest = "done"
        """
    )
    parsed = parse_mermaid(to_mermaid(decl))
    assert set(parsed.states.values()) == set(decl.states)
    assert parsed.transitions == declared(decl)
    assert parsed.descriptions == {"new-item": "load #1; then: wait"}
    assert parsed.initial == "new-item" and parsed.final == "done"
    source = to_dot(decl)
    assert '"new-item" -> "state"' in source
    assert "<i><b>auto_done</b></i>" in source  # not an input: fired by the machine itself


@pytest.mark.parametrize("name", NAMES)
def test_dot_has_every_state_and_transition(name: str) -> None:
    decl = load_declaration(name)
    source = to_dot(decl)
    nodes = set(re.findall(r'^  "([^"]+)" \[label=', source, re.MULTILINE))
    assert nodes == set(decl.states)
    arrows = re.findall(
        r'^  "([^"]+)" -> "([^"]+)" \[label=(<.*>), id="[^"]*"', source, re.MULTILINE
    )
    pairs = {(s, d) for s, d, _ in arrows}
    assert pairs == {(s, t.dest) for t in decl.transitions for s in t.source}
    for spec in decl.transitions:
        for s in spec.source:
            labels = " ".join(label for a, d, label in arrows if (a, d) == (s, spec.dest))
            assert f"<b>{spec.trigger}</b>" in labels
            for emitted in spec.emits:
                assert emitted in labels
    assert f'__start__ -> "{decl.initial}";' in source
    assert re.search(rf'^  "{decl.final}" \[.*peripheries="2"', source, re.MULTILINE)


@needs_dot
@pytest.mark.parametrize("name", NAMES)
def test_svg_is_well_formed_and_names_every_state(name: str) -> None:
    decl = load_declaration(name)
    svg = render(decl, "svg")
    assert isinstance(svg, str)
    root = ET.fromstring(svg)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    texts = {"".join(el.itertext()).strip() for el in root.iter("{http://www.w3.org/2000/svg}text")}
    assert set(decl.states) <= texts
    triggers = {t.trigger for t in decl.transitions}
    assert triggers <= texts
    assert svg_is_current(svg, decl) == []


@needs_dot
def test_png_is_a_png() -> None:
    png = render(load_declaration("agent_loop"), "png")
    assert isinstance(png, bytes)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")


def test_missing_graphviz_names_the_package(capsys: pytest.CaptureFixture[str]) -> None:
    decl = load_declaration("agent_loop")
    with pytest.raises(GraphvizNotFoundError) as info:
        render(decl, "svg", dot_binary="/nonexistent/dot")
    message = str(info.value)
    assert "apt-get install graphviz" in message
    assert "brew install graphviz" in message
    assert "--format mermaid" in message
    # mermaid and dot never need it
    assert isinstance(render(decl, "mermaid", dot_binary="/nonexistent/dot"), str)
    assert isinstance(render(decl, "dot", dot_binary="/nonexistent/dot"), str)


def test_missing_graphviz_from_the_command_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot on it
    assert diagram_cli.main(["--format", "svg"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("agentcore-fsm diagram: error: Rendering SVG needs Graphviz's `dot`")
    assert "apt-get install graphviz" in err and "brew install graphviz" in err


def test_svg_check_finds_what_is_wrong() -> None:
    decl = load_declaration("agent_loop")
    source = to_dot(decl)
    digest = diagrams.dot_digest(source)
    names = "".join(f"<text>{n}</text>" for n in decl.states)
    good = (
        f"<!-- agentcore-fsm: rendered from agent_loop.dot sha256={digest} -->\n"
        f'<svg xmlns="http://www.w3.org/2000/svg">{names}</svg>'
    )
    assert svg_is_current(good, decl) == []
    assert svg_is_current(good.replace(digest, "0" * 64), decl) == [
        "rendered from an older DOT source"
    ]
    assert svg_is_current(good.replace("<text>streaming</text>", ""), decl) == [
        "states missing from the drawing: streaming"
    ]
    assert svg_is_current(good.replace("</svg>", ""), decl)[0].startswith("not well-formed XML")
    unstamped = good.split("\n", 1)[1]
    assert svg_is_current(unstamped, decl) == ["no 'rendered from' comment"]


# --- diagrams/ ----------------------------------------------------------------------------------


def test_committed_diagrams_match_the_declarations() -> None:
    # the renders in diagrams/, and the copies embedded in README.md and the docs
    stale = regenerate(DIAGRAMS, check=True, embedded=diagram_files.default_embedded())
    assert stale == [], f"stale diagrams, run `make diagrams`: {[str(p) for p in stale]}"
    readme = (DIAGRAMS / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```mermaid\n(.*?)^```", readme, re.DOTALL | re.MULTILINE)
    assert len(blocks) == len(NAMES)
    for name in NAMES:
        decl = load_declaration(name)
        mermaid = to_mermaid(decl)
        assert (DIAGRAMS / f"{name}.mmd").read_text(encoding="utf-8") == mermaid
        assert (DIAGRAMS / f"{name}.dot").read_text(encoding="utf-8") == to_dot(decl)
        assert mermaid in blocks
        svg = (DIAGRAMS / f"{name}.svg").read_text(encoding="utf-8")
        assert svg_is_current(svg, decl) == []


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@needs_dot
def test_regeneration_is_idempotent(tmp_path: Path) -> None:
    first = regenerate(tmp_path)
    expected = {f"{n}.{ext}" for n in NAMES for ext in ("mmd", "dot", "svg")} | {"README.md"}
    assert {p.name for p in first} == expected
    snapshot = _snapshot(tmp_path)
    assert regenerate(tmp_path) == []
    assert regenerate(tmp_path, check=True) == []
    assert _snapshot(tmp_path) == snapshot
    # the same files as committed, apart from the SVG bytes (the local Graphviz lays them out)
    for name, data in snapshot.items():
        if not name.endswith(".svg"):
            assert (DIAGRAMS / name).read_bytes() == data, name


@needs_dot
def test_regeneration_repairs_what_is_stale(tmp_path: Path) -> None:
    regenerate(tmp_path)
    loop = tmp_path / "agent_loop"
    loop.with_suffix(".mmd").write_text("stateDiagram-v2\n", encoding="utf-8")
    svg = loop.with_suffix(".svg")
    svg.write_text(re.sub(r"sha256=[0-9a-f]{64}", "sha256=" + "0" * 64, svg.read_text()), "utf-8")
    (tmp_path / "retired.mmd").write_text("old", encoding="utf-8")
    (tmp_path / "README.md").write_text("edited by hand", encoding="utf-8")
    stale = {p.name for p in regenerate(tmp_path, check=True)}
    assert stale == {"agent_loop.mmd", "agent_loop.svg", "retired.mmd", "README.md"}
    assert (tmp_path / "retired.mmd").exists()  # check writes nothing
    assert {p.name for p in regenerate(tmp_path)} == stale
    assert not (tmp_path / "retired.mmd").exists()
    assert regenerate(tmp_path, check=True) == []


@needs_dot
def test_regenerate_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert diagram_cli.main(["--regenerate", "--check", "--dir", str(tmp_path)]) == 1
    assert "stale diagrams" in capsys.readouterr().err
    assert diagram_cli.main(["--regenerate", "--dir", str(tmp_path)]) == 0
    assert "wrote" in capsys.readouterr().out
    assert diagram_cli.main(["--regenerate", "--dir", str(tmp_path)]) == 0
    assert "up to date" in capsys.readouterr().out
    assert diagram_cli.main(["--regenerate", "--check", "--dir", str(tmp_path)]) == 0


# --- the command line ---------------------------------------------------------------------------


@pytest.mark.parametrize(("machine", "name"), [("loop", "agent_loop"), (None, "agent_loop")])
def test_cli_prints_mermaid(
    machine: str | None, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["diagram"] + (["--machine", machine] if machine else [])
    assert agent_cli.main(argv) == 0
    assert capsys.readouterr().out == to_mermaid(load_declaration(name))


@pytest.mark.skipif("agent" not in NAMES, reason="states/agent.toml is not declared")
def test_cli_renders_the_agent_lifecycle(capsys: pytest.CaptureFixture[str]) -> None:
    assert diagram_cli.main(["--machine", "agent", "--format", "dot"]) == 0
    assert capsys.readouterr().out == to_dot(load_declaration("agent"))


def test_cli_writes_files_by_suffix(tmp_path: Path) -> None:
    decl = load_declaration("agent_loop")
    assert diagram_cli.main(["--out", str(tmp_path / "loop.dot")]) == 0
    assert (tmp_path / "loop.dot").read_text(encoding="utf-8") == to_dot(decl)
    assert diagram_cli.main(["--format", "mermaid", "--out", str(tmp_path / "x.txt")]) == 0
    assert (tmp_path / "x.txt").read_text(encoding="utf-8") == to_mermaid(decl)
    if HAS_DOT:
        assert diagram_cli.main(["--out", str(tmp_path / "loop.svg")]) == 0
        ET.parse(tmp_path / "loop.svg")
        assert diagram_cli.main(["--out", str(tmp_path / "loop.png")]) == 0
        assert (tmp_path / "loop.png").read_bytes().startswith(b"\x89PNG")


def test_cli_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert diagram_cli.main(["--machine", "nope"]) == 2  # a bad argument, as argparse's errors
    err = capsys.readouterr().err
    assert "no machine named 'nope'; known: loop" in err
    with pytest.raises(SystemExit) as exit_info:
        diagram_cli.main(["--check"])
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit):
        diagram_cli.main(["--regenerate", "--machine", "loop"])
    with pytest.raises(SystemExit):
        diagram_cli.main(["--format", "gif"])
    assert diagram_cli.main(["--run", "/nonexistent/run.jsonl"]) == 1
    assert "run.jsonl" in capsys.readouterr().err


def test_diagrams_stay_off_the_runtime_path() -> None:
    code = (
        "import sys, agentcore_fsm\n"
        "modules = ('diagrams', 'diagram_files', 'diagram_cli')\n"
        "loaded = [m for m in modules if 'agentcore_fsm.' + m in sys.modules]\n"
        "assert not loaded, loaded\n"
        "import agentcore_fsm.devtools.diagrams\n"
        "assert not any(m.startswith('transitions.extensions') for m in sys.modules)\n"
        "assert 'graphviz' not in sys.modules\n"
        "# rendering needs neither the diagrams/ folder nor the command line\n"
        "assert 'agentcore_fsm.devtools.diagram_files' not in sys.modules\n"
        "assert 'agentcore_fsm.cli.diagram' not in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


# --- runs ---------------------------------------------------------------------------------------

MODEL = Model(id="faux-1", provider="faux", api="faux")


def _add_tool() -> AgentTool:
    async def execute(call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        return AgentToolResult(content=[TextContent(text=str(params["a"] + params["b"]))])

    return AgentTool(
        name="add",
        description="Add two numbers.",
        parameters={
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
        execute=execute,
    )


async def _record(
    tmp_path: Path,
    script: list[Any],
    tools: list[AgentTool],
    config: dict[str, Any] | None = None,
    **kw: Any,
) -> tuple[Path, list[TransitionRecord]]:
    path = tmp_path / "run.jsonl"
    taken: list[TransitionRecord] = []

    def on_transition(record: TransitionRecord) -> None:
        taken.append(record)
        rec.on_transition(record)

    with RunRecorder(path) as rec:
        await run_agent_loop(
            [UserMessage(content="add 1 and 2, then 3 and 4")],
            AgentContext(tools=tools),
            AgentLoopConfig(model=MODEL, **(config or {})),
            rec,
            stream_fn=FauxProvider(script),
            on_transition=on_transition,
            **kw,
        )
    return path, taken


def _tool_script() -> list[Any]:
    return [
        faux_response(
            tool_calls=[
                faux_tool_call("add", {"a": 1, "b": 2}),
                faux_tool_call("add", {"a": 3, "b": 4}),
            ]
        ),
        faux_response(tool_calls=[faux_tool_call("add", {"a": 3, "b": 7})]),
        faux_response("3, 7 and 10."),
    ]


def _expected_counts(
    decl: Declaration, taken: list[TransitionRecord]
) -> Counter[tuple[str, str, str, str]]:
    return Counter(
        (r.source, r.dest, r.trigger, conditions(decl.transitions[r.index])) for r in taken
    )


def _svg_taken(svg: str) -> dict[str, set[tuple[str, str]]]:
    """SVG ``class`` -> the (source, dest) arrows or the states drawn with it."""
    ns = "{http://www.w3.org/2000/svg}"
    out: dict[str, set[tuple[str, str]]] = {}
    for g in ET.fromstring(svg).iter(f"{ns}g"):
        classes = g.get("class", "").split()
        title = g.find(f"{ns}title")
        assert title is not None or "graph" in classes
        if title is None or len(classes) < 2:
            continue
        text = title.text or ""
        source, _, dest = text.partition("->")
        out.setdefault(classes[1], set()).add((source, dest))
    return out


PATH_BLUE, INCIDENT_RED, FADED = "#2b6cb0", "#c53030", "#cbd5e0"


def arrows(taken: list[TransitionRecord]) -> set[tuple[str, str, bool]]:
    """The arrows a run took: (source, dest, exceptional)."""
    return {(r.source, r.dest, r.trigger in ("abort", "fail")) for r in taken}


def check_link_styles(
    parsed: Mermaid, taken: list[TransitionRecord], red: tuple[str, str, bool] | None = None
) -> None:
    """Every arrow between states: thick blue if the run took it (red: the fatal one), thin and
    faded if not; exceptional arrows dashed."""
    assert parsed.kind == "flowchart"
    went = arrows(taken)
    for link in parsed.links:
        if "[*]" in (link.source, link.dest):
            continue
        key = (link.source, link.dest, link.dashed)
        width = float(link.style["stroke-width"].removesuffix("px"))
        if key in went:
            assert link.style["stroke"] == (INCIDENT_RED if key == red else PATH_BLUE), key
            assert width >= 3, key
            assert f"{TIMES} " in link.label, key
        else:
            assert link.style["stroke"] == FADED and width == 1, key
    assert {(x.source, x.dest, x.dashed) for x in parsed.links} >= went
    reds = [(x.source, x.dest, x.dashed) for x in parsed.links if x.style["stroke"] == INCIDENT_RED]
    assert reds == ([red] if red else [])


@pytest.mark.anyio
async def test_the_highlighted_path_is_the_path_taken(tmp_path: Path) -> None:
    path, taken = await _record(tmp_path, _tool_script(), [_add_tool()])
    decl = load_declaration("agent_loop")
    assert [r.trigger for r in taken].count("tools_settled") == 2  # a tool-calling run
    decl2, view = view_of_recording(path)
    assert decl2 is decl
    assert view.path == tuple((r.index, r.source, r.dest) for r in taken)
    assert view.counts == dict(Counter((r.index, r.source) for r in taken))
    assert view.state == "stopped" and view.finished and view.outcome == "completed"
    assert view.incident is None

    parsed = parse_mermaid(to_mermaid(decl, view))
    assert parsed.counts == dict(_expected_counts(decl, taken))
    assert parsed.transitions == declared(decl)  # the whole machine is still drawn
    check_link_styles(parsed, taken)
    assert parsed.initial == "idle" and parsed.final == "stopped"
    visited = {r.source for r in taken} | {r.dest for r in taken}
    assert parsed.classes["stopped"] == "current"
    assert {s for s, c in parsed.classes.items() if c == "visited"} == visited - {"stopped"}
    assert {s for s, c in parsed.classes.items() if c == "unvisited"} == set(decl.states) - visited
    assert parsed.notes == {"stopped": "final state"}
    assert parsed.title is not None and "ended: completed" in parsed.title

    source = to_dot(decl, view)
    taken_ids = set(re.findall(r'id="(edge-[^"]+)", [^\n]*class="taken"', source))
    assert taken_ids == {
        f"edge-{r.source}-{r.dest}" + ("-x" if r.trigger in ("abort", "fail") else "")
        for r in taken
    }
    if HAS_DOT:
        svg = render(decl, "svg", view)
        assert isinstance(svg, str)
        drawn = _svg_taken(svg)
        assert drawn["taken"] == {(r.source, r.dest) for r in taken}
        assert {s for s, _ in drawn["current"]} == {"stopped"}


@pytest.mark.anyio
async def test_a_failed_run_marks_where_it_failed(tmp_path: Path) -> None:
    script = [_tool_script()[0], FauxError("model overloaded")]
    path, taken = await _record(tmp_path, script, [_add_tool()])
    decl, view = view_of_recording(path)
    assert taken[-1].source == "streaming"  # the second model call failed
    assert view.outcome == "error" and view.incident == "streaming"
    assert view.error == "model overloaded"
    parsed = parse_mermaid(to_mermaid(decl, view))
    assert parsed.classes["streaming"] == "incident"
    assert parsed.classes["stopped"] == "current"
    assert parsed.notes == {"streaming": "error here", "stopped": "final state"}
    assert parsed.details["streaming"] == ["model overloaded"]  # why, where it happened
    assert parsed.counts == dict(_expected_counts(decl, taken))
    check_link_styles(parsed, taken, red=("streaming", "stopped", False))
    source = to_dot(decl, view)
    assert re.search(r'"streaming" \[.*class="incident"', source)
    assert re.search(r'"streaming" \[label=<[^\n]*model overloaded', source)
    assert re.search(r'id="edge-streaming-stopped", [^\n]*color="#c53030"', source)
    if HAS_DOT:
        svg = render(decl, "svg", view)
        assert isinstance(svg, str)
        assert {s for s, _ in _svg_taken(svg)["incident"]} == {"streaming"}


@pytest.mark.anyio
async def test_an_aborted_run_marks_where_it_was_aborted(tmp_path: Path) -> None:
    controller = AbortController()

    async def execute(call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        controller.abort("user pressed stop")
        await anyio.sleep_forever()  # cancelled by the abort
        raise AssertionError("unreachable")

    tool = AgentTool(name="add", description="", parameters={"type": "object"}, execute=execute)
    path, taken = await _record(tmp_path, _tool_script(), [tool], signal=controller.signal)
    decl, view = view_of_recording(path)
    assert taken[-1].trigger == "abort" and taken[-1].source == "executing"
    assert view.outcome == "aborted" and view.incident == "executing"
    parsed = parse_mermaid(to_mermaid(decl, view))
    assert parsed.classes["executing"] == "incident"
    assert parsed.notes["executing"] == "aborted here"
    assert view.error is not None and view.error.startswith("add: ")
    assert parsed.details["executing"] == [view.error]
    assert parsed.counts[("executing", "stopped", "abort", "")] == 1
    check_link_styles(parsed, taken, red=("executing", "stopped", True))
    assert 'id="edge-executing-stopped-x"' in to_dot(decl, view)


@pytest.mark.anyio
async def test_a_failure_outside_a_model_call_is_red_and_dashed(tmp_path: Path) -> None:
    def steering() -> Any:
        raise RuntimeError("the steering queue is gone")

    path, taken = await _record(
        tmp_path, _tool_script(), [_add_tool()], {"get_steering_messages": steering}
    )
    decl, view = view_of_recording(path)
    assert taken[-1].trigger == "fail"
    assert view.error is not None and "the steering queue is gone" in view.error
    parsed = parse_mermaid(to_mermaid(decl, view))
    check_link_styles(parsed, taken, red=(taken[-1].source, "stopped", True))
    assert parsed.notes[taken[-1].source] == "error here"
    assert any("the steering queue is gone" in x for x in parsed.details[taken[-1].source])


@pytest.mark.anyio
async def test_a_run_that_completed_despite_a_tool_error_is_marked(tmp_path: Path) -> None:
    async def execute(call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        if params["a"] == 3:
            raise ValueError("no threes today")
        return AgentToolResult(content=[TextContent(text=str(params["a"] + params["b"]))])

    tool = AgentTool(name="add", description="", parameters={"type": "object"}, execute=execute)
    path, taken = await _record(tmp_path, _tool_script(), [tool])
    decl, view = view_of_recording(path)
    assert view.outcome == "completed" and view.incident is None and view.error is None
    assert view.tool_errors == ("add: no threes today", "add: no threes today")
    assert view.despite_tool_errors
    parsed = parse_mermaid(to_mermaid(decl, view))
    check_link_styles(parsed, taken)  # the path is the same as a clean run's ...
    assert parsed.title is not None  # ... but the title, the final state and its class say it
    assert parsed.title.endswith("ended: completed despite 2 tool errors")
    assert parsed.classes["stopped"] == "warned"
    assert parsed.notes["stopped"] == "final state"
    assert parsed.details["stopped"] == [
        "completed despite 2 tool errors:",
        "add: no threes today",
        "add: no threes today",
    ]
    source = to_dot(decl, view)
    assert re.search(
        r'"stopped" \[[^\n]*completed despite 2 tool errors:[^\n]*class="warned"', source
    )
    assert "orange: tool errors" in source
    clean = run_view(decl, taken, outcome="completed")
    assert not clean.despite_tool_errors
    assert parse_mermaid(to_mermaid(decl, clean)).classes["stopped"] == "current"


def test_a_live_machine_marks_its_current_state() -> None:
    m = LoopMachine([UserMessage(content="hi")], AgentContext(), AgentLoopConfig(model=MODEL))
    m.start()
    assert m.state == "streaming"
    view = view_of_machine(m)
    assert view.state == "streaming" and not view.finished and view.outcome is None
    assert view.path == tuple((r.index, r.source, r.dest) for r in m.history)
    parsed = parse_mermaid(to_mermaid(m.declaration, view))
    assert parsed.classes["streaming"] == "current"
    assert parsed.notes == {"streaming": "current state"}
    assert parsed.title is not None and "running" in parsed.title
    assert "current state" in to_dot(m.declaration, view)


def _walk(decl: Declaration) -> list[TransitionRecord]:
    """Some path from the initial to the final state (breadth first), as records."""
    paths: dict[str, list[TransitionRecord]] = {decl.initial: []}
    frontier = [decl.initial]
    while frontier and decl.final not in paths:
        nxt = []
        for state in frontier:
            for t in decl.transitions:
                if state in t.source and t.dest not in paths:
                    paths[t.dest] = [
                        *paths[state],
                        TransitionRecord(t.index, t.trigger, state, t.dest),
                    ]
                    nxt.append(t.dest)
        frontier = nxt
    return paths[decl.final]


@pytest.mark.parametrize("name", NAMES)
def test_run_view_of_any_declaration(name: str) -> None:
    decl = load_declaration(name)
    walk = _walk(decl)
    view = run_view(decl, walk + walk)  # two runs: the counts add up
    assert view.state == decl.final and view.finished
    assert set(view.counts.values()) == {2}
    parsed = parse_mermaid(to_mermaid(decl, view))
    assert sum(parsed.counts.values()) == 2 * len(walk)
    assert parsed.transitions == declared(decl)


def test_run_view_rejects_records_the_declaration_does_not_have() -> None:
    decl = load_declaration("agent_loop")
    with pytest.raises(ValueError, match="declares no transition #999"):
        run_view(decl, [TransitionRecord(999, "start", "idle", "awaiting_steering")])
    with pytest.raises(ValueError, match="another version of the declaration"):
        run_view(decl, [TransitionRecord(0, "start", "idle", "streaming")])
    start = decl.transitions[0]
    follow = next(t for t in decl.transitions if "awaiting_follow_up" in t.source)
    with pytest.raises(ValueError, match="does not start where the previous ended"):
        run_view(
            decl,
            [
                TransitionRecord(0, start.trigger, "idle", start.dest),
                TransitionRecord(follow.index, follow.trigger, "awaiting_follow_up", follow.dest),
            ],
        )
    with pytest.raises(ValueError, match="no state 'nowhere'"):
        run_view(decl, [], state="nowhere")


def test_run_view_infers_the_outcome() -> None:
    decl = load_declaration("agent_loop")
    start = TransitionRecord(0, "start", "idle", "awaiting_steering")
    fail = next(
        t
        for t in decl.transitions
        if t.trigger == "fail" and "awaiting_steering" in t.source and not t.guards
    )
    failed = run_view(
        decl, [start, TransitionRecord(fail.index, "fail", "awaiting_steering", "stopped")]
    )
    assert (failed.outcome, failed.incident) == ("error", "awaiting_steering")
    # an explicit outcome (agent_end's reason) wins over the inference
    aborted = run_view(
        decl,
        [start, TransitionRecord(fail.index, "fail", "awaiting_steering", "stopped")],
        outcome="aborted",
    )
    assert (aborted.outcome, aborted.incident) == ("aborted", "awaiting_steering")
    empty = run_view(decl, [])
    assert empty == RunView(state="idle", finished=False, visited=frozenset({"idle"}))


def test_the_incident_is_where_the_abort_came_in() -> None:
    # a machine that passes through an intermediate state on its way out after an abort
    decl = parse_declaration(
        """
        name = "lifecycle"
        initial = "idle"
        final = "finished"
        [states.idle]
        [states.running]
        [states.aborting]
        [states.finished]
        [[transitions]]
        trigger = "start"
        source = "idle"
        dest = "running"
        [[transitions]]
        trigger = "abort"
        source = "running"
        dest = "aborting"
        [[transitions]]
        trigger = "finish"
        source = ["running", "aborting"]
        dest = "finished"
        """
    )
    start = TransitionRecord(0, "start", "idle", "running")
    abort = TransitionRecord(1, "abort", "running", "aborting")
    finish = TransitionRecord(2, "finish", "aborting", "finished")
    clean = TransitionRecord(2, "finish", "running", "finished")
    view = run_view(decl, [start, abort, finish], outcome="aborted")
    assert view.incident == "running" and view.incident_step == (1, "running", "aborting")
    assert re.search(r'id="edge-running-aborting-x", [^\n]*color="#c53030"', to_dot(decl, view))
    # an abort in an earlier run of the same recording is not this run's incident
    later = run_view(decl, [start, abort, finish, start, clean], outcome="error")
    assert later.incident == "running" and later.incident_step == (2, "running", "finished")
    assert run_view(decl, [start, abort, finish, start, clean]).incident is None


def test_cli_renders_a_recorded_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    async def main() -> Path:
        path, _ = await _record(tmp_path, _tool_script(), [_add_tool()])
        return path

    path = anyio.run(main)
    assert agent_cli.main(["diagram", "--run", str(path)]) == 0
    out = capsys.readouterr().out
    decl, view = view_of_recording(load_run(path))
    assert out == to_mermaid(decl, view)
    assert (
        diagram_cli.main(["--run", str(path), "--format", "dot", "--out", str(tmp_path / "r.dot")])
        == 0
    )
    assert (tmp_path / "r.dot").read_text(encoding="utf-8") == to_dot(decl, view)
    assert diagram_cli.main(["--run", str(path), "--machine", "agent"]) == 1
    assert "has no transitions of 'agent'" in capsys.readouterr().err
    if HAS_DOT:
        assert diagram_cli.main(["--run", str(path), "--out", str(tmp_path / "r.png")]) == 0
        assert (tmp_path / "r.png").read_bytes().startswith(b"\x89PNG")


# --- the steps of a run, in order ---------------------------------------------------------------


def _table_rows(markdown: str) -> list[list[str]]:
    """The body rows of the (one) Markdown table, as cells (``\\|`` is a pipe in a cell)."""
    rows = []
    for line in markdown.splitlines():
        if re.match(r"\| \d+ \|", line):
            cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
            rows.append([c.strip().replace("\\|", "|") for c in cells])
    return rows


@pytest.mark.anyio
async def test_the_steps_of_a_recorded_run_are_in_order(tmp_path: Path) -> None:
    path, taken = await _record(tmp_path, _tool_script(), [_add_tool()])
    decl, view = view_of_recording(path)
    steps = run_steps(decl, view)
    assert [(s.number, s.index, s.source, s.dest) for s in steps] == [
        (n, r.index, r.source, r.dest) for n, r in enumerate(taken, 1)
    ]
    for step in steps:
        spec = decl.transitions[step.index]
        assert step.trigger == spec.trigger
        assert step.guards == (*spec.guards, *(f"not {g}" for g in spec.unless))
        # passed over: exactly the transitions tried first for the same trigger and state
        tried = [
            t.index
            for t in decl.transitions
            if t.trigger == spec.trigger and step.source in t.source and t.index < spec.index
        ]
        assert [t.index for t in step.passed_over] == tried
        assert step.auto == (spec.trigger not in decl.inputs)
    by_trigger = {s.trigger: s for s in steps}
    # the model's first answer had tool calls: the aborted/errored/truncated checks came first
    finished = by_trigger["model_finished"]
    assert [t.guards for t in finished.passed_over][:5] == [
        ("assistant_aborted",),
        ("assistant_errored", "overflow_compactable"),  # fallback and compaction
        ("assistant_errored", "fallback_left"),
        ("assistant_errored", "fell_back"),
        ("assistant_errored",),
    ]
    # every recorded event is listed once, in order, after some step
    run = load_run(path)
    listed = [e for s in steps for e in s.events]
    assert listed == [describe_event(e) for e in run.events]
    assert steps[-1].events[-1] == "agent_end(completed)"

    table = steps_markdown(decl, view)
    assert table.startswith(f"## {diagrams.diagram_title(decl, view)}\n")
    rows = _table_rows(table)
    assert len(rows) == len(taken)
    for row, step in zip(rows, steps, strict=True):
        assert row[0] == str(step.number)
        assert row[1].strip("*") == step.trigger
        assert row[2] == f"{step.source} \u2192 {step.dest}"
        assert row[3] == ", ".join(step.guards)
        assert row[5] == ", ".join(step.emits)
    assert "events recorded after" in table

    sequence = steps_mermaid(decl, view)
    messages = re.findall(r"^    (s\d+)(->>|-->>|-x|--x)(s\d+): (\w+)", sequence, re.MULTILINE)
    assert [m[3] for m in messages] == [s.trigger for s in steps]
    assert "    autonumber" in sequence
    assert not any(m[1].endswith("x") for m in messages)  # nothing went wrong


@pytest.mark.anyio
async def test_the_steps_of_a_failed_run_mark_the_step_and_say_why(tmp_path: Path) -> None:
    script = [_tool_script()[0], FauxError("model | overloaded")]
    path, taken = await _record(tmp_path, script, [_add_tool()])
    decl, view = view_of_recording(path)
    steps = run_steps(decl, view)
    assert [s.number for s in steps if s.incident] == [len(taken)]
    table = steps_markdown(decl, view)
    assert "- error: model \\| overloaded" in table  # a pipe cannot end the cell early
    rows = _table_rows(table)
    assert rows[-1][1] == "*model_finished* (error here)"
    assert all("error here" not in row[1] for row in rows[:-1])
    sequence = steps_mermaid(decl, view)
    assert re.search(r"^    s\d+-xs\d+: model_finished \[assistant_errored\]", sequence, re.M)
    assert "Note over" in sequence and "error here#58; model | overloaded" in sequence


def test_steps_without_events_and_of_an_empty_run() -> None:
    decl = load_declaration("agent_loop")
    walk = _walk(decl)
    view = run_view(decl, walk)
    table = steps_markdown(decl, view)
    assert len(_table_rows(table)) == len(walk)
    assert "events recorded after" not in table  # nothing was recorded: no such column
    assert "No transition was taken." in steps_markdown(decl, run_view(decl, []))
    with pytest.raises(ValueError, match="1 lists of events for 2 transitions"):
        run_view(decl, walk[:2], events=[["agent_start"]])
    with pytest.raises(ValueError, match="unknown steps format"):
        diagrams.render_steps(decl, view, "dot")  # type: ignore[arg-type]


def test_cli_lists_the_steps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    async def main() -> Path:
        path, _ = await _record(tmp_path, _tool_script(), [_add_tool()])
        return path

    path = anyio.run(main)
    decl, view = view_of_recording(path)
    assert agent_cli.main(["diagram", "--run", str(path), "--steps"]) == 0
    assert capsys.readouterr().out == steps_markdown(decl, view)
    assert diagram_cli.main(["--run", str(path), "--steps", "--format", "mermaid"]) == 0
    assert capsys.readouterr().out == steps_mermaid(decl, view)
    out = tmp_path / "steps.mmd"
    assert diagram_cli.main(["--run", str(path), "--steps", "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == steps_mermaid(decl, view)
    md = tmp_path / "steps.md"
    assert diagram_cli.main(["--run", str(path), "--steps", "--out", str(md)]) == 0
    assert md.read_text(encoding="utf-8") == steps_markdown(decl, view)
    capsys.readouterr()
    bad = [
        (["--run", str(path), "--steps", "--format", "svg"], "not --format svg"),
        (["--run", str(path), "--steps", "--out", str(tmp_path / "s.svg")], "does not fit"),
        (["--run", str(path), "--steps", "--format", "mermaid", "--out", str(md)], "fit"),
        (["--steps"], "--steps only goes with --run"),
        (["--format", "markdown"], "--format markdown only goes with --steps"),
        (["--regenerate", "--steps"], "--regenerate takes no"),
    ]
    for argv, message in bad:
        try:
            status = diagram_cli.main(argv)
        except SystemExit as exc:  # argparse's own errors
            status = exc.code  # type: ignore[assignment]
        assert status == 2, argv
        assert message in capsys.readouterr().err, argv


# --- the time a run waited for approval -------------------------------------------------------


async def _approval_recording(tmp_path: Path, **kw: Any) -> Path:
    """A recorded run whose two add calls need approval; the first is approved, the second
    denied. Its clock readings are then set: 1.0 s until the run leaves awaiting_approval, 3.3 s
    from then on (the person took 2.3 s to decide)."""

    def decide(request: Any, signal: Any) -> Any:
        return request.tool_call_id == "c1"

    tool = _add_tool()
    tool.requires_approval = True
    path, _ = await _record(
        tmp_path,
        [
            faux_response(
                tool_calls=[
                    faux_tool_call("add", {"a": 1, "b": 2}, id="c1"),
                    faux_tool_call("add", {"a": 3, "b": 4}, id="c2"),
                ]
            ),
            faux_response("One of them."),
        ],
        [tool],
        {"decide_approval": decide, **kw},
    )
    return path


def _retimed(path: Path, target: Path, leaving: str = "awaiting_approval") -> Path:
    """The recording with every ``t`` set to 1.0 before the first transition out of
    ``leaving`` and 3.3 from it on."""
    out: list[str] = []
    later = False
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("kind") == "transition" and record.get("source") == leaving:
            later = True
        if "t" in record:
            record["t"] = 3.3 if later else 1.0
        out.append(json.dumps(record))
    target.write_text("\n".join(out) + "\n", encoding="utf-8")
    return target


@pytest.mark.anyio
async def test_a_run_view_says_how_long_the_run_waited_for_approval(tmp_path: Path) -> None:
    path = _retimed(await _approval_recording(tmp_path), tmp_path / "timed.jsonl")
    decl, view = view_of_recording(path)
    steps = run_steps(decl, view)
    settled = [s for s in steps if s.source == "awaiting_approval"]
    assert [(s.trigger, s.dest) for s in settled] == [("approvals_settled", "executing")]
    assert [s.waited for s in steps if s.waited is not None] == [pytest.approx(2.3)]
    known = view.time_waited("awaiting_approval")
    assert known is not None and known[1:] == (1, False)
    assert known[0] == pytest.approx(2.3)
    assert view.time_waited("executing") is None and view.waiting is None

    parsed = parse_mermaid(to_mermaid(decl, view))
    assert parsed.waits == {"awaiting_approval": "waited 2.3 s"}
    assert parsed.classes["awaiting_approval"] == "visited"
    source = to_dot(decl, view)
    assert source.count("waited 2.3 s") == 1
    assert f'<font point-size="10" color="{PATH_BLUE}"><i>waited 2.3 s</i></font>' in source

    table = steps_markdown(decl, view)
    assert "- awaiting_approval: waited 2.3 s" in table
    header = next(line for line in table.splitlines() if line.startswith("| # |"))
    assert header.startswith("| # | trigger | from → to | waited | guards (held) |")
    rows = _table_rows(table)
    assert [row[3] for row in rows] == ["waited 2.3 s" if s.waited else "" for s in steps]
    waited_row = rows[settled[0].number - 1]
    assert waited_row[1:4] == [
        "*approvals_settled*",
        "awaiting_approval → executing",
        "waited 2.3 s",
    ]
    # the approval events are listed among the steps' events (the decisions in either order)
    listed = sorted(e for step in steps for e in step.events if e.startswith("approval_"))
    assert listed == [
        "approval_decided(add: approved)",
        "approval_decided(add: denied)",
        "approval_requested(add)",
        "approval_requested(add)",
    ]
    sequence = steps_mermaid(decl, view)
    assert re.search(
        r"^    s\d+->>s\d+: approvals_settled \[has_runnable_calls, not approvals_pending\]"
        r"<br/>/ run_calls<br/>waited 2\.3 s$",
        sequence,
        re.MULTILINE,
    )
    if HAS_DOT:
        svg = render(decl, "svg", view)
        assert isinstance(svg, str) and ">waited 2.3 s<" in svg


@pytest.mark.anyio
async def test_several_waits_and_a_run_that_still_waits(tmp_path: Path) -> None:
    # sequential: each call waits on its own, so the loop waits twice
    path = await _approval_recording(tmp_path, tool_execution="sequential")
    decl, view = view_of_recording(_retimed(path, tmp_path / "timed.jsonl"))
    waits = [w for w in view.waited if w is not None]
    # the first wait took 2.3 s (1.0 -> 3.3), the second none (3.3 -> 3.3)
    assert waits == [pytest.approx(2.3), 0.0]
    assert parse_mermaid(to_mermaid(decl, view)).waits == {
        "awaiting_approval": "waited 2.3 s (2 waits)"
    }

    # a run suspended while it waits: the recording stops in awaiting_approval
    lines = path.read_text(encoding="utf-8").splitlines()
    cut = next(i for i, x in enumerate(lines) if '"source":"awaiting_approval"' in x)
    stopped = tmp_path / "stopped.jsonl"
    records = [json.loads(x) for x in lines[:cut]]
    for n, record in enumerate(records):
        if "t" in record:
            record["t"] = 10.0 if n == len(records) - 1 else 1.0  # the last record: 9 s later
    stopped.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    decl, view = view_of_recording(stopped)
    assert view.state == "awaiting_approval" and view.outcome is None
    assert view.waiting == pytest.approx(9.0)
    parsed = parse_mermaid(to_mermaid(decl, view))
    assert parsed.notes["awaiting_approval"] == "current state"
    assert parsed.waits == {"awaiting_approval": "waited 9.0 s so far"}


@pytest.mark.anyio
async def test_a_recording_without_clock_readings_shows_no_wait(tmp_path: Path) -> None:
    path = await _approval_recording(tmp_path)
    bare = tmp_path / "bare.jsonl"
    records = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    bare.write_text(
        "".join(json.dumps({k: v for k, v in r.items() if k != "t"}) + "\n" for r in records),
        encoding="utf-8",
    )
    decl, view = view_of_recording(bare)
    assert view.time_waited("awaiting_approval") is None
    assert "waited" not in to_mermaid(decl, view) and "waited" not in to_dot(decl, view)
    assert "| waited |" not in steps_markdown(decl, view)
    # the real readings of the original give some wait, however short
    decl, view = view_of_recording(path)
    known = view.time_waited("awaiting_approval")
    assert known is not None and known[0] >= 0 and known[1] == 1


def test_run_view_takes_one_clock_reading_per_record() -> None:
    decl = load_declaration("agent_loop")
    walk = _walk(decl)
    with pytest.raises(ValueError, match="1 clock readings for 2 transitions"):
        run_view(decl, walk[:2], times=[0.0])
    view = run_view(decl, walk, times=[float(n) for n in range(len(walk))])
    assert view.waited == (None,) * len(walk)  # the walk never waits for approval


def test_a_run_view_with_awkward_names() -> None:
    decl = parse_declaration(AWKWARD)
    records = [
        TransitionRecord(0, "go", "new-item", "end"),
        TransitionRecord(1, "next", "end", "open"),
        TransitionRecord(2, "fail", "open", "x"),
    ]
    view = run_view(decl, records, error='it broke: "badly"; #1 <b>')
    text = to_mermaid(decl, view)
    parsed = parse_mermaid(text)
    assert set(parsed.states.values()) == set(decl.states)
    assert parsed.transitions == declared(decl)
    assert parsed.details["open"] == ['it broke: "badly"; #1 <b>']
    assert not re.search(r"^    (end|open|x)\b", text, re.MULTILINE)  # aliased in a flowchart
    check_link_styles(parsed, records, red=("open", "x", True))


AWKWARD = """
name = "awkward"
title = "Awkward: names"
initial = "new-item"
final = "x"
[states."new-item"]
effect = "load #1; then: wait"
[states.end]
[states.open]
[states.start]
[states.finish]
[states.x]
[inputs.go]
kind = "trigger"
[inputs.next]
kind = "trigger"
[inputs.fail]
kind = "trigger"
[[transitions]]
trigger = "go"
source = "new-item"
dest = "end"
[[transitions]]
trigger = "next"
source = "end"
dest = "open"
[[transitions]]
trigger = "fail"
source = ["open", "start", "finish"]
dest = "x"
"""


# --- the diagrams guide (docs/diagrams.md) -----------------------------------------------------

DOC_TEXT = section("Debugging with diagrams")


def test_the_docs_embed_the_current_loop_diagram() -> None:
    text = DOC_TEXT
    assert text.startswith("## Debugging with diagrams\n")
    blocks = re.findall(r"^```mermaid\n(.*?)^```", text, re.DOTALL | re.MULTILINE)
    assert blocks == [to_mermaid(load_declaration("agent_loop"))]
    readme = ROOT / "README.md"
    if readme.is_file() and "## Debugging with diagrams" in readme.read_text(encoding="utf-8"):
        assert diagram_files.sync_embedded(readme.read_text(encoding="utf-8"), _static()) == (
            readme.read_text(encoding="utf-8")
        )


def _static() -> dict[str, str]:
    return {
        f"{d.title} (states/{d.name}.toml)": to_mermaid(d) for d in map(load_declaration, NAMES)
    }


def test_embedded_copies_are_brought_in_step() -> None:
    loop = load_declaration("agent_loop")
    old = to_mermaid(loop).replace("steering_polled", "renamed")
    other = "```mermaid\nstateDiagram-v2\n    a --> b\n```\n"
    markdown = f"# Doc\n\n```mermaid\n{old}```\n\ntext\n\n{other}"
    synced = diagram_files.sync_embedded(markdown, _static())
    assert synced == f"# Doc\n\n```mermaid\n{to_mermaid(loop)}```\n\ntext\n\n{other}"
    assert diagram_files.sync_embedded(synced, _static()) == synced


def test_regeneration_updates_embedded_copies(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    loop = load_declaration("agent_loop")
    doc.write_text("```mermaid\n" + to_mermaid(loop).replace("turn_end", "x") + "```\n", "utf-8")
    out = tmp_path / "diagrams"
    out.mkdir()
    for name in NAMES:  # current SVGs, so that no Graphviz is needed here
        shutil.copy(DIAGRAMS / f"{name}.svg", out)
    assert doc in regenerate(out, check=True, embedded=[doc])
    regenerate(out, embedded=[doc])
    assert doc.read_text(encoding="utf-8") == "```mermaid\n" + to_mermaid(loop) + "```\n"
    assert regenerate(out, check=True, embedded=[doc]) == []


PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


@pytest.mark.parametrize("index", range(len(PYTHON_BLOCK.findall(DOC_TEXT))))
def test_the_docs_examples_run(index: int, tmp_path: Path) -> None:
    code = PYTHON_BLOCK.findall(DOC_TEXT)[index]
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    parse_mermaid(proc.stdout[proc.stdout.index("---\ntitle:") :])  # what it prints is Mermaid
