"""Read one ``## Section`` of README.md (the docs' examples are tested where they are shown)."""

from __future__ import annotations

from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def section(title: str) -> str:
    """The text of README.md from ``## {title}`` up to the next ``## `` heading."""
    text = README.read_text(encoding="utf-8")
    head = f"## {title}\n"
    start = text.index(head)
    end = text.find("\n## ", start + len(head))
    return text[start : end + 1 if end != -1 else len(text)]
