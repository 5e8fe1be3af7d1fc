"""The Mermaid this project writes, rendered by the real Mermaid in a real browser.

Every ``.mmd`` file in ``diagrams/``, plus the run view (a flowchart) and the steps (a sequence
diagram) of several recorded runs — a clean one, parallel tool calls, one that completes despite a
tool error, a failed model call, a failure in a hook, an abort while tools run, one that waits for
approval — are rendered by
the ``mermaid`` npm package (v11, installed by ``npm ci`` in ``tests/mermaid``) in headless
Chromium (Debian's ``chromium``), all in one page and one browser start. The checks read the SVG
that Mermaid produced, not the Mermaid text: it rendered without error, every state is drawn, and
in a run view the path shows — the arrows the run took are thick and blue, the others thin and
faded, the arrow where the run failed or was aborted red, the error text and the tool errors
inside the states where they belong.

``.ci/run`` installs both. When Chromium or the npm package is missing, the test fails under
``CI`` (a skip must never pass for a check in CI) and is skipped elsewhere, saying what to
install.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from nested_view_runs import nested_store

from agentcore_fsm import (
    AbortController,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    Model,
    TextContent,
    UserMessage,
    run_agent_loop,
)
from agentcore_fsm.core.declaration import (
    Declaration,
    declaration_names,
    load_declaration,
    parse_declaration,
)
from agentcore_fsm.core.declared import TransitionRecord
from agentcore_fsm.devtools.diagrams import (
    EXCEPTIONAL_TRIGGERS,
    RunView,
    run_steps,
    run_view,
    steps_mermaid,
    to_mermaid,
    view_of_recording,
)
from agentcore_fsm.devtools.run_views import view_with_nested
from agentcore_fsm.integrations.providers.faux import (
    FauxError,
    FauxProvider,
    faux_response,
    faux_tool_call,
)
from agentcore_fsm.persist.recorder import RunRecorder

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "tests" / "mermaid"
MERMAID_JS = PACKAGE / "node_modules" / "mermaid" / "dist" / "mermaid.min.js"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
SVG = "{http://www.w3.org/2000/svg}"
XHTML = "{http://www.w3.org/1999/xhtml}"
PATH_BLUE, INCIDENT_RED, FADED = "#2b6cb0", "#c53030", "#cbd5e0"
MODEL = Model(id="faux-1", provider="faux", api="faux")


def _missing() -> str | None:
    """What is missing to run the renderer (None when nothing is)."""
    problems = []
    if shutil.which(CHROMIUM) is None:
        problems.append(f"Chromium ({CHROMIUM}; Debian: apt-get install chromium)")
    if not MERMAID_JS.is_file():
        problems.append(f"the mermaid npm package (run `npm ci` in {PACKAGE.relative_to(ROOT)})")
    return " and ".join(problems) or None


def _require_renderer() -> None:
    missing = _missing()
    if missing is None:
        return
    message = f"rendering Mermaid needs {missing}; .ci/run installs both"
    if os.environ.get("CI"):
        pytest.fail(message)  # in CI a skipped check would read as a passed one
    pytest.skip(message)


# --- recorded runs -----------------------------------------------------------------------------


def _add_tool(
    fail_on: int | None = None, abort: AbortController | None = None, approval: bool = False
) -> AgentTool:
    async def execute(call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        if abort is not None:
            abort.abort("stop pressed")
            await anyio.sleep_forever()
        if params["a"] == fail_on:
            raise ValueError(f"no {fail_on}s today")
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
        requires_approval=approval,
    )


def _parallel_then_answer() -> list[Any]:
    return [
        faux_response(
            tool_calls=[
                faux_tool_call("add", {"a": 1, "b": 2}),
                faux_tool_call("add", {"a": 3, "b": 4}),
            ]
        ),
        faux_response("3 and 7."),
    ]


def _raise() -> Any:
    raise RuntimeError("the steering queue is gone")


@dataclass
class Run:
    """How to make one recorded run, and what it must show."""

    script: Callable[[], list[Any]]
    tool: Callable[[AbortController], AgentTool] | None = None
    config: Callable[[], dict[str, Any]] = dict
    error: str | None = None  # text that must be drawn in the incident state
    tool_error: str | None = None  # text of a tool error the final state must list


RUNS: dict[str, Run] = {
    "clean": Run(lambda: [faux_response("Hello.")]),
    "parallel tools": Run(_parallel_then_answer, lambda _: _add_tool()),
    "tool error": Run(
        _parallel_then_answer, lambda _: _add_tool(fail_on=3), tool_error="add: no 3s today"
    ),
    "failed model call": Run(
        lambda: [_parallel_then_answer()[0], FauxError("model overloaded")],
        lambda _: _add_tool(),
        error="model overloaded",
    ),
    "failed hook": Run(
        _parallel_then_answer,
        lambda _: _add_tool(),
        config=lambda: {"get_steering_messages": _raise},
        error="the steering queue is gone",
    ),
    "abort while tools run": Run(
        _parallel_then_answer, lambda c: _add_tool(abort=c), error="Operation aborted"
    ),
    "approval": Run(
        _parallel_then_answer,
        lambda _: _add_tool(approval=True),
        config=lambda: {"decide_approval": lambda request, signal: True},
    ),
}


def _record(run: Run, path: Path) -> None:
    controller = AbortController()
    tools = [run.tool(controller)] if run.tool is not None else []

    async def main() -> None:
        with RunRecorder(path) as rec:
            await run_agent_loop(
                [UserMessage(content="add 1 and 2, and 3 and 4")],
                AgentContext(tools=tools),
                AgentLoopConfig(model=MODEL, **run.config()),
                rec,
                stream_fn=FauxProvider(run.script()),
                on_transition=rec.on_transition,
                signal=controller.signal,
            )

    anyio.run(main)


# --- the browser -------------------------------------------------------------------------------

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>mermaid check</title></head><body>
<script src="{mermaid}"></script>
<script id="diagrams" type="application/json">{diagrams}</script>
<pre id="results"></pre>
<script>
(async () => {{
  const results = {{}};
  try {{
    mermaid.initialize({{startOnLoad: false, securityLevel: "strict"}});
    const diagrams = JSON.parse(document.getElementById("diagrams").textContent);
    const serializer = new XMLSerializer();
    let n = 0;
    for (const [name, text] of Object.entries(diagrams)) {{
      const started = performance.now();
      try {{
        await mermaid.parse(text);
        const {{svg}} = await mermaid.render("d" + n++, text);
        const holder = document.createElement("div");
        holder.innerHTML = svg;
        document.body.appendChild(holder);
        results[name] = {{ok: true, svg: serializer.serializeToString(holder.firstElementChild),
                          ms: performance.now() - started}};
        holder.remove();
      }} catch (e) {{
        results[name] = {{ok: false, error: String((e && e.message) || e)}};
      }}
    }}
  }} catch (e) {{
    results["(page)"] = {{ok: false, error: String((e && e.message) || e)}};
  }}
  document.getElementById("results").textContent = JSON.stringify(results);
}})();
</script></body></html>
"""

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--allow-file-access-from-files",
    # the dump waits until the page is idle (rendering is done) or this much virtual time
    "--virtual-time-budget=60000",
]


