"""The agent's side of ``selfheal watch``, in Python's standard library (3.9+).

Copy this file next to your agent. It speaks the file protocol of ``selfheal watch``
(docs/watchdog-protocol.md) the way ``supervised()`` from ``selfheal/watchdog`` does in Node:

* ``<state dir>/<session>.heartbeat.json``: your beats (stage, step, context size), written
  atomically, and written again while your process lives (keep-alive), so a run waiting on a hung
  call reads as *stalled*, not *dead*;
* ``<session>.inbox.json``: the supervisor's nudges (Tier 1) and context resets (Tier 2), each
  handed to your handlers once, in ``seq`` order, for this process's generation only;
* ``<session>.ack.json``: what this session's agent has handled, so a restarted process never
  handles a message twice;
* ``<session>.snapshot.json``: your state, restored by the next process after a restart or a
  rotation (Tier 3).

Usage::

    from selfheal_agent import Supervised

    run = Supervised()                       # SELFHEAL_STATE_DIR etc. from `selfheal watch`
    state = run.restore(default={"done": []})  # the last snapshot (SnapshotError if corrupt)
    run.on_nudge(lambda message: print("nudged:", message.get("text")))
    run.on_context_reset(lambda message: summarise_long_outputs())
    run.start()                              # reads the inbox now, then every poll
    while work_left():
        do_one_step()
        run.advance("tool_call", context_tokens=tokens_in_context())
        run.snapshot(state)
    run.close()

Threads: ``start()`` runs one background daemon thread that writes the keep-alive beats and
reads the inbox; **your handlers are called on that thread**. Keep them short (set a flag or
queue the work for your loop): while a handler runs, no keep-alive beat is written. ``beat``,
``advance``, ``snapshot`` and ``poll`` may be called from any thread.
"""

from __future__ import annotations

import errno
import json
import logging
import math
import os
import re
import secrets
import stat
import threading
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional, TypedDict

__all__ = [
    "ENV",
    "HeartbeatError",
    "InboxMessage",
    "Limits",
    "MAX_HEARTBEAT_BYTES",
    "SelfhealConfigError",
    "SelfhealError",
    "SnapshotError",
    "Supervised",
    "clean_stale_temps",
    "keep_alive_for",
    "now_ms",
    "write_atomic",
]

#: Format version of every file this module writes.
VERSION = 1
#: A heartbeat larger than this is not read by the supervisor (bytes).
MAX_HEARTBEAT_BYTES = 64 * 1024
#: The inbox, ack and heartbeat are small files: nothing larger is read (bytes).
MAX_READ_BYTES = 64 * 1024
#: The keep-alive interval's bounds (ms).
KEEP_ALIVE_MIN_MS = 100
KEEP_ALIVE_MAX_MS = 10_000
#: How often the inbox is read by default (ms); the keep-alive is checked as often.
DEFAULT_POLL_MS = 500
#: JavaScript readers keep whole numbers exact up to this (Number.MAX_SAFE_INTEGER).
MAX_SAFE_INTEGER = 2**53 - 1

#: The environment ``selfheal watch`` gives its child (limits in whole ms).
ENV = {
    "state_dir": "SELFHEAL_STATE_DIR",
    "session_id": "SELFHEAL_SESSION_ID",
    "generation": "SELFHEAL_WATCH_GENERATION",
    "dead_ms": "SELFHEAL_WATCH_DEAD_MS",
    "stall_ms": "SELFHEAL_WATCH_STALL_MS",
    "grace_ms": "SELFHEAL_WATCH_GRACE_MS",
    "poll_ms": "SELFHEAL_WATCH_POLL_MS",
}

_WHOLE = re.compile(r"[0-9]+")
_STAGE = re.compile(r"[a-z][a-z0-9_]{0,39}")
_SESSION_ID = re.compile(r"[A-Za-z0-9_.-]{1,128}")
#: The temporary file of an atomic write: ``<file>.<pid>.<8 lowercase hex>.tmp``.
_TEMP = re.compile(r"(.+)\.json\.(\d+)\.[0-9a-f]{8}\.tmp")
_KINDS = ("nudge", "context_reset")
#: A rename refused while another process holds the file (Windows, some network disks).
_RETRIED = (errno.EBUSY, errno.EPERM, errno.EACCES)

