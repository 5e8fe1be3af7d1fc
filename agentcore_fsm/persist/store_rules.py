"""What every run store shares: its errors, what it returns, the :class:`RunStore` protocol, and
the rules of owners and leases both stores apply (see :mod:`agentcore_fsm.persist.store`)."""

from __future__ import annotations

import itertools
import os
import socket
import sys
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from agentcore_fsm.persist import json_text
from agentcore_fsm.persist.codec import RecordError, record_text

RunStatus = Literal["running", "finished"]


# --- errors ---------------------------------------------------------------------------------


class RunStoreError(Exception):
    """A run store refused or failed an operation; the text names the run (and, for a file,
    its path) and what is wrong."""


class UnknownRunError(RunStoreError):
    """No run has this id in the store."""


class RunExistsError(RunStoreError):
    """A run with this id is already in the store (nothing is ever overwritten)."""


class RunOwnedError(RunStoreError):
    """Another owner holds the run's lease: a live process of this host, or another host's
    process whose lease has not expired."""


class SessionBusyError(RunOwnedError):
    """Another writer holds the session's lease (a live process of this host, or another host's
    process whose lease has not expired): a second run of the session cannot start now."""

    def __init__(self, message: str, session_id: str, holder: str) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.holder = holder


class LeaseLostError(RunStoreError):
    """The caller no longer holds the run's lease (another process took the run over, or the
    lease was released); nothing was written."""


class RunFinishedError(RunStoreError):
    """The run has finished: it cannot be leased, appended to or finished again."""


class StoreFormatError(RunStoreError, RecordError):
    """A store file that is not a run store, is corrupt, or was written by a newer version; or
    a stored value that cannot be read back (it is also a
    :class:`~agentcore_fsm.persist.codec.RecordError`: a damaged record)."""


class JournalConflictError(RunStoreError):
    """An entry out of sequence: its number is not the number of entries already stored."""


# --- what a store returns ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StoredRun:
    """A run as loaded from a store (fresh copies: changing them changes nothing stored)."""

    run_id: str
    session_id: str | None
    header: dict[str, Any]
    entries: list[dict[str, Any]]
    status: RunStatus
    end_reason: str | None
    owner: str | None
    lease_until: float | None
    created: float
    """When the run was created (``time.time()``)."""


@dataclass(frozen=True, slots=True)
class RunInfo:
    """A run as listed by :meth:`RunStore.runs`: without its header and entries."""

    run_id: str
    session_id: str | None
    status: RunStatus
    end_reason: str | None
    created: float
    entries: int
    """How many entries the run's journal holds."""


@runtime_checkable
class RunStore(Protocol):
    """Where journaled runs are kept (see the module's documentation for the rules)."""

    def create_run(
        self,
        run_id: str,
        header: dict[str, Any],
        *,
        session_id: str | None,
        owner: str,
        lease_s: float,
    ) -> None:
        """Create a running run leased to ``owner``; :class:`RunExistsError` if the id is
        taken."""
        ...

    def acquire(self, run_id: str, owner: str, *, lease_s: float) -> None:
        """Take the run's lease for ``lease_s`` seconds, or raise :class:`RunOwnedError`."""
        ...

    def append(
        self, run_id: str, seq: int, entry: dict[str, Any], *, owner: str, lease_s: float
    ) -> None:
        """Append entry number ``seq`` (the number of entries stored so far) and renew the
        lease, in one transaction."""
        ...

    def finish(self, run_id: str, end_reason: str, *, owner: str) -> None:
        """Mark the run finished with ``end_reason`` and clear its lease."""
        ...

    def release(self, run_id: str, owner: str) -> None:
        """Clear the run's lease if ``owner`` holds it; do nothing otherwise."""
        ...

    def load(self, run_id: str) -> StoredRun:
        """The run with its header and entries; :class:`UnknownRunError` if there is none."""
        ...

    def runs(self, session_id: str | None = None) -> list[RunInfo]:
        """The runs (of ``session_id`` when given), in creation order."""
        ...

    def acquire_session(self, session_id: str, owner: str, *, lease_s: float) -> None:
        """Take (or renew) the session's writer lease for ``lease_s`` seconds, or raise
        :class:`SessionBusyError`."""
        ...

    def release_session(self, session_id: str, owner: str) -> None:
        """Clear the session's writer lease if ``owner`` holds it; do nothing otherwise."""
        ...

    def close(self) -> None:
        """Release what the store holds (its file); the store cannot be used afterwards."""
        ...


