"""The docs agree with the code: the behaviour reference names every rule of the checker, every
state of the declarations and the exact texts the code produces; the architecture page names
every module; the README stays an overview that links every guide; the changelog has the
current version. (The examples are run by ``tests/test_readme.py``; links are checked by
``tests/test_doc_links.py``.)"""

from __future__ import annotations

import dataclasses
import inspect
import re
import tomllib
from pathlib import Path
from typing import get_args

import pytest

from agentcore_fsm import Agent, AgentLoopConfig
from agentcore_fsm.agent import agent
from agentcore_fsm.core import machine, tool_call
from agentcore_fsm.core.boundary import InvalidValueError, check_before_result
from agentcore_fsm.core.config import StreamOptions
from agentcore_fsm.core.declaration import load_declaration
from agentcore_fsm.core.events import AgentEndReason, AgentEvent, AssistantMessageEvent
from agentcore_fsm.core.tools import ToolCallRejected, find_tool
from agentcore_fsm.devtools.testing import RULES
from agentcore_fsm.runtime import driver
from tests.readme_sections import DOCS, README, ROOT, code_blocks

REFERENCE = DOCS / "reference.md"
PAGES = sorted(DOCS.glob("*.md"))


def _flat(text: str) -> str:
    """Text with every run of whitespace (line breaks and indentation too) made one space."""
    return re.sub(r"\s+", " ", text)


def _reference() -> str:
    return REFERENCE.read_text(encoding="utf-8")


def _section(text: str, heading: str) -> str:
    """The part of ``text`` under ``heading`` (a full heading line) up to the next heading of
    the same or a higher level."""
    level = len(heading) - len(heading.lstrip("#"))
    start = text.index(heading + "\n")
    rest = text[start + len(heading) + 1 :]
    end = re.search(rf"^#{{1,{level}}} ", rest, re.MULTILINE)
    return rest[: end.start() if end else len(rest)]


# --- the event grammar -----------------------------------------------------------------------

RULE_ID = re.compile(r"`((?:R[1-5]|T|C|A)\.[a-z_]+)`")


def test_the_reference_lists_every_rule_of_the_checker() -> None:
    grammar = _section(_reference(), "## Event grammar")
    listed = set(re.findall(r"^\| `([A-Z0-9]+\.[a-z_]+)` \|", grammar, re.MULTILINE))
    assert listed == set(RULES), (
        f"missing from the reference: {sorted(set(RULES) - listed)}; "
        f"not rules of the checker: {sorted(listed - set(RULES))}"
    )


@pytest.mark.parametrize("path", [README, *PAGES], ids=lambda p: p.name)
def test_every_rule_id_the_docs_name_exists(path: Path) -> None:
    named = set(RULE_ID.findall(path.read_text(encoding="utf-8")))
    assert named <= set(RULES), f"{path.name} names unknown rules: {sorted(named - set(RULES))}"


# --- exact texts -------------------------------------------------------------------------------


def _error_text(fn: object, *args: object) -> str:
    try:
        fn(*args)  # type: ignore[operator]
    except (ToolCallRejected, InvalidValueError) as exc:
        return str(exc)
    raise AssertionError(f"{fn} did not raise")


EXACT_TEXTS = {
    "aborted call": tool_call.ABORTED_TEXT,
    "truncated call": tool_call.TRUNCATED_TEXT.format(name="<name>"),
    "blocked call": machine.BLOCKED_TEXT,
    "aborted request": machine.REQUEST_ABORTED,
    "no stream function": driver.NO_STREAM_FN,
    "prompt while busy": agent.PROMPT_BUSY,
    "continue while busy": agent.CONTINUE_BUSY,
    "reset while busy": agent.RESET_BUSY,
    "unknown tool": _error_text(find_tool, [], "<name>"),
    "invalid before hook value": _error_text(check_before_result, 42).replace("int 42", "<what>"),
}


@pytest.mark.parametrize("text", EXACT_TEXTS.values(), ids=EXACT_TEXTS.keys())
def test_the_reference_quotes_the_codes_texts(text: str) -> None:
    assert _flat(text) in _flat(_reference())


# texts the reference quotes that the code must still produce (found in its source)
QUOTED_IN_SOURCE = {
    "runtime/driver.py": [
        "Cannot continue: no messages in context",
        "Cannot continue from message role: assistant",
    ],
    "agent/agent.py": ["No messages to continue from"],
    "agent/queues.py": ["No messages to prompt with"],
    "core/machine.py": ["Stream function ended without a done or error event"],
    "core/boundary.py": ["The stream function reported an error without an error message"],
    "core/tools.py": ["Validation failed for tool", "Received arguments:"],
}


@pytest.mark.parametrize(
    ("module", "text"),
    [(m, t) for m, texts in QUOTED_IN_SOURCE.items() for t in texts],
    ids=[t for texts in QUOTED_IN_SOURCE.values() for t in texts],
)
def test_quoted_texts_are_still_the_codes(module: str, text: str) -> None:
    assert text in (ROOT / "agentcore_fsm" / module).read_text(encoding="utf-8")
    assert text in _reference()


