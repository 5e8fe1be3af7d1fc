"""References into the docs resolve, and the team's internal spec is cited nowhere.

Two kinds of reference are checked in every text file of the project (``agentcore_fsm/``,
``states/``, ``tests/``, ``docs/``, ``diagrams/``, ``.ci/`` and the files at the top):

* ``docs/<page>.md#<anchor>``, written as it is, anywhere: in a docstring, a comment, a TOML
  ``doc`` string or Markdown prose. This is the form code uses to point at the docs ("see
  docs/reference.md#abort"). It is resolved from the repository's root.
* Markdown links ``[text](target)`` (and images) in ``.md`` files, resolved from the file's
  folder; ``(#anchor)`` points into the same file. Links with a scheme (``https:``) are not
  followed.

The file must exist, and an anchor must be one of the page's headings as GitHub makes it (its
text, lower-cased, punctuation dropped, spaces turned into hyphens; a repeated heading gets
``-1``, ``-2``, ...) or an explicit ``<a id="...">``.

The spec the team writes the code against is internal: users never see it, so nothing in the
project may cite it. Every citation of it (the word in capitals, with or without a section
sign) fails ``test_the_internal_spec_is_cited_nowhere``; the behaviour reference in
``docs/reference.md`` is what code and tests point to instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCANNED_DIRS = ("agentcore_fsm", "states", "tests", "docs", "diagrams", ".ci")
SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".venv",
        "node_modules",
        "__pycache__",
        ".pytest_cache",
        ".mypy_cache",
        ".ruff_cache",
        ".hypothesis",
        "build",
        "dist",
    }
)
MAX_BYTES = 2_000_000

# `docs/<path>.md`, optionally `#anchor`, not preceded by a path character (so that
# "../docs/x.md" in a Markdown link is left to the link check, which resolves it properly)
DOC_REF = re.compile(r"(?<![\w./-])(docs/[\w./-]*?\.md)(?:#([\w-]+))?")
MD_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
EXPLICIT_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"", re.IGNORECASE)
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:|^//")
# the citation: built from parts so that this file does not cite it itself
SPEC_CITATION = re.compile(r"\b" + "SP" + "EC" + r"\b")


@dataclass(frozen=True)
class Problem:
    path: Path
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.text}"


# --- anchors ------------------------------------------------------------------------------


def slugify(heading: str) -> str:
    """The anchor GitHub gives a heading: its rendered text lower-cased, every character that is
    not a letter, digit, underscore, hyphen or space dropped, and each space made a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML tags
    text = text.replace("`", "").replace("*", "")
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in "_- ")
    return text.replace(" ", "-")


def _outside_fences(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) of every line of Markdown that is not inside a fenced code block."""
    fence: str | None = None
    for number, line in enumerate(text.split("\n"), start=1):
        match = FENCE.match(line)
        if fence is None:
            if match is not None:
                fence = match.group(1)[0] * 3
                continue
            yield number, line
        elif match is not None and match.group(1).startswith(fence):
            fence = None


def anchors(markdown: str) -> set[str]:
    """Every anchor a Markdown page offers: its headings' slugs and explicit ``<a id>``s."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in _outside_fences(markdown):
        match = HEADING.match(line)
        if match is not None:
            slug = slugify(match.group(2))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
        found.update(EXPLICIT_ANCHOR.findall(line))
    return found


# --- scanning -----------------------------------------------------------------------------


def project_files(root: Path) -> list[Path]:
    """The project's text files under ``root``: the files at its top and everything in
    :data:`SCANNED_DIRS`, without caches, virtual environments and dependencies."""
    files = [p for p in sorted(root.iterdir()) if p.is_file()]
    for name in SCANNED_DIRS:
        top = root / name
        if not top.is_dir():
            continue
        for path in sorted(top.rglob("*")):
            parts = path.relative_to(root).parts
            if any(part in SKIPPED_DIRS or part.endswith(".egg-info") for part in parts):
                continue
            if path.is_file():
                files.append(path)
    return [p for p in files if _read(p) is not None]


def _read(path: Path) -> str | None:
    try:
        if path.stat().st_size > MAX_BYTES:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