# --- owners and leases (the rules both stores share) ---------------------------------------------


def default_owner() -> str:
    """A new owner name for this process: ``"HOST:PID:NONCE"`` (the nonce, 8 hex digits, tells
    apart two runners of one process: a counter from a random start, so no two names this
    process makes are equal, and another process's are unlikely to be). Every journaled run
    makes one, so it makes no system call beyond ``gethostname``."""
    return f"{socket.gethostname()}:{os.getpid()}:{next(_NONCES) & 0xFFFFFFFF:08x}"


_NONCES = itertools.count(uuid.uuid4().int & 0xFFFFFFFF)


_RETIRED: set[str] = set()
_RETIRED_LOCK = threading.Lock()


def retire_owner(owner: str) -> None:
    """Say that this process will never write as ``owner`` again (its run is over here) while
    the store may still name it as a lease's holder: a run journal whose lease could not be
    given back (the store failed as the run ended). Another runner of this process may then
    take that lease over at once; other processes treat it as before (a live process's)."""
    with _RETIRED_LOCK:
        _RETIRED.add(owner)


def _retired(holder: str) -> bool:
    return holder in _RETIRED


def pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    if pid <= 0 or sys.platform == "win32":  # os.kill would end the process on Windows
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, as another user's process
        return True
    except OSError:
        return True  # cannot tell: assume it lives
    return True


def local_pid(owner: str) -> int | None:
    """The pid of the process ``owner`` names when it is a process of this host, else None."""
    parts = owner.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit() or parts[0] != socket.gethostname():
        return None
    return int(parts[1])


def finished_error(run_id: str, end_reason: str | None, what: str) -> RunFinishedError:
    return RunFinishedError(
        f"run {run_id!r} has finished ({end_reason}); it cannot {what} any more"
    )


def _held_for(
    holder: str | None, lease_until: float | None, owner: str, now: float
) -> float | Literal["live"] | None:
    """How long ``holder`` keeps a lease ``owner`` asks for (the rules of a run's lease and a
    session's): None when ``owner`` may take it (nobody holds it, ``owner`` does, a dead process
    of this host does, a journal of this process whose run is over here does
    (:func:`retire_owner`), or another host's lease has expired); ``"live"`` while a live process
    of this host holds it; else the seconds left of another host's lease."""
    if holder is None or holder == owner:
        return None
    pid = local_pid(holder)
    if pid is not None:
        if not pid_alive(pid) or (pid == os.getpid() and _retired(holder)):
            return None  # a dead process's, or one whose run is over in this process
        return "live"
    if lease_until is None or lease_until <= now:
        return None
    return lease_until - now


def check_acquire(
    run_id: str,
    status: str,
    end_reason: str | None,
    holder: str | None,
    lease_until: float | None,
    owner: str,
    now: float,
) -> None:
    """Raise unless ``owner`` may take the run's lease."""
    if status == "finished":
        raise finished_error(run_id, end_reason, "be leased")
    held = _held_for(holder, lease_until, owner, now)
    if held is None:
        return
    if held == "live":
        raise RunOwnedError(
            f"run {run_id!r} is held by {holder!r}, a live process of this host; it cannot be "
            f"taken over while that process runs"
        )
    raise RunOwnedError(
        f"run {run_id!r} is held by {holder!r} (another host) for {held:.1f} s "
        f"more; it can be taken over once that lease expires"
    )


def check_owner(
    run_id: str, status: str, end_reason: str | None, holder: str | None, owner: str, what: str
) -> None:
    """Raise unless the run is running and ``owner`` holds its lease."""
    if status == "finished":
        raise finished_error(run_id, end_reason, what)
    if holder != owner:
        now_held = (
            f"it is now held by {holder!r}"
            if holder is not None
            else "its lease was released and nobody holds it"
        )
        raise LeaseLostError(
            f"run {run_id!r}: {owner!r} no longer holds its lease ({now_held}); "
            f"it cannot {what}, nothing was written"
        )