TIMEOUT = 120  # seconds for the whole page; it takes a few


def render_all(diagrams: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Render every diagram in one page of one headless Chromium; name -> {ok, svg | error}."""
    # a fresh, empty profile every time; Chromium's helpers may still be closing its files
    # when it returns, so the folder is removed on a best-effort basis
    with tempfile.TemporaryDirectory(prefix="mermaid-check-", ignore_cleanup_errors=True) as tmp:
        page = Path(tmp) / "page.html"
        data = json.dumps(diagrams).replace("</", "<\\/")
        page.write_text(PAGE.format(mermaid=MERMAID_JS.as_uri(), diagrams=data), "utf-8")
        profile = Path(tmp) / "profile"
        profile.mkdir()
        args = [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom"]
        try:
            proc = subprocess.run(
                [*args, page.as_uri()],
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:
            err = exc.stderr.decode("utf-8", "replace") if isinstance(exc.stderr, bytes) else ""
            tail = "\n".join(err.strip().splitlines()[-15:])
            raise AssertionError(
                f"Chromium did not finish rendering in {TIMEOUT} s; stderr ends:\n{tail}"
            ) from None
    found = re.search(r'<pre id="results">(.*?)</pre>', proc.stdout, re.DOTALL)
    if proc.returncode != 0 or found is None or not found.group(1).strip():
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        raise AssertionError(
            f"Chromium did not render the page (exit {proc.returncode}); stderr ends:\n{tail}"
        )
    results: dict[str, dict[str, Any]] = json.loads(html.unescape(found.group(1)))
    return results


# --- what the rendered SVG shows ---------------------------------------------------------------


def _style(element: ET.Element) -> dict[str, str]:
    """An element's inline style (the last value of each property wins, as in CSS)."""
    out: dict[str, str] = {}
    for item in (element.get("style") or "").split(";"):
        key, _, value = item.partition(":")
        if key.strip() and value.strip():
            out[key.strip()] = value.strip().removesuffix("!important").strip()
    return out


def _text(element: ET.Element) -> str:
    return " ".join(" ".join(element.itertext()).split())


@dataclass
class Drawn:
    """A rendered flowchart: each state's node (by name) and each arrow between states."""

    nodes: dict[str, ET.Element]
    node_classes: dict[str, set[str]]
    edges: list[tuple[str, str, bool, dict[str, str], str]]  # source, dest, dashed, style, label
    css: str


def read_flowchart(svg: str) -> Drawn:
    root = ET.fromstring(svg)
    by_id: dict[str, str] = {}  # Mermaid node id -> state name
    nodes: dict[str, ET.Element] = {}
    classes: dict[str, set[str]] = {}
    for g in root.iter(f"{SVG}g"):
        cls = (g.get("class") or "").split()
        found = re.fullmatch(r"[^-]+-flowchart-(.+)-\d+", g.get("id") or "")
        if "node" not in cls or found is None:
            continue
        bold = next(g.iter(f"{XHTML}b"), None)
        if bold is None:
            continue  # the start and end dots
        name = _text(bold)
        by_id[found.group(1)] = name
        nodes[name] = g
        classes[name] = set(cls)
    labels = {
        g.get("data-id"): _text(g)
        for g in root.iter(f"{SVG}g")
        if "label" in (g.get("class") or "").split() and g.get("data-id")
    }
    edges = []
    for path in root.iter(f"{SVG}path"):
        cls = (path.get("class") or "").split()
        data_id = path.get("data-id") or ""
        if "flowchart-link" not in cls:
            continue
        ends = _split_edge_id(data_id, by_id)
        if ends is None:
            continue  # from the start dot or to the end dot
        dashed = "edge-pattern-dotted" in cls or "edge-pattern-dashed" in cls
        edges.append((*ends, dashed, _style(path), labels.get(data_id, "")))
    css = "".join(_text(s) for s in root.iter(f"{SVG}style"))
    return Drawn(nodes, classes, edges, css)


def _split_edge_id(data_id: str, by_id: dict[str, str]) -> tuple[str, str] | None:
    """``L_<source id>_<dest id>_<n>`` -> the two state names (ids may hold underscores)."""
    found = re.fullmatch(r"L_(.+)_\d+", data_id)
    if found is None:
        return None
    middle = found.group(1)
    for source in by_id:
        if middle.startswith(source + "_") and middle[len(source) + 1 :] in by_id:
            return by_id[source], by_id[middle[len(source) + 1 :]]
    return None


FILLS = {
    "incident": "#fed7d7",
    "current": "#fde68a",
    "warned": "#ffedd5",
    "visited": "#dbeafe",
    "unvisited": "#ffffff",
}


def _rgb(colour: str) -> str:
    """``#rrggbb`` as the browser writes it in the SVG's stylesheet: ``rgb(r, g, b)``."""
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


def _class_fill(css: str, cls: str) -> str | None:
    """The fill that the stylesheet Mermaid wrote gives the shapes of class ``cls``."""
    found = re.search(rf"\.{cls}>\*\{{[^}}]*?fill:([^;!}}]+)", css)
    return found.group(1).strip() if found else None


def _px(value: str) -> float:
    return float(value.removesuffix("px"))


def _taken(decl: Declaration, view: RunView) -> set[tuple[str, str, bool]]:
    return {
        (source, dest, decl.transitions[index].trigger in EXCEPTIONAL_TRIGGERS)
        for index, source, dest in view.path
    }


# --- the test ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    _require_renderer()
    diagrams: dict[str, str] = {}
    for path in sorted((ROOT / "diagrams").glob("*.mmd")):
        diagrams[f"diagrams/{path.name}"] = path.read_text(encoding="utf-8")
    views: dict[str, tuple[Declaration, RunView]] = {}
    folder = tmp_path_factory.mktemp("runs")
    for name, run in RUNS.items():
        path = folder / f"{name.replace(' ', '_')}.jsonl"
        _record(run, path)
        decl, view = view_of_recording(path)
        views[name] = (decl, view)
        diagrams[f"run: {name}"] = to_mermaid(decl, view)
        diagrams[f"steps: {name}"] = steps_mermaid(decl, view)
    awkward = parse_declaration(AWKWARD)
    records = [
        TransitionRecord(0, "go", "new-item", "end"),
        TransitionRecord(1, "next", "end", "open"),
        TransitionRecord(2, "fail", "open", "x"),
    ]
    views["awkward names"] = (awkward, run_view(awkward, records, error=AWKWARD_ERROR))
    diagrams["run: awkward names"] = to_mermaid(*views["awkward names"])
    diagrams["steps: awkward names"] = steps_mermaid(*views["awkward names"])
    # a run with nested runs: a subgraph per nested run, inside its caller's
    diagrams["run: nested runs"] = to_mermaid(*view_with_nested(nested_store()))
    started = time.monotonic()
    results = render_all(diagrams)
    seconds = time.monotonic() - started
    yield {"diagrams": diagrams, "results": results, "views": views, "seconds": seconds}


def test_the_renderer_is_mermaid_11(rendered: dict[str, Any]) -> None:
    results = rendered["results"]
    assert "(page)" not in results, results.get("(page)")
    installed = json.loads((MERMAID_JS.parent.parent / "package.json").read_text("utf-8"))
    lock = json.loads((PACKAGE / "package-lock.json").read_text(encoding="utf-8"))
    assert installed["version"] == lock["packages"]["node_modules/mermaid"]["version"]
    assert installed["version"].startswith("11.")
    assert rendered["seconds"] < 60, f"rendering took {rendered['seconds']:.1f} s"


def test_every_diagram_renders_without_error(rendered: dict[str, Any]) -> None:
    diagrams, results = rendered["diagrams"], rendered["results"]
    assert len([n for n in diagrams if n.startswith("diagrams/")]) == len(declaration_names())
    failed = {n: r.get("error") for n, r in results.items() if not r["ok"]}
    assert failed == {}
    assert set(diagrams) <= set(results)
    for name in diagrams:
        root = ET.fromstring(results[name]["svg"])
        assert root.tag == f"{SVG}svg", name
        assert "Syntax error" not in _text(root), name


@pytest.mark.parametrize("name", declaration_names())
def test_static_diagrams_draw_every_state(rendered: dict[str, Any], name: str) -> None:
    svg = rendered["results"][f"diagrams/{name}.mmd"]["svg"]
    text = _text(ET.fromstring(svg))
    decl = load_declaration(name)
    missing = [state for state in decl.states if state not in text]
    assert missing == []
    assert decl.title in text  # the title is drawn


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
AWKWARD_ERROR = 'it broke: "badly"; #1 <b>'


@pytest.mark.parametrize("name", [*RUNS, "awkward names"])
def test_a_run_view_shows_the_path(rendered: dict[str, Any], name: str) -> None:
    decl, view = rendered["views"][name]
    drawn = read_flowchart(rendered["results"][f"run: {name}"]["svg"])
    assert set(drawn.nodes) == set(decl.states)
    taken = _taken(decl, view)
    fatal = None
    if view.incident_step is not None:
        index, source, dest = view.incident_step
        fatal = (source, dest, decl.transitions[index].trigger in EXCEPTIONAL_TRIGGERS)
    assert {(s, d, x) for s, d, x, _, _ in drawn.edges} >= taken
    for source, dest, dashed, style, label in drawn.edges:
        where = f"{name}: {source} -> {dest}{' (dashed)' if dashed else ''}"
        if (source, dest, dashed) in taken:
            expected = INCIDENT_RED if (source, dest, dashed) == fatal else PATH_BLUE
            assert style.get("stroke") == expected, where
            assert _px(style["stroke-width"]) >= 3, where
            assert re.search(r"\d+\N{MULTIPLICATION SIGN} ", label), where  # a count
        else:
            assert style.get("stroke") == FADED, where
            assert _px(style["stroke-width"]) <= 1, where
            assert "\N{MULTIPLICATION SIGN}" not in label, where
    # the states: visited ones filled, the rest faded, the end marked where it belongs
    for state in decl.states:
        if state == view.incident:
            cls = "incident"
        elif state == view.state:
            cls = "warned" if view.despite_tool_errors else "current"
        else:
            cls = "visited" if state in view.visited else "unvisited"
        assert cls in drawn.node_classes[state], state
        assert _class_fill(drawn.css, cls) == _rgb(FILLS[cls]), (state, cls)


@pytest.mark.parametrize("name", [n for n, r in RUNS.items() if r.error])
def test_a_failed_run_shows_why_where_it_failed(rendered: dict[str, Any], name: str) -> None:
    _, view = rendered["views"][name]
    run = RUNS[name]
    assert run.error is not None and view.incident is not None
    drawn = read_flowchart(rendered["results"][f"run: {name}"]["svg"])
    incident = _text(drawn.nodes[view.incident])
    assert f"{view.outcome} here" in incident
    assert run.error in incident
    for state, node in drawn.nodes.items():
        if state != view.incident:
            assert run.error not in _text(node), state  # said once, in the right state
    red = [(s, d) for s, d, _, style, _ in drawn.edges if style.get("stroke") == INCIDENT_RED]
    assert red == [view.incident_step[1:]] if view.incident_step else red == []


def test_a_run_that_completed_despite_a_tool_error_is_marked(rendered: dict[str, Any]) -> None:
    _, clean = rendered["views"]["parallel tools"]
    _, view = rendered["views"]["tool error"]
    assert view.outcome == clean.outcome == "completed"
    assert view.path == clean.path  # the same way through the machine...
    results = rendered["results"]
    drawn = read_flowchart(results["run: tool error"]["svg"])
    plain = read_flowchart(results["run: parallel tools"]["svg"])
    # ... yet it does not look the same: its final state is marked, with the error
    assert "warned" in drawn.node_classes["stopped"]
    assert "warned" not in plain.node_classes["stopped"]
    final = _text(drawn.nodes["stopped"])
    assert "completed despite 1 tool error" in final and "add: no 3s today" in final
    assert "tool error" not in _text(plain.nodes["stopped"])
    root = ET.fromstring(results["run: tool error"]["svg"])
    assert "despite 1 tool error" in _text(root)  # the title too


def test_a_run_that_waited_for_approval_says_how_long(rendered: dict[str, Any]) -> None:
    _, view = rendered["views"]["approval"]
    known = view.time_waited("awaiting_approval")
    assert known is not None and known[1] == 1
    drawn = read_flowchart(rendered["results"]["run: approval"]["svg"])
    assert "visited" in drawn.node_classes["awaiting_approval"]
    node = _text(drawn.nodes["awaiting_approval"])
    assert re.fullmatch(r"awaiting_approval waited \d+\.\d\d s", node), node
    for state, other in drawn.nodes.items():
        if state != "awaiting_approval":
            assert "waited" not in _text(other), state
    taken = {(s, d) for s, d, _, style, _ in drawn.edges if style.get("stroke") == PATH_BLUE}
    assert {("preparing_tools", "awaiting_approval"), ("awaiting_approval", "executing")} <= taken


def test_awkward_names_and_text_come_out_as_written(rendered: dict[str, Any]) -> None:
    decl, _ = rendered["views"]["awkward names"]
    drawn = read_flowchart(rendered["results"]["run: awkward names"]["svg"])
    assert set(drawn.nodes) == set(decl.states)
    assert AWKWARD_ERROR in _text(drawn.nodes["open"])  # escaped in the source, not here
    assert "load #1; then: wait" in _text(drawn.nodes["new-item"])


@pytest.mark.parametrize("name", [*RUNS, "awkward names"])
def test_the_steps_render_in_order(rendered: dict[str, Any], name: str) -> None:
    decl, view = rendered["views"][name]
    steps = run_steps(decl, view)
    root = ET.fromstring(rendered["results"][f"steps: {name}"]["svg"])
    numbers = [
        _text(t) for t in root.iter(f"{SVG}text") if "sequenceNumber" in (t.get("class") or "")
    ]
    assert numbers == [str(n) for n in range(1, len(steps) + 1)]
    messages = [
        _text(t) for t in root.iter(f"{SVG}text") if "messageText" in (t.get("class") or "")
    ]
    # each message: the trigger and guards, then the emits ("/ ...") and the time waited
    assert [m.split(" ")[0] for m in messages if not m.startswith(("/", "waited "))] == [
        s.trigger for s in steps
    ]
    waited = [m for m in messages if m.startswith("waited ")]
    assert len(waited) == sum(s.waited is not None for s in steps)
    if view.incident_step is not None:
        crosses = [
            line
            for line in root.iter(f"{SVG}line")
            if "cross" in (line.get("marker-end") or "").lower()
        ]
        assert len(crosses) == 1  # the step where it went wrong ends in a cross