class Checker:
    """Checks the references of the files under ``root`` (see the module docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._anchors: dict[Path, set[str]] = {}

    def anchors_of(self, page: Path) -> set[str]:
        page = page.resolve()
        if page not in self._anchors:
            self._anchors[page] = anchors(page.read_text(encoding="utf-8"))
        return self._anchors[page]

    def _target(self, where: Path, line: int, target: Path, anchor: str | None) -> list[Problem]:
        shown = target.relative_to(self.root) if target.is_relative_to(self.root) else target
        if not target.is_relative_to(self.root):
            return [Problem(where, line, f"{shown} is outside the repository")]
        if not target.exists():
            return [Problem(where, line, f"{shown} does not exist")]
        if anchor is None:
            return []
        if target.suffix != ".md" or not target.is_file():
            return [Problem(where, line, f"#{anchor}: {shown} is not a Markdown page")]
        if anchor not in self.anchors_of(target):
            return [Problem(where, line, f"{shown} has no heading with the anchor #{anchor}")]
        return []

    def doc_references(self, path: Path, text: str) -> list[Problem]:
        """``docs/<page>.md#<anchor>`` written anywhere, resolved from the root."""
        problems: list[Problem] = []
        for number, line in enumerate(text.split("\n"), start=1):
            for match in DOC_REF.finditer(line):
                target = (self.root / match.group(1)).resolve()
                problems += self._target(path, number, target, match.group(2))
        return problems

    def markdown_links(self, path: Path, text: str) -> list[Problem]:
        """The relative links of a Markdown file, resolved from its folder."""
        problems: list[Problem] = []
        for number, line in _outside_fences(text):
            for match in MD_LINK.finditer(line):
                link = match.group(1)
                if SCHEME.match(link):
                    continue
                file_part, _, anchor = link.partition("#")
                target = (path.parent / file_part).resolve() if file_part else path.resolve()
                problems += self._target(path, number, target, anchor or None)
        return problems

    def check(self, files: list[Path]) -> list[Problem]:
        problems: list[Problem] = []
        for path in files:
            text = _read(path)
            if text is None:
                continue
            problems += self.doc_references(path, text)
            if path.suffix == ".md":
                problems += self.markdown_links(path, text)
        return problems


def spec_citations(files: list[Path]) -> list[Problem]:
    problems: list[Problem] = []
    for path in files:
        text = _read(path)
        if text is None:
            continue
        for number, line in enumerate(text.split("\n"), start=1):
            if SPEC_CITATION.search(line):
                problems.append(Problem(path, number, line.strip()))
    return problems


def _report(problems: list[Problem], root: Path) -> str:
    return "\n".join(
        f"{p.path.relative_to(root) if p.path.is_relative_to(root) else p.path}:{p.line}: {p.text}"
        for p in problems
    )


# --- the project ----------------------------------------------------------------------------

FILES = project_files(ROOT)


def test_the_scan_sees_the_docs_and_the_code() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in FILES}
    for expected in (
        "README.md",
        "CHANGELOG.md",
        "docs/reference.md",
        "agentcore_fsm/core/machine.py",
        "states/agent_loop.toml",
        "tests/package/test_doc_links.py",
        "diagrams/README.md",
    ):
        assert expected in names
    assert not [n for n in names if "node_modules" in n or n.startswith(".venv")]


def test_every_reference_into_the_docs_resolves() -> None:
    problems = Checker(ROOT).check(FILES)
    assert not problems, "broken references:\n" + _report(problems, ROOT)


def test_the_internal_spec_is_cited_nowhere() -> None:
    problems = spec_citations(FILES)
    assert not problems, (
        f"{len(problems)} citation(s) of the internal spec; point to the behaviour reference "
        "(docs/reference.md#...) instead:\n" + _report(problems, ROOT)
    )


# --- the checker itself -----------------------------------------------------------------------