def check_seq(run_id: str, seq: int, count: int) -> None:
    if seq != count:
        raise JournalConflictError(
            f"run {run_id!r} cannot take entry {seq}: it holds {count} entries, so the next "
            f"entry must be number {count} (another process may be journaling it); nothing "
            f"was written"
        )


def check_session_acquire(
    session_id: str, holder: str | None, lease_until: float | None, owner: str, now: float
) -> None:
    """Raise :class:`SessionBusyError` unless ``owner`` may take the session's lease (the rules
    of a run's lease)."""
    held = _held_for(holder, lease_until, owner, now)
    if held is None or holder is None:
        return
    if held == "live":
        raise SessionBusyError(
            f"session {session_id!r} has another writer: {holder!r}, a live process of this "
            f"host, is running it; one writer at a time (wait for its run to end)",
            session_id,
            holder,
        )
    raise SessionBusyError(
        f"session {session_id!r} has another writer: {holder!r} (another host) holds it for "
        f"{held:.1f} s more; one writer at a time (wait for its run to end)",
        session_id,
        holder,
    )


def check_session_names(session_id: Any, owner: Any) -> None:
    for what, value in (("session id", session_id), ("owner", owner)):
        if not isinstance(value, str) or not value:
            raise RunStoreError(f"a session's {what} must be a non-empty str, not {value!r}")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise RunStoreError(
                f"the {what} {value!r} is not valid text (it holds a lone surrogate)"
            ) from None


# --- JSON ---------------------------------------------------------------------------------------


def dumps(value: Any, run_id: str, what: str) -> str:
    if not isinstance(value, dict):
        raise RunStoreError(
            f"run {run_id!r}: the {what} must be a dict of JSON values, not {type(value).__name__}"
        )
    try:
        return json_text.dumps(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise RunStoreError(f"run {run_id!r}: the {what} is not JSON ({exc})") from None


def loads(text: Any, where: str) -> dict[str, Any]:
    try:
        value = json_text.loads(text)
    except (TypeError, ValueError) as exc:
        raise StoreFormatError(f"{where} cannot be read: it is not valid JSON ({exc})") from None
    except RecursionError:
        raise StoreFormatError(f"{where} cannot be read: it is nested too deeply") from None
    if not isinstance(value, dict):
        raise StoreFormatError(f"{where} cannot be read: it is not a JSON object")
    return value


def status_of(value: Any, where: str) -> RunStatus:
    if value == "running":
        return "running"
    if value == "finished":
        return "finished"
    raise StoreFormatError(f"{where} has an unknown status {value!r}")


def new_run_text(run_id: Any, header: Any, session_id: Any, owner: Any) -> str:
    """What both stores' ``create_run`` do before they store anything: check the new run's id,
    session id and owner, and turn its header into the JSON text the store keeps."""
    check_run_id(run_id)
    check_text(run_id, "session id", session_id, optional=True)
    check_text(run_id, "owner", owner)
    return record_text(header) or dumps(header, run_id, "header")


def entry_texts(run_id: str, seq: int, entries: Iterable[Any]) -> list[str]:
    """The JSON texts a store keeps for ``entries``, numbered from ``seq``."""
    return [record_text(e) or dumps(e, run_id, f"entry {seq + i}") for i, e in enumerate(entries)]


def check_run_id(run_id: Any) -> None:
    if not isinstance(run_id, str) or not run_id:
        raise RunStoreError(f"a run id must be a non-empty str, not {run_id!r}")
    check_text(run_id, "run id", run_id)


def check_text(run_id: str, what: str, value: Any, *, optional: bool = False) -> None:
    """Refuse a name the store cannot keep as text: not a str, or holding a lone surrogate
    (headers and entries may hold any str; ids, owners and end reasons are plain text)."""
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise RunStoreError(f"run {run_id!r}: the {what} must be a str, not {value!r}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise RunStoreError(
            f"run {run_id!r}: the {what} {value!r} is not valid text (it holds a lone surrogate)"
        ) from None