_log = logging.getLogger("selfheal_agent")


class SelfhealError(Exception):
    """Base class of this module's errors."""


class SelfhealConfigError(SelfhealError, ValueError):
    """A bad argument or environment: no state dir, a bad session id or generation."""


class HeartbeatError(SelfhealError, ValueError):
    """A beat that is refused (nothing is written): a bad field, or a step going back."""


class SnapshotError(SelfhealError):
    """A snapshot that cannot be written or read back. Restoring a corrupt snapshot would lose
    state, so it is an error, never a silent fresh start."""


class InboxMessage(TypedDict, total=False):
    """A message from the supervisor, as handlers receive it."""

    #: Increasing per session, across processes.
    seq: int
    #: ``"nudge"`` or ``"context_reset"``.
    kind: str
    #: When it was sent (ms since the epoch, on the supervisor's clock; may carry a fraction).
    at: float
    #: For a nudge: what to tell the run.
    text: str
    #: The generation of the process it is for (absent: whichever reads it first).
    gen: int


#: A handler of inbox messages; called on the background thread (see the module's docstring).
Handler = Callable[[InboxMessage], None]


class Limits(NamedTuple):
    """The limits ``selfheal watch`` supervises this process with (ms; None when not given)."""

    dead_ms: Optional[int]
    stall_ms: Optional[int]
    grace_ms: Optional[int]
    poll_ms: Optional[int]


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch, as every timestamp of the protocol."""
    return time.time_ns() // 1_000_000


def _is_int(value: Any) -> bool:
    """An int (not a bool) a JavaScript reader keeps exact: what this module writes."""
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) <= MAX_SAFE_INTEGER


def _integer(value: Any) -> Optional[int]:
    """A JSON integer as the protocol's readers take it (``3.0`` is 3), else None."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if _is_int(value) else None


def _whole_ms(value: Optional[str]) -> Optional[int]:
    """A whole number >= 0 from the environment, else None."""
    if value is None or not _WHOLE.fullmatch(value.strip()):
        return None
    return int(value.strip())


def _generation_from(value: Optional[str]) -> Optional[int]:
    """A generation from the environment: a whole number >= 1, else None."""
    number = _whole_ms(value)
    return number if number is not None and number >= 1 else None


def keep_alive_for(dead_ms: Optional[str]) -> int:
    """The keep-alive interval for a dead limit (as ``SELFHEAL_WATCH_DEAD_MS`` holds it): a third
    of it, bounded to 100 ms - 10 s; 10 s when it is missing or not a number > 0."""
    try:
        dead = float(dead_ms) if dead_ms is not None and dead_ms.strip() else math.nan
    except ValueError:
        dead = math.nan
    if not math.isfinite(dead) or dead <= 0:
        return KEEP_ALIVE_MAX_MS
    return int(min(KEEP_ALIVE_MAX_MS, max(KEEP_ALIVE_MIN_MS, math.floor(dead / 3))))


def _dumps(value: Any) -> str:
    """Strict JSON (no NaN or Infinity), UTF-8 text without escapes, compact."""
    return json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(",", ":"))


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _loads(text: str) -> Any:
    """Strict JSON: NaN, Infinity and -Infinity are refused, as JavaScript's JSON.parse does."""
    return json.loads(text, parse_constant=_refuse_constant)