DOCS_DIR = "docs"  # written apart, so that the broken references below stay out of the scan


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("Tool error texts", "tool-error-texts"),
        ("R1: start and end", "r1-start-and-end"),
        ("R5: the run's messages", "r5-the-runs-messages"),
        ("Consuming events with `agent_loop`", "consuming-events-with-agent_loop"),
        ("Abort, idle and reset", "abort-idle-and-reset"),
        ("What goes wrong, case by case", "what-goes-wrong-case-by-case"),
        ("The [Agent](agent.md) **class**", "the-agent-class"),
    ],
)
def test_slugs_are_githubs(heading: str, slug: str) -> None:
    assert slugify(heading) == slug


def test_anchors_skip_code_and_number_repeats() -> None:
    page = '# Title\n\n## Part\n\n```python\n# not a heading\n```\n\n## Part\n\n<a id="x"></a>\n'
    assert anchors(page) == {"title", "part", "part-1", "x"}


def _tree(tmp_path: Path, files: dict[str, str]) -> list[Path]:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return project_files(tmp_path)


def test_good_references_pass(tmp_path: Path) -> None:
    files = _tree(
        tmp_path,
        {
            f"{DOCS_DIR}/page.md": "# Page\n\n## Tool errors\n\nSee [the other](other.md#top).\n",
            f"{DOCS_DIR}/other.md": "# Top\n\n[Back](page.md#tool-errors), [here](#top).\n",
            "agentcore_fsm/mod.py": f'"""See {DOCS_DIR}/page.md#tool-errors."""\n',
            "README.md": f"[Guide]({DOCS_DIR}/page.md) and [web](https://example.com/x.md#y)\n",
        },
    )
    assert Checker(tmp_path).check(files) == []


@pytest.mark.parametrize(
    ("name", "text", "needle"),
    [
        ("agentcore_fsm/mod.py", f"# see {DOCS_DIR}/page.md#gone\n", "no heading with the anchor"),
        ("states/x.toml", f'doc = "see {DOCS_DIR}/missing.md"\n', "does not exist"),
        (f"{DOCS_DIR}/other.md", "# Other\n\n[broken](page.md#nowhere)\n", "#nowhere"),
        (f"{DOCS_DIR}/other.md", "# Other\n\n[gone](missing.md)\n", "does not exist"),
        (f"{DOCS_DIR}/other.md", "# Other\n\n[self](#not-here)\n", "#not-here"),
        ("README.md", "![diagram](diagrams/none.svg)\n", "does not exist"),
        ("README.md", "[up](../../outside.md)\n", "outside the repository"),
    ],
)
def test_a_broken_reference_fails(tmp_path: Path, name: str, text: str, needle: str) -> None:
    files = _tree(tmp_path, {f"{DOCS_DIR}/page.md": "# Page\n\n## Tool errors\n", name: text})
    problems = Checker(tmp_path).check(files)
    assert len(problems) == 1 and needle in problems[0].text, problems
    assert problems[0].path == tmp_path / name


def test_a_link_inside_a_code_block_is_not_followed(tmp_path: Path) -> None:
    files = _tree(tmp_path, {"README.md": "```markdown\n[example](nowhere.md)\n```\n"})
    assert Checker(tmp_path).check(files) == []


def test_a_citation_of_the_spec_is_found(tmp_path: Path) -> None:
    cited = "SP" + "EC"
    files = _tree(
        tmp_path,
        {
            "agentcore_fsm/a.py": f'"""Abort ({cited} §4)."""\n',
            "tests/b.py": f"# what the {cited} says\n",
            f"{DOCS_DIR}/c.md": "# Clean\n\nThe reference says SPECIFIC things.\n",
        },
    )
    found = spec_citations(files)
    assert [(p.path.name, p.line) for p in found] == [("a.py", 1), ("b.py", 1)]


def test_the_scan_skips_caches_and_dependencies(tmp_path: Path) -> None:
    cited = "SP" + "EC §1"
    files = _tree(
        tmp_path,
        {
            "tests/ok.py": "x = 1\n",
            "tests/mermaid/node_modules/pkg/index.js": f"// {cited}\n",
            "agentcore_fsm/__pycache__/m.py": f"# {cited}\n",
            "build/lib/m.py": f"# {cited}\n",
            "x.egg-info/PKG-INFO": f"{cited}\n",
        },
    )
    assert [p.relative_to(tmp_path).as_posix() for p in files] == ["tests/ok.py"]
