"""The run viewer's page in a real browser: headless Chromium (Debian's ``chromium``) driven by
Playwright's Python package through that system browser (``executable_path``; nothing is
downloaded: never ``playwright install``). One browser for the module, a fresh page per check.

Checked: the page loads with no console error; stepping forward and back (arrow keys, the
slider) changes the highlighted state, the path so far and the transcript as the record says
(the oracle: the record's first k entries fed to a fresh machine, tests/viewer_runs.py); the
first-error, next-tool-call and next-approval jumps land on the steps the record says; nested
runs open as sub-timelines (given, and found in a store's records); a run of 10,000 steps
opens in under two seconds of browser time
(``performance.now()`` in the page when its script has drawn the last step).

``.ci/run`` installs Chromium, and the ``test`` extra Playwright. When either is missing the
tests fail under ``CI`` (a skip must never pass for a check in CI) and are skipped elsewhere,
saying what to install.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import text_of
from nested_view_runs import CHECKER, RESEARCHER, nested_store
from viewer_runs import (
    Expected,
    expected_steps,
    failing_run,
    lines,
    long_source,
    source_of,
    tool_run,
)

from agentcore_fsm.cli import viewer_shot
from agentcore_fsm.cli.viewer_shot import record_demo
from agentcore_fsm.devtools.nested_records import without_parent
from agentcore_fsm.devtools.viewer import RunSource, view_data, write_viewer
from agentcore_fsm.persist.journal import RunSnapshot, derive_run
from agentcore_fsm.persist.store import MemoryRunStore

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
LOAD_BUDGET_MS = 2000.0


def _missing() -> str | None:
    problems = []
    if shutil.which(CHROMIUM) is None:
        problems.append(f"Chromium ({CHROMIUM}; Debian: apt-get install chromium)")
    if importlib.util.find_spec("playwright") is None:
        problems.append("Playwright's Python package (pip install -e '.[test]')")
    return " and ".join(problems) or None


@dataclass(frozen=True)
class Recorded:
    """The module's recordings, made before the browser starts (Playwright's synchronous API
    keeps an asyncio loop running in this thread while it is open, so no run can be made
    then)."""

    demo: Path
    fails: Path
    parent: Path
    child: Path
    long: RunSource
    nested: MemoryRunStore


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    where = tmp_path_factory.mktemp("viewer-runs")
    return Recorded(
        demo=record_demo(where / "demo.jsonl"),
        fails=failing_run(where / "fails.jsonl"),
        parent=tool_run(where / "a.jsonl", run_id="parent"),
        child=tool_run(where / "b.jsonl", run_id="child", prompt="And 2 + 2?"),
        long=long_source(where / "turn.jsonl", 10_000),
        nested=nested_store(),
    )


@pytest.fixture(scope="module")
def browser(recorded: Recorded) -> Iterator[Any]:
    missing = _missing()
    if missing is not None:
        message = f"the viewer's browser tests need {missing}; .ci/run installs them"
        if os.environ.get("CI"):
            pytest.fail(message)  # in CI a skipped check would read as a passed one
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM)
        try:
            yield chromium
        finally:
            chromium.close()


SHOWN = """() => {
  const top = document.querySelector('#timeline-pane > .timeline');
  const current = [...document.querySelectorAll('#diagram .current')];
  const msgs = [...top.querySelectorAll('.transcript .msg')].filter(m => !m.hidden);
  return {
    step: Number(top.querySelector('.step-number').textContent),
    states: current.map(n => n.id),
    taken: [...document.querySelectorAll('#diagram .edge.taken')].map(n => n.id),
    roles: msgs.map(m => m.classList[1]),
    last: msgs.length ? msgs[msgs.length - 1].textContent : null,
    stateName: top.querySelector('.state-name').textContent,
  };
}"""
"""What the page shows now (a JavaScript function)."""


class Tab:
    """The module's one browser tab, and the console errors of the page it shows."""

    def __init__(self, browser: Any) -> None:
        self.page = browser.new_page(viewport={"width": 1400, "height": 900})
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))


@pytest.fixture(scope="module")
def browser_tab(browser: Any) -> Iterator[Tab]:
    tab = Tab(browser)
    try:
        yield tab
    finally:
        tab.page.close()


