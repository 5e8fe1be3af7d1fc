"""The documentation's Markdown (README.md and the pages of docs/) and its code blocks.

The docs' examples are tested where they are shown:

* :func:`section` reads one section: ``## Title`` of README.md up to the next ``## `` heading,
  or a whole docs page whose title is ``# Title`` (returned with its title as ``## Title``, so
  a section reads the same wherever it lives).
* :func:`code_blocks` lists the fenced code blocks of a file. A ```` ```python ```` block is a
  standalone script (``tests/test_readme.py`` runs every one); ```` ```python-skip ```` blocks
  are only shown (they need real API keys, or are signatures). A ```` ```text ```` block that
  directly follows a ``python`` block (nothing but blank lines between) is that script's
  expected standard output, compared line by line (trailing spaces ignored).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"

_FENCE = re.compile(r"^(`{3,})([^`\n]*)$")


def doc_files() -> list[Path]:
    """README.md, then the pages of docs/ in name order."""
    return [README, *sorted(DOCS.glob("*.md"))]


def section(title: str) -> str:
    """The text of the section titled ``title``: README.md from ``## {title}`` up to the next
    ``## `` heading, or else the docs page whose first line is ``# {title}``."""
    text = README.read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(title)}\n", text, re.MULTILINE)
    if match is not None:
        end = text.find("\n## ", match.end())
        return text[match.start() : end + 1 if end != -1 else len(text)]
    for page in sorted(DOCS.glob("*.md")):
        page_text = page.read_text(encoding="utf-8")
        if page_text.startswith(f"# {title}\n"):
            return "#" + page_text
    raise KeyError(f"no section {title!r} in README.md and no docs page titled {title!r}")


@dataclass(frozen=True)
class CodeBlock:
    """A fenced code block: its file, the line of its opening fence (1-based), its language
    (the fence's info string) and its text; ``output`` is the expected standard output of a
    ``python`` block (the ``text`` block right after it), or None."""

    path: Path
    line: int
    lang: str
    code: str
    output: str | None = None

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT).as_posix()}:{self.line}"


def _raw_blocks(text: str) -> list[tuple[int, int, str, str]]:
    """(first line, line after the closing fence, language, code) of every fenced block."""
    lines = text.split("\n")
    blocks: list[tuple[int, int, str, str]] = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if match is None:
            i += 1
            continue
        fence, lang = match.group(1), match.group(2).strip()
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != fence:
            j += 1
        code = "\n".join(lines[i + 1 : j]) + "\n"
        blocks.append((i + 1, j + 1, lang, code))
        i = j + 1
    return blocks


def code_blocks(path: Path) -> list[CodeBlock]:
    """The fenced code blocks of ``path``, each python block with its expected output."""
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    raw = _raw_blocks(text)
    out: list[CodeBlock] = []
    for k, (line, after, lang, code) in enumerate(raw):
        output = None
        if lang == "python" and k + 1 < len(raw):
            nxt_line, _, nxt_lang, nxt_code = raw[k + 1]
            between = lines[after : nxt_line - 1]
            if nxt_lang == "text" and all(not s.strip() for s in between):
                output = nxt_code
        out.append(CodeBlock(path, line, lang, code, output))
    return out


def python_blocks() -> list[CodeBlock]:
    """Every ``python`` block of README.md and docs/, in file order."""
    return [b for path in doc_files() for b in code_blocks(path) if b.lang == "python"]
