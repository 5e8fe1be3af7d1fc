"""``agentcore-fsm view RECORD -o run.html``: write the run viewer's page of a recorded or
stored run (:mod:`agentcore_fsm.devtools.viewer`; docs/viewer.md).

``RECORD`` is a JSONL recording (``RunRecorder``) or a SQLite run store (``SqliteRunStore``),
told apart by the file's first bytes. ``--run ID`` (repeatable) picks runs; by default every run
the file holds is in the page, with a run picker. ``-o``/``--out`` names the page (default: the
record's name with ``.html``); ``--layout`` how the diagram is laid out (``auto``: Graphviz when
installed, else the viewer's own layout; ``dot``; ``simple``). Nested runs (agents used as
tools, whose records name their caller) are found on their own and shown as sub-timelines
under the step their call started at; ``--run ID`` brings the runs nested in ``ID`` along.

Exit status: 0 when the page was written (its path is printed); 2 for a bad argument or a
record the viewer cannot show (missing, damaged, of another declaration, no such run, a
nested run's record that does not fit its caller, or ``--layout dot`` without Graphviz),
with a one-line error naming what was wrong; 1 when the
page could not be written. Nothing is written unless the whole page could be made.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agentcore_fsm.devtools.viewer import ViewerError, viewer_html
from agentcore_fsm.devtools.viewer_svg import LAYOUTS

PROG = "agentcore-fsm view"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Write one self-contained HTML page to step through a run in a browser: "
        "the machine's diagram with the path so far, a timeline, the transcript, each step's "
        "input, transitions, events, usage and timing. No network or server is needed: open "
        "the page from disk.",
    )
    parser.add_argument("record", metavar="RECORD", help="a JSONL recording or a SQLite run store")
    parser.add_argument(
        "-o",
        "--out",
        metavar="PAGE.html",
        help="the page to write (default: RECORD's name with .html)",
    )
    parser.add_argument(
        "--run",
        action="append",
        metavar="ID",
        dest="runs",
        help="show only this run (repeat for several; default: every run in RECORD)",
    )
    parser.add_argument(
        "--layout",
        choices=LAYOUTS,
        default="auto",
        help="how the diagram is laid out: Graphviz when installed (auto, the default), "
        "Graphviz only (dot), or the viewer's own layout (simple)",
    )
    return parser


def _error(message: str, status: int) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return status


def main(argv: list[str]) -> int:
    """Run ``agentcore-fsm view`` with ``argv``; return the exit status."""
    args = _parser().parse_args(argv)
    record = Path(args.record)
    out = Path(args.out) if args.out else record.with_suffix(".html")
    if out.suffix.lower() not in (".html", ".htm"):
        return _error(f"--out must name an .html file, not {str(out)!r}", 2)
    if not out.parent.is_dir():
        return _error(f"--out: the directory {str(out.parent)!r} does not exist", 2)
    if out.exists() and record.exists() and out.resolve() == record.resolve():
        return _error(f"--out would overwrite the record {str(record)!r}", 2)
    try:
        page = viewer_html(record, run_ids=args.runs, layout=args.layout)
    except ViewerError as exc:
        return _error(str(exc), 2)
    partial = out.with_name(f".{out.name}.partial")
    try:
        partial.write_text(page, encoding="utf-8")
        partial.replace(out)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        return _error(f"cannot write {out}: {exc.strerror or exc}", 1)
    print(f"wrote {out} ({len(page.encode('utf-8')) // 1024 + 1} KiB): open it in a browser")
    return 0