class Opened:
    """A page of the viewer opened in the tab (each test's page is another file, so that
    opening it loads it afresh), with the console errors it produced."""

    def __init__(self, tab: Tab, path: Path, fragment: str = "") -> None:
        self.page = tab.page
        tab.errors.clear()
        self.errors = tab.errors
        self.page.goto(path.as_uri() + fragment)  # returns once the page has loaded
        assert self.page.evaluate("window.viewer !== undefined"), self.errors

    def shown(self) -> dict[str, Any]:
        """What the page shows now: the step, the highlighted state, the arrows of the path,
        the transcript's visible messages."""
        result: dict[str, Any] = self.page.evaluate(f"() => ({SHOWN})()")
        return result

    def walk(self, keys: list[str]) -> list[dict[str, Any]]:
        """Press each key in turn (a keydown on the page, as the keyboard sends it) and say
        what the page shows after each: one round trip for a whole walk."""
        result: list[dict[str, Any]] = self.page.evaluate(
            f"""(keys) => keys.map(key => {{
                  document.body.dispatchEvent(
                    new KeyboardEvent('keydown', {{key, bubbles: true}}));
                  return ({SHOWN})();
                }})""",
            keys,
        )
        return result

    def press(self, key: str) -> None:
        self.page.keyboard.press(key)

    def click(self, selector: str) -> None:
        self.page.click(f"#timeline-pane > .timeline {selector}")

    def close(self) -> None:
        """Nothing to close: the tab is the module's (kept for the tests' try/finally)."""


def check_step(shown: dict[str, Any], k: int, want: Expected) -> None:
    assert shown["step"] == k + 1
    assert shown["states"] == [f"state-{want.state}"], (k, shown["states"])
    assert shown["stateName"] == want.state
    assert set(shown["taken"]) == set(want.edges), k
    assert shown["roles"] == [m.role for m in want.messages], k
    if want.messages:
        assert text_of(want.messages[-1]) in shown["last"], k


@pytest.fixture(scope="module")
def demo(recorded: Recorded) -> tuple[Path, list[Expected]]:
    """The demo session (steering, parallel reads, an approval), recorded."""
    return recorded.demo, expected_steps(source_of(recorded.demo))


@pytest.mark.parametrize("layout", ["dot", "simple"])
def test_stepping_forward_and_back_follows_the_record(
    browser_tab: Tab, demo: tuple[Path, list[Expected]], tmp_path: Path, layout: str
) -> None:
    recording, expected = demo
    page = write_viewer(recording, tmp_path / "demo.html", layout=layout)
    opened = Opened(browser_tab, page)
    try:
        assert opened.page.evaluate("document.body.dataset.layout") == layout
        n = len(expected)
        check_step(opened.shown(), n - 1, expected[-1])  # opens at the end
        opened.press("Home")  # a real key press once; then keydowns, checked after each
        check_step(opened.shown(), 0, expected[0])
        for k, shown in enumerate(opened.walk(["ArrowRight"] * n), start=1):
            check_step(shown, min(k, n - 1), expected[min(k, n - 1)])  # stays at the end
        back = opened.walk(["ArrowLeft"] * (n - 1))
        for k, shown in zip(reversed(range(n - 1)), back, strict=True):
            check_step(shown, k, expected[k])
        opened.press("End")
        check_step(opened.shown(), n - 1, expected[-1])
        opened.page.evaluate(
            """() => { const s = document.querySelector('.slider');
                       s.value = '5'; s.dispatchEvent(new Event('input')); }"""
        )
        check_step(opened.shown(), 4, expected[4])
        opened.page.click("#timeline-pane ol.steps li[data-step='6']")
        check_step(opened.shown(), 6, expected[6])
        assert opened.errors == []
    finally:
        opened.close()


