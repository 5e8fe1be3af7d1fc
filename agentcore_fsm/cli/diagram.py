"""``agentcore-fsm diagram``: render a declared machine, or a recorded run on it.

::

    agentcore-fsm diagram [--machine loop|agent] [--format mermaid|dot|svg|png] [--out FILE]
    agentcore-fsm diagram --run RUN.jsonl|RUNS.db [--run-number N] [--format ...] [--out FILE]
    agentcore-fsm diagram --run RUN.jsonl --steps [--format markdown|mermaid] [--out FILE]
    agentcore-fsm diagram --regenerate [--check]        # keeps diagrams/ in step (make diagrams)

A run is drawn on its machine (Mermaid: a flowchart whose taken arrows are thick, with counts,
the others faded, and the arrow where it failed red; the error text is inside the state where it
happened). ``--steps`` lists the run's steps in order instead: a Markdown table by default
(trigger, from → to, the guards that held, the transitions passed over, the emit actions and the
events recorded after each step), or with ``--format mermaid`` a sequence diagram with the same
numbers (see :func:`~agentcore_fsm.devtools.diagrams.steps_markdown`). A recording of several
runs (an Agent's prompts) is drawn one run at a time: the last by default, ``--run-number N``
for another; the title says which (``recorded run 2 of 3``).

A run with **nested runs** (an agent used as a tool: their records are in the same recording
or store, docs/multi-agent.md) is drawn with a cluster per nested run, holding the states and
transitions that run took, labelled with its path of agents and calls, inside the cluster of
the run that called it; a dotted arrow goes from the state the caller stood in. ``--run`` also
takes a SQLite run store (its runs are numbered in the order they began, nested runs aside).
A nested record that does not fit its parent (its parent missing, a ``"parent"`` header of the
wrong shape) is a one-line error naming the run, exit status 2.

With ``--out`` and no ``--format``, the suffix decides the format (``.mmd``/``.mermaid``,
``.dot``/``.gv``, ``.svg``, ``.png``; no suffix: Mermaid; with ``--steps``: ``.md``/``.markdown``,
``.mmd``/``.mermaid``, no suffix: Markdown), and any other suffix is refused; with
``--format``, a suffix of another format is refused (``.txt`` goes for the text formats). The
file's directory must exist. ``--regenerate --dir DIR`` creates ``DIR`` when missing, but not
its parent. A bad argument is a one-line error and exit status 2; a failure while rendering (a
recording that cannot be read, Graphviz missing) exit status 1.

This module only reads the arguments and reports: the drawing is
:mod:`agentcore_fsm.devtools.diagrams`,
the regeneration of ``diagrams/`` :mod:`agentcore_fsm.devtools.diagram_files`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

from agentcore_fsm.core.declaration import (
    Declaration,
    DeclarationError,
    declaration_names,
    load_declaration,
)
from agentcore_fsm.devtools.diagram_files import (
    default_directory,
    default_embedded,
    ordered_names,
    regenerate,
)
from agentcore_fsm.devtools.diagrams import (
    FORMATS,
    MACHINE_ALIASES,
    STEPS_FORMATS,
    Format,
    GraphvizError,
    RunView,
    StepsFormat,
    render,
    render_steps,
    view_of_recording,
)
from agentcore_fsm.devtools.nested_records import SQLITE_MAGIC, NestedRecordError, nesting
from agentcore_fsm.devtools.run_views import view_with_nested

__all__ = [
    "UsageError",
    "known_machines",
    "main",
    "output_file_problem",
    "output_format",
    "resolve_machine",
    "resolve_name",
    "steps_format",
]


def resolve_name(machine: str) -> str:
    """A declaration name from a ``--machine`` value (``loop``, ``agent`` or a full name)."""
    name = MACHINE_ALIASES.get(machine, machine)
    known = declaration_names()
    if name not in known:
        raise DeclarationError(f"no machine named {machine!r}; known: {known_machines(known)}")
    return name


def known_machines(names: Iterable[str] | None = None) -> str:
    """The ``--machine`` values, each machine once: ``loop (agent_loop), agent``."""
    names = ordered_names(declaration_names() if names is None else names)
    shown: list[str] = []
    for name in names:
        aliases = [a for a, n in MACHINE_ALIASES.items() if n == name and a != name]
        shown.append(f"{aliases[0]} ({name})" if aliases else name)
    return ", ".join(shown)


def resolve_machine(machine: str) -> Declaration:
    """The declaration for a ``--machine`` value (``loop``, ``agent`` or a full name)."""
    return load_declaration(resolve_name(machine))


_SUFFIXES: dict[str, Format] = {
    ".mmd": "mermaid",
    ".mermaid": "mermaid",
    ".dot": "dot",
    ".gv": "dot",
    ".svg": "svg",
    ".png": "png",
}
_TEXT_SUFFIXES = (".txt",)  # also accepted with an explicit --format of a text format
_TEXT_FORMATS: tuple[Format, ...] = ("mermaid", "dot")


def _suffix_list() -> str:
    """``.mmd, .mermaid (mermaid); .dot, .gv (dot); .svg (svg); .png (png)``"""
    return "; ".join(
        f"{', '.join(s for s, f in _SUFFIXES.items() if f == fmt)} ({fmt})" for fmt in FORMATS
    )


class UsageError(ValueError):
    """A command-line argument that cannot be used (exit status 2)."""


def output_format(out: str, fmt: Format | None) -> Format:
    """The format to write to ``--out out``: ``fmt`` if given, else the one its suffix names.

    Raises :class:`UsageError` for a suffix no format has (when ``fmt`` is None), or one
    that belongs to another format than ``fmt``. No suffix means Mermaid (or ``fmt``)."""
    suffix = Path(out).suffix.lower()
    if fmt is None:
        if not suffix:
            return "mermaid"
        found = _SUFFIXES.get(suffix)
        if found is None:
            raise UsageError(
                f"cannot tell the format of --out {out} from its suffix: use one of "
                f"{_suffix_list()}, or pass --format"
            )
        return found
    fitting = [s for s, f in _SUFFIXES.items() if f == fmt]
    if fmt in _TEXT_FORMATS:
        fitting += _TEXT_SUFFIXES
    if suffix and suffix not in fitting:
        raise UsageError(
            f"--out {out} does not fit --format {fmt}: name it {', '.join(fitting)} "
            "(or with no suffix)"
        )
    return fmt


_STEPS_SUFFIXES: dict[str, StepsFormat] = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".mmd": "mermaid",
    ".mermaid": "mermaid",
}


def steps_format(out: str | None, fmt: str | None) -> StepsFormat:
    """The format of ``--steps`` (``markdown`` or ``mermaid``): ``fmt`` if given, else the one
    the suffix of ``--out out`` names, else Markdown. Raises :class:`UsageError` for a format
    steps cannot take, a suffix no steps format has, or one of another format than ``fmt``
    (``.txt`` goes with either)."""
    if fmt is not None and fmt not in STEPS_FORMATS:
        raise UsageError(f"--steps is written as {' or '.join(STEPS_FORMATS)}, not --format {fmt}")
    suffix = Path(out).suffix.lower() if out else ""
    if not suffix or suffix in _TEXT_SUFFIXES:
        return fmt if fmt is not None else "markdown"
    found = _STEPS_SUFFIXES.get(suffix)
    if found is None or (fmt is not None and found != fmt):
        wanted = [s for s, f in _STEPS_SUFFIXES.items() if fmt is None or f == fmt]
        raise UsageError(
            f"--out {out} does not fit --steps"
            + (f" --format {fmt}" if fmt is not None else "")
            + f": name it {', '.join([*wanted, *_TEXT_SUFFIXES])} (or with no suffix)"
        )
    return found


def output_file_problem(option: str, value: str | Path) -> str | None:
    """Why ``value`` cannot be written as an output file given by ``option`` (None if it can):
    its directory must exist (no directory is created for it), and it must not be one."""
    if not str(value):
        return f"{option} needs a file name"
    path = Path(value)
    if path.is_dir():
        return f"{option} {path} is a directory, not a file"
    parent = path.parent
    if not parent.exists():
        return f"{option} {path}: the directory {parent} does not exist"
    if not parent.is_dir():
        return f"{option} {path}: {parent} is not a directory"
    return None


def _directory_problem(option: str, value: str) -> str | None:
    """Why ``value`` cannot be the output directory given by ``option`` (None if it can): it may
    be missing (it is created), but its parent must exist."""
    if not value:
        return f"{option} needs a directory name"
    path = Path(value)
    if path.exists():
        return None if path.is_dir() else f"{option} {path} is not a directory"
    parent = path.parent
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        return (
            f"{option} {path}: the directory {parent} {what} "
            f"(only the last directory of {option} is created)"
        )
    return None


def _run_number(text: str) -> int:
    """``--run-number``: a whole number, 1 or more."""
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number, 1 or more, not {text!r}")
    return number


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentcore-fsm diagram",
        description="Render a declared machine, or a recorded run on it, as a state diagram.",
        epilog="Formats svg and png need Graphviz's `dot` (Debian: apt-get install graphviz; "
        "Homebrew: brew install graphviz).",
    )
    parser.add_argument(
        "--machine",
        metavar="NAME",
        help="loop (agent_loop, the default), agent (the Agent lifecycle) or a declaration name; "
        "with --run, which recorded machine to draw",
    )
    parser.add_argument(
        "--format",
        choices=(*FORMATS, "markdown"),
        help="output format (default: from --out's suffix, else mermaid; markdown only with "
        "--steps)",
    )
    parser.add_argument(
        "--out",
        metavar="FILE",
        help="write here instead of standard output (its directory must exist); without "
        f"--format the suffix decides: {_suffix_list()}; no suffix: mermaid",
    )
    parser.add_argument(
        "--run",
        metavar="RUN.jsonl",
        help="draw a run recorded by RunRecorder (or a SQLite run store's), with its nested runs",
    )
    parser.add_argument(
        "--run-number",
        metavar="N",
        type=_run_number,
        help="with --run, when the recording holds several runs: which one to draw (1 for the "
        "first; default: the last)",
    )
    parser.add_argument(
        "--steps",
        action="store_true",
        help="with --run: list the run's steps in order (trigger, from -> to, guards, emits, "
        "events) as a Markdown table, or with --format mermaid as a sequence diagram",
    )
    parser.add_argument(
        "--regenerate",
        action="store_true",
        help="rewrite the committed renders in diagrams/ (what `make diagrams` runs)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="with --regenerate: write nothing, list stale files, exit 1 if any",
    )
    parser.add_argument(
        "--dir",
        metavar="DIR",
        help="with --regenerate: the folder to write (created if missing, but its parent must "
        "exist)",
    )
    return parser


def _error(message: str, status: int = 1) -> int:
    print(f"agentcore-fsm diagram: error: {message}", file=sys.stderr)
    return status


def _regenerate_main(args: argparse.Namespace) -> int:
    if args.dir is not None:
        directory, embedded = Path(args.dir), []
        problem = _directory_problem("--dir", args.dir)
        if problem is not None:
            return _error(problem, 2)
    else:
        directory, embedded = default_directory(), default_embedded()
    changed = regenerate(directory, check=args.check, embedded=embedded)
    if args.check:
        if changed:
            listed = "\n".join(f"  {p}" for p in changed)
            print(f"stale diagrams (run `make diagrams`):\n{listed}", file=sys.stderr)
            return 1
        print(f"{directory}: up to date")
        return 0
    for path in changed:
        print(f"{'deleted' if not path.exists() else 'wrote'} {path}")
    if not changed:
        print(f"{directory}: up to date")
    return 0


def _read_error(exc: OSError) -> str:
    """``cannot read FILE: reason`` rather than ``[Errno 2] No such file or directory: 'FILE'``."""
    if exc.filename is not None and exc.strerror:
        return f"cannot read {exc.filename}: {exc.strerror}"
    return str(exc)


def _run_view(path: Path, machine: str | None, number: int | None) -> tuple[Declaration, RunView]:
    """The view of ``--run``: a recording's run (:func:`view_of_recording`), or, when the file
    is a SQLite run store or holds nested runs' records, the run derived from its record with
    its nested runs as clusters (:func:`~agentcore_fsm.devtools.run_views.view_with_nested`;
    ``number`` counts the runs that are not nested)."""
    if machine not in (None, "agent_loop"):
        return view_of_recording(path, machine, number)
    data = path.read_bytes()
    sqlite = data.startswith(SQLITE_MAGIC)
    # a recording with no "parent" key holds no nested run: read once, as always
    if sqlite or (b'"parent"' in data and any(nesting(path))):
        return view_with_nested(path, run=number)
    return view_of_recording(path, machine, number)


def main(argv: list[str]) -> int:
    """``agentcore-fsm diagram``: see the module docstring. Returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.check and not args.regenerate:
        parser.error("--check only goes with --regenerate")
    given = [args.run, args.out, args.format, args.machine]
    if args.regenerate and (any(x is not None for x in given) or args.steps):
        parser.error("--regenerate takes no --run, --steps, --out, --format or --machine")
    if args.steps and args.run is None:
        parser.error("--steps only goes with --run")
    if args.run_number is not None and args.run is None:
        parser.error("--run-number only goes with --run")
    if args.format == "markdown" and not args.steps:
        parser.error("--format markdown only goes with --steps")
    if args.dir is not None and not args.regenerate:
        parser.error("--dir only goes with --regenerate")
    if args.regenerate:
        try:
            return _regenerate_main(args)
        except (GraphvizError, DeclarationError, OSError, ValueError) as exc:
            return _error(str(exc))
    # argument errors first (status 2), before anything is read or rendered
    fmt: Format = args.format or "mermaid"
    steps: StepsFormat | None = None
    try:
        if args.out is not None:
            problem = output_file_problem("--out", args.out)
            if problem is not None:
                raise UsageError(problem)
        if args.steps:
            steps = steps_format(args.out, args.format)
        elif args.out is not None:
            fmt = output_format(args.out, args.format)
        if args.run == "":
            raise UsageError("--run needs a file name")
        machine = None if args.machine is None else resolve_name(args.machine)
    except UsageError as exc:
        return _error(str(exc), 2)
    except DeclarationError as exc:
        return _error(f"--machine: {exc}", 2)
    try:
        if args.run is not None:
            try:
                decl, view = _run_view(Path(args.run), machine, args.run_number)
            except OSError as exc:
                return _error(_read_error(exc))
            except NestedRecordError as exc:
                return _error(str(exc), 2)
            result = render_steps(decl, view, steps) if steps else render(decl, fmt, view)
        else:
            result = render(load_declaration(machine or "agent_loop"), fmt)
    except (GraphvizError, DeclarationError, OSError, ValueError) as exc:
        return _error(str(exc))
    data = result.encode("utf-8") if isinstance(result, str) else result
    if args.out is not None:
        try:
            Path(args.out).write_bytes(data)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            return _error(f"cannot write {args.out}: {reason}")
        return 0
    if fmt == "png" and sys.stdout.isatty():
        return _error("PNG is binary: pass --out FILE (or redirect standard output)")
    sys.stdout.buffer.write(data)
    sys.stdout.flush()
    return 0