def write_atomic(path: str, text: str) -> None:
    """Writes ``text`` (UTF-8) to ``path`` so a reader sees the old content or the new, never a
    part: a temporary file beside it (``<path>.<pid>.<8 hex>.tmp``), fsync, ``os.replace``. A
    replace refused with EBUSY, EPERM or EACCES (a file held open elsewhere: Windows, some network
    disks) is tried 3 times; on any failure the temporary file is removed."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    temp = f"{path}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    data = text.encode("utf-8")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(temp, flags, 0o666)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        for attempt in range(1, 4):
            try:
                os.replace(temp, path)
                return
            except OSError as error:
                if error.errno not in _RETRIED or attempt == 3:
                    raise
                time.sleep(0.01 * attempt)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise


def _read_small(path: str) -> Optional[bytes]:
    """The bytes of one of the session's small files, or None: missing, not a regular file (never
    opened in a blocking way: a FIFO does not hang the reader), larger than 64 KiB, unreadable."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_READ_BYTES:
            return None
        chunks: List[bytes] = []
        size = 0
        while size <= MAX_READ_BYTES:
            chunk = os.read(fd, MAX_READ_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return None if size > MAX_READ_BYTES else b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _read_regular(path: str) -> bytes:
    """The bytes of a regular file, whatever its size (a snapshot). Raises ``FileNotFoundError``
    when it is missing, ``OSError`` when it cannot be read or is not a regular file (never opened
    in a blocking way)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        chunks: List[bytes] = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


def _read_json(path: str) -> Any:
    """The JSON in a small file, or None (missing, being replaced, garbage: read again later)."""
    data = _read_small(path)
    if data is None:
        return None
    try:
        return _loads(data.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return None


def _alive(pid: int) -> bool:
    """Whether a process with this id runs. On Windows this is not checked (``os.kill`` would end
    the process): its temp files are taken as a live writer's and kept."""
    if pid <= 0:
        return False
    if os.name == "nt":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it runs, as another user
    except (OverflowError, OSError):
        return False
    return True


def clean_stale_temps(state_dir: str, session_id: str) -> List[str]:
    """Removes the temporary files that writers of this session's files left in ``state_dir``
    when killed mid-write (``<session>.<name>.json.<pid>.<8 hex>.tmp``), only those whose writer
    is gone. Returns the names removed; a missing directory is nothing to clean."""
    try:
        names = os.listdir(state_dir)
    except OSError:
        return []
    prefix = f"{session_id}."
    removed: List[str] = []
    for name in names:
        match = _TEMP.fullmatch(name)
        if not match:
            continue
        base = match.group(1)
        if not base.startswith(prefix) or "." in base[len(prefix) :]:
            continue
        pid = int(match.group(2))
        if pid == os.getpid() or _alive(pid):
            continue  # a write in flight
        try:
            os.unlink(os.path.join(state_dir, name))
            removed.append(name)
        except OSError:
            pass  # gone already, or not ours to remove
    return removed


def _as_message(value: Any) -> Optional[InboxMessage]:
    """An inbox entry checked field by field, or None: ignored, neither handled nor acknowledged
    (an unknown ``kind`` included)."""
    if not isinstance(value, dict) or value.get("kind") not in _KINDS:
        return None
    seq, gen = _integer(value.get("seq")), _integer(value.get("gen"))
    if seq is None or seq < 1 or (gen is None and value.get("gen") is not None):
        return None
    message = dict(value, seq=seq)
    if gen is not None:
        message["gen"] = gen
    return message  # type: ignore[return-value]


class Supervised:
    """The agent's side of supervision: beats, the inbox's messages, and a snapshot.

    Everything defaults from the environment ``selfheal watch`` sets: ``state_dir`` from
    ``SELFHEAL_STATE_DIR`` (required), ``session_id`` from ``SELFHEAL_SESSION_ID`` (else
    ``"agent"``), ``generation`` from ``SELFHEAL_WATCH_GENERATION`` (else none: every message is
    taken as this process's), ``keep_alive_ms`` from ``SELFHEAL_WATCH_DEAD_MS`` (a third of it,
    100 ms - 10 s; 10 s without it; 0 turns the keep-alive off). ``poll_ms`` (default 500, at most
    the keep-alive interval) is how often the background thread wakes.

    Creating one removes the session's stale temporary files and reads the acknowledgement; then
    ``restore()``, register the handlers, and ``start()``. Each beat is written at once (an fsync):
    beat per step, not per token.
    """

    def __init__(
        self,
        state_dir: Optional[str] = None,
        session_id: Optional[str] = None,
        *,
        generation: Optional[int] = None,
        keep_alive_ms: Optional[int] = None,
        poll_ms: Optional[int] = None,
    ) -> None:
        env = os.environ
        directory = state_dir if state_dir is not None else env.get(ENV["state_dir"])
        if not directory:
            raise SelfhealConfigError(
                "no state dir: pass state_dir, or run under `selfheal watch` (SELFHEAL_STATE_DIR)"
            )
        session = session_id if session_id is not None else env.get(ENV["session_id"], "agent")
        if not _SESSION_ID.fullmatch(session):
            raise SelfhealConfigError(
                f"session id {session!r}: expected 1-128 letters, digits, '_', '.' or '-'"
            )
        if generation is None:
            generation = _generation_from(env.get(ENV["generation"]))
        elif not (_is_int(generation) and generation >= 1):
            raise SelfhealConfigError(f"generation must be a whole number >= 1, got {generation!r}")
        if keep_alive_ms is None:
            keep_alive_ms = keep_alive_for(env.get(ENV["dead_ms"]))
        if poll_ms is None:
            poll_ms = DEFAULT_POLL_MS if keep_alive_ms <= 0 else min(DEFAULT_POLL_MS, keep_alive_ms)
        if not poll_ms > 0:
            raise SelfhealConfigError(f"poll_ms must be > 0, got {poll_ms!r}")

        self.state_dir: str = directory
        self.session_id: str = session
        #: This process's generation, carried by its beats and matched against messages.
        self.generation: Optional[int] = generation
        #: A beat is written again after this long without one (ms; 0: never).
        self.keep_alive_ms: int = keep_alive_ms
        #: How often the background thread reads the inbox and checks the keep-alive (ms).
        self.poll_ms: int = poll_ms
        #: The limits this process is supervised with (from the environment).
        self.limits = Limits(
            dead_ms=_whole_ms(env.get(ENV["dead_ms"])),
            stall_ms=_whole_ms(env.get(ENV["stall_ms"])),
            grace_ms=_whole_ms(env.get(ENV["grace_ms"])),
            poll_ms=_whole_ms(env.get(ENV["poll_ms"])),
        )
        #: The step of the snapshot ``restore()`` read (None: none, or it had no step).
        self.restored_step: Optional[int] = None

        base = os.path.join(directory, session)
        self.heartbeat_file = f"{base}.heartbeat.json"
        self.inbox_file = f"{base}.inbox.json"
        self.ack_file = f"{base}.ack.json"
        self.snapshot_file = f"{base}.snapshot.json"

        self._started_at = now_ms()
        self._step_at = self._started_at
        self._last: Optional[Dict[str, Any]] = None
        self._last_write = -math.inf  # time.monotonic() of the last beat written
        self._handlers: Dict[str, List[Handler]] = {kind: [] for kind in _KINDS}
        self._write_lock = threading.Lock()  # beats: one at a time, never an older one last
        self._poll_lock = threading.RLock()  # a message is never handled by two polls at once
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._failing = False

        clean_stale_temps(directory, session)
        # A restarted process continues from what its predecessors acknowledged.
        self._seen = self._read_ack()

    # -- beats ------------------------------------------------------------------------------

    @property
    def step(self) -> Optional[int]:
        """The step of the last beat written, else the restored one, else None."""
        return self._last["stepIdx"] if self._last is not None else self.restored_step

    def beat(
        self,
        stage: str,
        step_idx: int,
        context_tokens: Optional[float] = None,
        last_tool: Optional[str] = None,
    ) -> None:
        """Writes a beat now. ``stage``: a short snake_case name (``planning``, ``tool_call``,
        ``llm_response``, ...); ``step_idx``: steps done, never below the last beat's (a process
        restored from a snapshot continues from its step). Raises ``HeartbeatError`` (nothing is
        written) for a bad field or a step going back; ``OSError`` when the write fails."""
        if not isinstance(stage, str) or not _STAGE.fullmatch(stage):
            raise HeartbeatError(f"stage must be a short snake_case name, got {stage!r}")
        if not _is_int(step_idx) or step_idx < 0:
            raise HeartbeatError(f"step_idx must be a whole number >= 0, got {step_idx!r}")
        if context_tokens is not None and (
            isinstance(context_tokens, bool)
            or not isinstance(context_tokens, (int, float))
            or not math.isfinite(context_tokens)
            or context_tokens < 0
        ):
            raise HeartbeatError(f"context_tokens must be a number >= 0, got {context_tokens!r}")
        if last_tool is not None and not isinstance(last_tool, str):
            raise HeartbeatError(f"last_tool must be a string, got {last_tool!r}")
        with self._write_lock:
            last_step = None if self._last is None else self._last["stepIdx"]
            if last_step is not None and step_idx < last_step:
                raise HeartbeatError(
                    f"step_idx went back from {last_step} to {step_idx}: it must never decrease"
                )
            now = now_ms()
            step_at = now if last_step is None or step_idx > last_step else self._step_at
            beat: Dict[str, Any] = {
                "v": VERSION,
                "sessionId": self.session_id,
                "pid": os.getpid(),
                "stage": stage,
                "stepIdx": step_idx,
            }
            if context_tokens is not None:
                beat["contextTokens"] = context_tokens
            if last_tool is not None:
                beat["lastTool"] = last_tool
            beat.update(at=now, stepAt=step_at, startedAt=self._started_at)
            if self.generation is not None:
                beat["gen"] = self.generation
            self._write_beat(beat)
            self._step_at = step_at
        if self._thread is None and not self._stop.is_set():
            self.start()  # a forgotten start() must not leave the run without keep-alive

    def advance(
        self,
        stage: str,
        context_tokens: Optional[float] = None,
        last_tool: Optional[str] = None,
    ) -> int:
        """One step more: beats with the step after the last beat's (or the restored one's, or 0).
        Returns the new step."""
        step = (self.step if self.step is not None else 0) + 1
        self.beat(stage, step, context_tokens=context_tokens, last_tool=last_tool)
        return step

    def _write_beat(self, beat: Dict[str, Any]) -> None:
        """Writes a checked beat (the write lock held)."""
        text = _dumps(beat)
        size = len(text.encode("utf-8"))
        if size > MAX_HEARTBEAT_BYTES:
            raise HeartbeatError(
                f"a beat of {size} bytes is over {MAX_HEARTBEAT_BYTES} (a long last_tool?)"
            )
        write_atomic(self.heartbeat_file, text)
        self._last = beat
        self._last_write = time.monotonic()

    def _keep_alive(self) -> None:
        """Writes the last beat again (same step and stepAt, a new ``at``) when nothing was
        written for ``keep_alive_ms``: the process is alive, so a run waiting on a hung call
        reads as stalled, not dead."""
        if self.keep_alive_ms <= 0:
            return
        with self._write_lock:
            if self._last is None:
                return
            if (time.monotonic() - self._last_write) * 1000 < self.keep_alive_ms:
                return
            self._write_beat({**self._last, "at": now_ms()})

    # -- the inbox --------------------------------------------------------------------------

    def on_nudge(self, handler: Handler) -> Callable[[], None]:
        """Calls ``handler(message)`` for each nudge (Tier 1: the run stalled; ``message["text"]``
        says what to tell it). Returns a function that removes the handler."""
        return self._add("nudge", handler)

    def on_context_reset(self, handler: Handler) -> Callable[[], None]:
        """Calls ``handler(message)`` when the supervisor asks for a context reset (Tier 2):
        replace long outputs by summaries and ``snapshot()``; the supervisor then restarts the
        process. Returns a function that removes the handler."""
        return self._add("context_reset", handler)

    def _add(self, kind: str, handler: Handler) -> Callable[[], None]:
        self._handlers[kind].append(handler)

        def remove() -> None:
            if handler in self._handlers[kind]:
                self._handlers[kind].remove(handler)

        return remove

    def poll(self) -> int:
        """Reads the inbox now, on the calling thread (the background thread does it every
        ``poll_ms``). Messages past the acknowledged ``seq`` are taken in order: one for this
        generation (or for any) is handed to its handlers, then acknowledged; one for an earlier
        generation is skipped and acknowledged; one for a later generation stops the read (it is
        that process's). A handler that raises is logged; the message still counts as handled.
        Returns how many messages were taken."""
        taken = 0
        with self._poll_lock:
            for message in self._read_inbox():
                seq = message["seq"]
                if seq <= self._seen:
                    continue
                gen = message.get("gen")
                own = self.generation
                if gen is not None and own is not None and gen > own:
                    break
                if gen is None or own is None or gen == own:
                    for handler in list(self._handlers[message["kind"]]):
                        try:
                            handler(message)
                        except Exception:
                            _log.exception("selfheal: a %s handler raised", message["kind"])
                # Acknowledged one at a time: a crash between two messages replays neither done one.
                self._seen = seq
                self._write_ack(seq)
                taken += 1
        return taken

    def _read_inbox(self) -> List[InboxMessage]:
        parsed = _read_json(self.inbox_file)
        entries = parsed.get("messages") if isinstance(parsed, dict) else None
        if not isinstance(entries, list):
            return []
        messages = [m for m in (_as_message(e) for e in entries) if m is not None]
        return sorted(messages, key=lambda m: m["seq"])

    def _read_ack(self) -> int:
        parsed = _read_json(self.ack_file)
        seq = _integer(parsed.get("seq")) if isinstance(parsed, dict) else None
        return seq if seq is not None and seq > 0 else 0

    def _write_ack(self, seq: int) -> None:
        ack: Dict[str, Any] = {"v": VERSION, "seq": seq}
        if self.generation is not None:
            ack["gen"] = self.generation
        ack["at"] = now_ms()
        write_atomic(self.ack_file, _dumps(ack))

    # -- snapshot ---------------------------------------------------------------------------

    def snapshot(self, state: Any) -> None:
        """Saves the run's state (anything ``json.dumps`` takes, no NaN), atomically, with the
        current step: what a restarted or rotated process resumes from. Raises ``SnapshotError``
        when the state is not JSON, ``OSError`` when the write fails."""
        record = {"v": VERSION, "at": now_ms(), "stepIdx": self.step, "state": state}
        try:
            text = _dumps(record)
        except (TypeError, ValueError) as error:
            raise SnapshotError(f"the state cannot be saved as JSON: {error}") from error
        write_atomic(self.snapshot_file, text)

    def restore(self, default: Any = None) -> Any:
        """The last snapshot's state, or ``default`` when there is none (the first process).
        Sets ``restored_step`` to the snapshot's step, from which ``advance()`` continues.
        Raises ``SnapshotError`` when the snapshot exists but cannot be read or is corrupt:
        starting afresh would silently lose the run's state."""
        path = self.snapshot_file
        try:
            data = _read_regular(path)
        except FileNotFoundError:
            self.restored_step = None
            return default
        except OSError as error:
            raise SnapshotError(f"cannot read the snapshot {path}: {error}") from error
        try:
            parsed = _loads(data.decode("utf-8"))
        except ValueError as error:
            raise SnapshotError(
                f"the snapshot {path} is not valid JSON: restoring it would lose state"
            ) from error
        if not isinstance(parsed, dict) or parsed.get("v") != VERSION:
            raise SnapshotError(f"{path} is not a selfheal snapshot (version 1)")
        raw_step = parsed.get("stepIdx")
        step = _integer(raw_step)
        if raw_step is not None and (step is None or step < 0):
            raise SnapshotError(f"the snapshot {path} has a bad stepIdx: {raw_step!r}")
        if "state" not in parsed:
            raise SnapshotError(f"the snapshot {path} holds no state")
        self.restored_step = step
        return parsed["state"]

    # -- the background thread --------------------------------------------------------------

    def start(self) -> "Supervised":
        """Starts the background daemon thread: it reads the inbox at once, then every
        ``poll_ms``, and writes the keep-alive beats. Call it after ``restore()`` and after
        registering your handlers (the first beat starts it too, if you did not). Returns self."""
        if self._thread is None and not self._stop.is_set():
            self._thread = threading.Thread(
                target=self._run, name=f"selfheal-{self.session_id}", daemon=True
            )
            self._thread.start()
        return self

    def _run(self) -> None:
        while True:
            try:
                self._keep_alive()
                self.poll()
                if self._failing:
                    _log.warning("selfheal: keep-alive and inbox reads work again")
                self._failing = False
            except Exception as error:  # tried again on the next poll; said once
                if not self._failing:
                    _log.warning("selfheal: a keep-alive or inbox read failed: %s", error)
                self._failing = True
            if self._stop.wait(self.poll_ms / 1000):
                return

    def close(self, timeout: float = 5.0) -> None:
        """Stops the background thread (waiting up to ``timeout`` s for a handler at work). The
        files stay; beats may still be written, but no keep-alive or inbox read happens."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def __enter__(self) -> "Supervised":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