def test_the_jumps_land_where_the_record_says(
    browser_tab: Tab, demo: tuple[Path, list[Expected]], tmp_path: Path
) -> None:
    recording, expected = demo
    entries = [o["entry"]["input"] for o in lines(recording) if o["kind"] == "input"]
    asked = next(k for k, want in enumerate(expected) if want.state == "awaiting_approval")
    decided = entries.index("approval_decided")
    # the screenshot (python -m agentcore_fsm.cli.viewer_shot) shows the step asking
    assert viewer_shot.approval_step(view_data(recording)) == asked + 1
    opened = Opened(browser_tab, write_viewer(recording, tmp_path / "demo.html"), "#step=1")
    try:
        assert opened.shown()["step"] == 1  # the page opens at the step its address names
        opened.click("[data-jump=approval]")
        check_step(opened.shown(), asked, expected[asked])
        opened.click("[data-jump=approval]")
        check_step(opened.shown(), decided, expected[decided])
        assert opened.page.is_disabled("#timeline-pane [data-jump=approval]")
        assert opened.page.is_disabled("#timeline-pane [data-jump=error]")  # none in the demo
        assert opened.errors == []
    finally:
        opened.close()


def test_jump_to_error_lands_on_the_failing_step(
    browser_tab: Tab, recorded: Recorded, tmp_path: Path
) -> None:
    recording = recorded.fails
    source = source_of(recording)
    expected = expected_steps(source)
    failed = next(
        k
        for k, want in enumerate(expected)
        if any(getattr(m, "stop_reason", None) == "error" for m in want.messages)
    )
    calls = [
        k
        for k, e in enumerate(source.entries)
        if e["input"] == "stream_done"
        and any(b["type"] == "toolCall" for b in e["message"]["message"]["content"])
    ]
    opened = Opened(browser_tab, write_viewer(recording, tmp_path / "fails.html"))
    try:
        opened.press("Home")
        opened.click("[data-jump=error]")
        check_step(opened.shown(), failed, expected[failed])
        bad = opened.page.evaluate(
            "[...document.querySelectorAll('.transcript .msg.bad')].filter(m => !m.hidden)"
            ".map(m => m.textContent)"
        )
        assert len(bad) == 1 and "model overloaded" in bad[0]
        opened.press("Home")
        for k in calls:
            opened.click("[data-jump=tool]")
            check_step(opened.shown(), k, expected[k])
        assert opened.page.is_disabled("#timeline-pane [data-jump=tool]")
        assert opened.errors == []
    finally:
        opened.close()


def test_several_runs_and_a_nested_sub_timeline(
    browser_tab: Tab, recorded: Recorded, tmp_path: Path
) -> None:
    both = tmp_path / "two.jsonl"
    with both.open("w", encoding="utf-8") as out:
        out.write(recorded.parent.read_text(encoding="utf-8"))
        out.writelines(json.dumps(o) + "\n" for o in lines(recorded.child) if o["kind"] != "run")
    picker = Opened(browser_tab, write_viewer(both, tmp_path / "two.html"))
    try:
        assert picker.page.text_content("#run-title") == "run parent"
        picker.page.select_option("#run-pick", "1")
        assert picker.page.text_content("#run-title") == "run child"
        assert picker.shown()["last"] is not None and "4" not in picker.shown()["last"]
        assert picker.errors == []
    finally:
        picker.close()
    page = write_viewer(both, tmp_path / "nested.html", nested={"parent": [(2, "child")]})
    opened = Opened(browser_tab, page)
    try:
        summary = "#timeline-pane details.nested-run[data-run=child]"
        opened.press("Home")
        assert not opened.page.is_visible(summary)  # the child began at step 3
        opened.press("ArrowRight")
        opened.press("ArrowRight")
        opened.page.click(summary + " > summary")
        sub = summary + " .timeline"
        child_steps = len(source_of(recorded.child).entries)
        assert opened.page.text_content(sub + " .step-count") == str(child_steps)
        assert opened.page.text_content(sub + " .step-number") == str(child_steps)
        assert "And 2 + 2?" in (opened.page.text_content(sub + " .transcript") or "")
        opened.page.click(sub + " [data-go=first]")
        assert opened.page.text_content(sub + " .step-number") == "1"
        assert opened.shown()["step"] == 3  # the parent's timeline did not move
        assert opened.errors == []
    finally:
        opened.close()


VISIBLE = """(run) => {
  const box = document.querySelector(`details.nested-run[data-run="${run}"]`);
  return [...box.querySelectorAll('.transcript .msg')]
    .filter(m => !m.hidden && m.closest('details.nested-run') === box)
    .map(m => m.textContent);
}"""
"""The text of the messages a nested run's sub-timeline shows now (not those of the runs
nested in it)."""