# --- the data model, the events, the configuration ------------------------------------------


def test_the_reference_lists_every_event() -> None:
    events = _section(_reference(), "## Agent events")
    stream = _section(_reference(), "### Stream events")
    for union, table in ((AgentEvent, events), (AssistantMessageEvent, stream)):
        classes = get_args(get_args(union)[0])  # Annotated[A | B | ..., discriminator]
        assert len(classes) >= 10
        for cls in classes:
            assert f"`{cls.__name__}`" in table, cls.__name__
            type_value = cls.__dataclass_fields__["type"].default
            assert f'`"{type_value}"`' in table, type_value


def test_the_reference_lists_every_end_reason() -> None:
    reasons = _section(_reference(), "### End reasons")
    for reason in get_args(AgentEndReason):
        assert f'| `"{reason}"` |' in reasons, reason


def test_the_reference_lists_every_config_field_and_stream_option() -> None:
    config = _section(_reference(), "### Configuration")
    for field in dataclasses.fields(AgentLoopConfig):
        assert f"`{field.name}" in config, field.name
    stream = _section(_reference(), "## The stream function")
    for field in dataclasses.fields(StreamOptions):
        assert f"`{field.name}`" in stream, field.name


def test_the_reference_shows_the_agents_signature() -> None:
    construction = _section(_reference(), "### Construction and configuration")
    shown = re.search(r"```python-skip\n(Agent\(.*?\))\n```", construction, re.DOTALL)
    assert shown is not None
    signature = inspect.signature(Agent.__init__)
    expected = [
        f"{name}={param.default!r}".replace("'", '"')
        for name, param in signature.parameters.items()
        if name != "self"
    ]
    written = [p.strip() for p in _flat(shown.group(1))[len("Agent(") : -1].split(",")]
    assert written == expected


# --- the machines ---------------------------------------------------------------------------


def test_the_reference_describes_every_state_of_the_loop() -> None:
    states = _section(_reference(), "### The states of the loop")
    declared = load_declaration("agent_loop").states
    rows = set(re.findall(r"^\| `([a-z_]+)` \|", states, re.MULTILINE))
    assert rows == set(declared)
    for name in ("tool_call", "agent"):
        for state in load_declaration(name).states:
            assert f"`{state}`" in states, f"{name}: {state}"


# --- the architecture page --------------------------------------------------------------------


def test_the_architecture_page_names_every_module_and_no_other() -> None:
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    package = ROOT / "agentcore_fsm"
    modules = {
        p.relative_to(package).as_posix()
        for p in package.rglob("*.py")
        if p.name != "__init__.py" and "__pycache__" not in p.parts
    }
    named = set(re.findall(r"`([a-z_/]+\.py)`", text))
    assert modules <= named, f"modules missing from the page: {sorted(modules - named)}"
    assert named <= modules, f"the page names modules that do not exist: {sorted(named - modules)}"
    layers = {p.name for p in package.iterdir() if (p / "__init__.py").is_file()}
    for layer in layers:
        assert f"`{layer}/`" in text, layer


# --- the pages ------------------------------------------------------------------------------


def test_the_readme_is_an_overview_that_links_every_page() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200, "the README is an overview: move details to docs/"
    for page in PAGES:
        assert f"](docs/{page.name})" in text, f"README.md does not link docs/{page.name}"
    assert "](CHANGELOG.md)" in text
    assert "make demo" in text and "make test" in text
    assert "](diagrams/agent_loop.svg)" in text


def test_the_index_page_links_every_other_page() -> None:
    text = (DOCS / "index.md").read_text(encoding="utf-8")
    for page in PAGES:
        if page.name != "index.md":
            assert f"]({page.name})" in text, f"docs/index.md does not link {page.name}"


def test_the_readme_s_first_example_is_a_typed_tool_and_an_agent_in_under_15_lines() -> None:
    first = next(b for b in code_blocks(README) if b.lang == "python")
    lines = [line for line in first.code.splitlines() if line.strip()]
    assert len(lines) < 15, f"the first example has {len(lines)} lines"
    assert "@tool" in first.code and "Agent(" in first.code
    assert first.output is not None  # and test_readme runs it against the output shown


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_page_has_a_title_and_real_content(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    prose = re.sub(r"^```.*?^```", "", text, flags=re.DOTALL | re.MULTILINE)
    assert prose.startswith("# ") and prose.count("\n# ") == 0, "one title, on the first line"
    assert len(prose.split()) >= 300, f"{page.name} is too thin to be a page of its own"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_todo_markers_do_not_show(page: Path) -> None:
    # a TODO(...) note for the maintainers lives in an HTML comment, never in rendered text
    text = page.read_text(encoding="utf-8")
    outside_comments = re.sub(r"<!--.*?-->", "", text, flags=re.DOTALL)
    assert "TODO" not in outside_comments


def test_the_changelog_starts_now_and_names_the_current_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "version"
    ]
    headings = re.findall(r"^## (.+)$", text, re.MULTILINE)
    assert text.startswith("# Changelog\n")
    assert headings[0] == "Unreleased"
    assert version in headings
