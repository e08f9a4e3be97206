"""What a confined child left on disk, as the trusted parent reads, writes and copies it.

A confined build may write its build directory, and so leave anything there: a link named
``build.log`` pointing at ``~/.bashrc``, a fifo named ``firmware.map``, a link to
``~/.ssh/id_rsa`` where a library is staged. None of that may steer a file operation of the
parent. So, below a base directory the parent chose itself:

* every component is opened with ``O_NOFOLLOW`` (a link anywhere fails with ``ELOOP``) and
  must be a directory, then a file (:func:`open_regular`) must be a regular file, is opened
  without blocking (a fifo cannot hang the parent) and read up to a stated size at most;
* a file is written by :func:`replace` under a private name, then renamed into place: a link
  that stands where it goes is replaced, never followed.

Names are single components: a ``/``, ``..`` or an empty name is a ValueError.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path
from typing import Optional, Sequence, Union

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_NOFOLLOW = os.O_NOFOLLOW
_CHUNK = 1 << 20


def _checked(name: str) -> str:
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise ValueError(f"not a single file name: {name!r}")
    return name


def open_directory(base: Path, names: Sequence[str] = (), *, create: bool = False) -> int:
    """A descriptor of ``base/names...``: ``base`` as the parent gives it, each name below it
    without following a link (``create`` makes missing ones, mode 0755). The caller closes
    it."""
    fd = os.open(str(base), _DIRECTORY)
    try:
        for name in names:
            name = _checked(name)
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o755, dir_fd=fd)
            inner = os.open(name, _DIRECTORY | _NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular(base: Path, names: Sequence[str], limit: int) -> int:
    """A read-only descriptor of the regular file ``base/names...`` (no link followed, no
    fifo or device opened for good) of at most ``limit`` bytes; OSError otherwise (``EFBIG``
    when larger). The caller closes it."""
    if not names:
        raise ValueError("no file named")
    directory = open_directory(base, names[:-1])
    try:
        fd = os.open(
            _checked(names[-1]),
            os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | _NOFOLLOW,
            dir_fd=directory,
        )
    finally:
        os.close(directory)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", names[-1])
        if info.st_size > limit:
            raise OSError(errno.EFBIG, f"larger than {limit} bytes", names[-1])
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(base: Path, names: Sequence[str], limit: int) -> bytes:
    """The content of the regular file ``base/names...`` (see :func:`open_regular`), at
    most ``limit`` bytes."""
    fd = open_regular(base, names, limit)
    try:
        return _read_up_to(fd, limit)
    finally:
        os.close(fd)


def read_path(path: Path, limit: int) -> bytes:
    """:func:`read_regular` of ``path``'s last component in its directory."""
    path = Path(path)
    return read_regular(path.parent, [path.name], limit)


def _read_up_to(fd: int, limit: int) -> bytes:
    parts = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(_CHUNK, left))
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def replace(directory: int, name: str, content: Union[bytes, int], *,
            mode: Optional[int] = None, limit: int = 1 << 40) -> None:  # fmt: skip
    """Writes ``content`` (bytes, or a descriptor read to its end, at most ``limit`` bytes)
    as ``name`` in the open ``directory``: under a private name first (created, never
    opened through a link), then renamed over ``name``. Its mode is ``mode`` whatever the
    umask, or 0666 less the umask."""
    name = _checked(name)
    private = f".{name}.{os.getpid()}.{secrets.token_hex(4)}"
    fd = os.open(
        private,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | _NOFOLLOW,
        0o666 if mode is None else mode,
        dir_fd=directory,
    )
    try:
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            if isinstance(content, int):
                left = limit
                while left > 0:
                    chunk = os.read(content, min(_CHUNK, left))
                    if not chunk:
                        break
                    _write_all(fd, chunk)
                    left -= len(chunk)
            else:
                _write_all(fd, content)
        finally:
            os.close(fd)
        os.replace(private, name, src_dir_fd=directory, dst_dir_fd=directory)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(private, dir_fd=directory)
        raise


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_file(
    base: Path, names: Sequence[str], content: bytes, *, mode: Optional[int] = None
) -> None:
    """:func:`replace` of ``base/names...`` (its directories must exist, no link among them)."""
    directory = open_directory(base, names[:-1])
    try:
        replace(directory, names[-1], content, mode=mode)
    finally:
        os.close(directory)


def remove(base: Path, names: Sequence[str]) -> None:
    """Removes the file ``base/names...`` if it is there (a link is removed, not followed;
    a link among the directories leaves everything as it is)."""
    try:
        directory = open_directory(base, names[:-1])
    except OSError:
        return
    try:
        with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
            os.unlink(_checked(names[-1]), dir_fd=directory)
    finally:
        os.close(directory)