def test_nested_runs_found_in_the_store_open_step_and_show_their_transcript(
    browser_tab: Tab, recorded: Recorded, tmp_path: Path
) -> None:
    store = recorded.nested  # run-1 called the researcher, which called the checker
    inner = store.load(RESEARCHER)
    asks = next(k for k, e in enumerate(inner.entries) if e["input"] == "stream_done")
    snapshot = RunSnapshot.of(without_parent(inner.header), inner.entries[: asks + 1])
    then = derive_run(snapshot).machine  # the researcher once its model asked the checker
    opened = Opened(browser_tab, write_viewer(store, tmp_path / "tree.html"), "#step=1")
    try:
        page = opened.page
        top = "#timeline-pane > .timeline"
        nested = f'#timeline-pane details.nested-run[data-run="{RESEARCHER}"]'
        assert not page.is_visible(nested)  # its call started at step 2 (1 from 0)
        opened.click("[data-go=next]")
        summary = page.text_content(f"{nested} > summary") or ""
        assert summary.startswith(f"nested run researcher (c1): {RESEARCHER}"), summary
        page.click(f"{nested} > summary")
        sub = f"{nested} > .timeline"
        steps = len(inner.entries)
        assert page.text_content(f"{sub} .step-count") == str(steps)
        assert page.text_content(f"{sub} .step-number") == str(steps)
        shown = page.evaluate(VISIBLE, RESEARCHER)
        assert "How big is Lyon?" in shown[0] and "Lyon: 522,000." in shown[-1]
        page.click(f"{sub} [data-go=first]")  # step in it: its first step, then on
        assert page.text_content(f"{sub} .step-number") == "1"
        assert len(page.evaluate(VISIBLE, RESEARCHER)) == 1  # the prompt
        for _ in range(asks):
            page.click(f"{sub} [data-go=next]")
        assert page.text_content(f"{sub} .step-number") == str(asks + 1)
        assert page.text_content(f"{sub} .state-name") == then.state
        shown = page.evaluate(VISIBLE, RESEARCHER)
        assert len(shown) == len(then.new_messages) and "check 522,000" in shown[-1]
        assert page.text_content(f"{top} .step-number") == "2"  # the parent did not move
        deeper = f'{sub} details.nested-run[data-run="{CHECKER}"]'
        page.click(f"{deeper} > summary")  # the checker's run, nested in the researcher's
        assert "Checked." in page.evaluate(VISIBLE, CHECKER)[-1]
        assert opened.errors == []
    finally:
        opened.close()


def test_a_run_with_no_input_yet_opens_at_its_initial_state(
    browser_tab: Tab, recorded: Recorded, tmp_path: Path
) -> None:
    record = source_of(recorded.parent)
    empty = RunSource("empty", record.header, [], None)
    opened = Opened(browser_tab, write_viewer(empty, tmp_path / "empty.html"))
    try:
        shown = opened.shown()
        assert shown["step"] == 0 and shown["states"] == ["state-idle"] and shown["roles"] == []
        opened.press("ArrowRight")
        assert opened.shown() == shown
        assert opened.page.is_disabled("#timeline-pane [data-jump=error]")
        assert opened.errors == []
    finally:
        opened.close()


def test_ten_thousand_steps_open_in_under_two_seconds(
    browser_tab: Tab, recorded: Recorded, tmp_path: Path
) -> None:
    source = recorded.long
    assert len(source.entries) >= 9_990
    page = write_viewer(source, tmp_path / "long.html")
    opened = Opened(browser_tab, page)
    try:
        load_ms = opened.page.evaluate("window.viewer.loadMs")
        assert load_ms < LOAD_BUDGET_MS, f"opened in {load_ms:.0f} ms"
        n = len(source.entries)
        shown = opened.shown()
        assert shown["step"] == n and shown["states"] == ["state-stopped"]
        moves = opened.page.evaluate(
            """() => { const t = []; let s = performance.now();
                       window.viewer.go(0); t.push(performance.now() - s); s = performance.now();
                       window.viewer.go(5000); t.push(performance.now() - s); s = performance.now();
                       window.viewer.go(5001); t.push(performance.now() - s);
                       return t; }"""
        )
        assert max(moves) < 500, moves  # a jump across the run, and one step, stay quick
        shown = opened.shown()
        assert shown["step"] == 5002
        assert opened.errors == []
    finally:
        opened.close()
