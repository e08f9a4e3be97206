"""What every way of running firmware has in common.

A :class:`Runner` starts a built firmware (a host process, a QEMU machine, a real board)
and hands back an open ``serial.Serial`` to its console link; :meth:`Runner.stop` ends it.
Child processes are started only through :func:`spawn`, which makes sure none outlives us:
each is killed and reaped on ``stop``, on interpreter exit, and (on Linux) when the Python
process dies without running its exit handlers.
"""

from __future__ import annotations

import abc
import atexit
import contextlib
import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from types import TracebackType
from typing import IO, Any, Callable, Dict, List, Optional, Sequence, Set, Tuple, Type

from ..errors import SandboxError
from ..sandbox import Prepared

_live: Set[subprocess.Popen] = set()
_live_lock = threading.Lock()

_PR_SET_PDEATHSIG = 1
# What copy_in_background keeps of a firmware's output stream.
COPY_LIMIT = 64 << 20


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except Exception:
        pass


def spawn(
    argv: Sequence[str],
    *,
    stdin: Any = subprocess.DEVNULL,
    stdout: Any = subprocess.PIPE,
    stderr: Any = subprocess.PIPE,
    cwd: Optional[str] = None,
    env: Optional[dict] = None,
    pass_fds: Sequence[int] = (),
    confine: Optional[Prepared] = None,
) -> subprocess.Popen:
    """Starts a child that is killed if we exit or die; stop it with :func:`reap`. With
    ``confine`` (a prepared :mod:`project_api.sandbox` confinement) the child is confined
    between fork and exec; the confinement is closed once the child has started."""
    kwargs: Dict[str, Any] = dict(
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        cwd=cwd,
        env=env,
        pass_fds=tuple(pass_fds),
        start_new_session=True,
    )
    try:
        if sys.platform.startswith("linux"):
            # Linux sends the parent-death signal when the *thread* that forked the child
            # ends, not the process: fork from one thread that lives as long as we do.
            preexec = confine.then(_die_with_parent) if confine else _die_with_parent
            proc = _spawner().run(
                lambda: subprocess.Popen(list(argv), preexec_fn=preexec, **kwargs)
            )
        else:
            proc = subprocess.Popen(list(argv), **kwargs)
    except subprocess.SubprocessError as err:
        if confine is None:
            raise
        raise SandboxError(f"cannot confine {confine.what}: {err}") from err
    finally:
        if confine is not None:
            confine.close()
    with _live_lock:
        _live.add(proc)
    return proc


class _SpawnerThread:
    """A daemon thread that runs every fork, so parent-death signals fire only when the
    whole process ends."""

    def __init__(self) -> None:
        self._requests: queue.Queue[Tuple[Callable[[], Any], queue.Queue]] = queue.Queue()
        self._thread = threading.Thread(target=self._serve, name="mlf-spawner", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            job, reply = self._requests.get()
            try:
                reply.put((True, job()))
            except BaseException as err:  # handed back to the caller's thread
                reply.put((False, err))

    def run(self, job: Callable[[], Any]) -> Any:
        reply: queue.Queue = queue.Queue(maxsize=1)
        self._requests.put((job, reply))
        ok, value = reply.get()
        if not ok:
            raise value
        return value


_spawner_instance: Optional[_SpawnerThread] = None


def _spawner() -> _SpawnerThread:
    global _spawner_instance
    with _live_lock:
        if _spawner_instance is None:
            _spawner_instance = _SpawnerThread()
        return _spawner_instance


def reap(proc: subprocess.Popen, *, grace: float = 1.0) -> Optional[int]:
    """Ends a child started by :func:`spawn` (TERM, then KILL after ``grace`` seconds) and
    waits for it. Idempotent. Returns its exit status (negative for a signal)."""
    try:
        if proc.poll() is None:
            _signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait(timeout=5)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        return proc.returncode
    finally:
        with _live_lock:
            _live.discard(proc)


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)


def live_children() -> List[subprocess.Popen]:
    """Children started by :func:`spawn` and not yet reaped (for tests and diagnostics)."""
    with _live_lock:
        return list(_live)


@atexit.register
def _reap_all() -> None:
    for proc in live_children():
        reap(proc, grace=0.2)


class Runner(abc.ABC):
    """Starts a firmware and gives back its console link. Use as a context manager."""

    @abc.abstractmethod
    def start(self, timeout: float) -> Any:
        """Starts the firmware; returns an open ``serial.Serial`` (or a compatible object with
        ``read``, ``write``, ``timeout``, ``write_timeout``, ``close``) to its console."""

    @abc.abstractmethod
    def stop(self) -> Optional[int]:
        """Stops the firmware, closes the link and reaps every child. Idempotent. Returns the
        firmware's exit status when known."""

    @property
    def log(self) -> str:
        """What the firmware or its emulator said outside the link (stderr, QEMU messages)."""
        return ""

    @property
    def exit_status(self) -> Optional[int]:
        """The firmware's exit status once it has ended, else None."""
        return None

    def exit_status_within(self, seconds: float = 0.5) -> Optional[int]:
        """:attr:`exit_status`, waiting up to ``seconds`` for a firmware that is ending: a
        crash closes its link a moment before the process is seen to end."""
        deadline = time.monotonic() + seconds
        while True:
            status = self.exit_status
            if status is not None or time.monotonic() >= deadline:
                return status
            time.sleep(0.025)

    def __enter__(self) -> Runner:
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.stop()


def read_all(stream: Optional[IO[bytes]]) -> str:
    if stream is None:
        return ""
    try:
        return stream.read().decode("utf-8", "replace")
    except (OSError, ValueError):
        return ""


def copy_in_background(
    source: int, target: IO[bytes], name: str, limit: int = COPY_LIMIT
) -> threading.Thread:
    """A thread copying the pipe ``source`` (which it closes) into ``target`` as it arrives,
    until end of file: the first ``limit`` bytes, then a line saying how many more were
    read away (a firmware decides what it writes, and for how long)."""

    def copy() -> None:
        copied = dropped = 0
        try:
            for chunk in iter(lambda: os.read(source, 65536), b""):
                if copied < limit:
                    kept = chunk[: limit - copied]
                    target.write(kept)
                    target.flush()
                    copied += len(kept)
                    chunk = chunk[len(kept) :]
                dropped += len(chunk)
        except (OSError, ValueError):
            pass
        finally:
            os.close(source)
            if dropped:
                with contextlib.suppress(OSError, ValueError):
                    target.write(f"\n[… {dropped} more bytes left out …]\n".encode())
                    target.flush()

    thread = threading.Thread(target=copy, name=name, daemon=True)
    thread.start()
    return thread
