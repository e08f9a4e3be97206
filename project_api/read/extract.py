"""Safe extraction of an untrusted tar archive.

Every member is checked before anything is written: no absolute paths, no ``..``, no
duplicate or conflicting names, no name a file system cannot hold (a component over 255
bytes), no device/fifo files, caps on member count and total size.
Links never reach the disk: a symlink or hardlink whose target is a regular file inside the
archive is extracted as a copy of that file; any other link is refused. Files are written
with plain modes (0644, or 0755 when the owner could execute), never the archive's.

Extraction goes to a staging directory beside the destination, renamed into place only when
every member has been written, so a rejected archive leaves nothing behind.

An already-extracted directory is held to the same rules, entry by entry, by
:func:`check_directory_entry` (called from the walk of :func:`.limits.check_directory`): no
device or fifo, and no symlink that leads out of it.
"""

from __future__ import annotations

import errno
import os
import posixpath
import shutil
import stat
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

from ..errors import ArchiveError, UnsafeArchiveError

MAX_LINK_HOPS = 16
# What a file system takes of one name (NAME_MAX on Linux and macOS, and Windows); and a cap
# on a whole MLF member name, far below PATH_MAX (4096 on Linux, which counts the extraction
# directory's own path too) and above anything TVM writes.
MAX_NAME_COMPONENT_BYTES = 255
MAX_NAME_BYTES = 1024
_COPY_CHUNK = 1 << 20


@dataclass(frozen=True)
class ExtractLimits:
    """Caps that keep a hostile archive from exhausting the disk or the inode table."""

    max_members: int = 100_000
    max_total_bytes: int = 2 << 30  # 2 GiB of regular-file data

    def check_member(self, name: str, size: int) -> None:
        """Refuses one member by its declared size (no per-member cap here)."""

    def too_many_members(self) -> UnsafeArchiveError:
        return UnsafeArchiveError(f"more than {self.max_members} members (limit)")

    def too_much_content(self, name: str) -> UnsafeArchiveError:
        return UnsafeArchiveError(
            f"member {name!r} takes the content past {self.max_total_bytes} bytes"
        )


@dataclass(frozen=True)
class PlannedMember:
    name: str  # normalised: no "./" prefix, no trailing "/"
    kind: str  # "dir" | "file" | "link"
    info: tarfile.TarInfo
    source: str = ""  # for links: the regular-file member whose bytes it gets


def normalise_name(raw: str) -> str:
    """``./a//b/`` → ``a/b``; ``.`` and ``./`` → ``""`` (the root). Refuses escapes."""
    if raw.startswith("/") or "\\" in raw or (len(raw) > 1 and raw[1] == ":"):
        raise UnsafeArchiveError(f"member {raw!r} has an absolute or non-POSIX path")
    parts = [part for part in raw.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise UnsafeArchiveError(f"member {raw!r} contains '..'")
    for part in parts:
        if _byte_length(part) > MAX_NAME_COMPONENT_BYTES:
            raise UnsafeArchiveError(
                f"member name component longer than {MAX_NAME_COMPONENT_BYTES} bytes "
                f"({_byte_length(part)}): {_shortened(raw)}"
            )
    return "/".join(parts)


def _byte_length(text: str) -> int:
    # tarfile decodes names with surrogateescape: count the bytes the file system would get.
    return len(text.encode("utf-8", "surrogateescape"))


def _shortened(raw: str) -> str:
    return repr(raw) if len(raw) <= 100 else repr(raw[:60]) + f"... ({len(raw)} characters)"


def plan_extraction(tar: tarfile.TarFile, limits: ExtractLimits) -> List[PlannedMember]:
    """Check every member of ``tar``; return what to create, in archive order."""
    planned: Dict[str, PlannedMember] = {}
    total = 0
    for count, info in enumerate(tar, start=1):
        if count > limits.max_members:
            raise limits.too_many_members()
        member = _plan_member(info)
        if member is None:
            continue
        previous = planned.get(member.name)
        if previous is not None:
            if previous.kind == member.kind == "dir":
                continue  # "a/" and "./a/" both listed: harmless
            raise UnsafeArchiveError(f"member {info.name!r} appears twice")
        planned[member.name] = member
        if member.kind == "file":
            limits.check_member(member.name, info.size)
            total += info.size
            if total > limits.max_total_bytes:
                raise limits.too_much_content(info.name)
    _check_parents(planned)
    return [_resolve_link(member, planned) for member in planned.values()]


def _plan_member(info: tarfile.TarInfo) -> Optional[PlannedMember]:
    name = normalise_name(info.name)
    if _byte_length(name) > MAX_NAME_BYTES:
        raise UnsafeArchiveError(
            f"member name longer than {MAX_NAME_BYTES} bytes ({_byte_length(name)}): "
            f"{_shortened(info.name)}"
        )
    if info.isdir():
        return PlannedMember(name, "dir", info) if name else None
    if not name:
        raise UnsafeArchiveError(f"member {info.name!r} replaces the root with a non-directory")
    if info.isreg():
        return PlannedMember(name, "file", info)
    if info.issym() or info.islnk():
        return PlannedMember(name, "link", info)
    raise UnsafeArchiveError(f"member {info.name!r} is a device, fifo or other special file")


def _check_parents(planned: Dict[str, PlannedMember]) -> None:
    # "a" as a file and "a/b" as a member would make the writer follow or clobber "a".
    for name in planned:
        parent = posixpath.dirname(name)
        while parent:
            if parent in planned and planned[parent].kind != "dir":
                raise UnsafeArchiveError(f"member {name!r} lies under non-directory {parent!r}")
            parent = posixpath.dirname(parent)


def _link_target(member: PlannedMember) -> str:
    link = member.info.linkname
    if link.startswith("/"):
        raise UnsafeArchiveError(f"link {member.info.name!r} points to absolute path {link!r}")
    # Hardlink names are archive paths; symlink targets are relative to the link's directory.
    base = "" if member.info.islnk() else posixpath.dirname(member.name)
    target = posixpath.normpath(posixpath.join(base, link))
    if target == ".." or target.startswith("../"):
        raise UnsafeArchiveError(f"link {member.info.name!r} -> {link!r} leaves the archive")
    return normalise_name(target)


def _resolve_link(member: PlannedMember, planned: Dict[str, PlannedMember]) -> PlannedMember:
    current = member
    for _ in range(MAX_LINK_HOPS):
        if current.kind != "link":
            break
        target = _link_target(current)
        if target not in planned:
            raise UnsafeArchiveError(
                f"link {member.info.name!r} -> {current.info.linkname!r}: target not in archive"
            )
        current = planned[target]
    else:
        raise UnsafeArchiveError(f"link {member.info.name!r}: too many hops (loop?)")
    if current is member:
        return member
    if current.kind != "file":
        raise UnsafeArchiveError(f"link {member.info.name!r} points to a directory (refused)")
    return PlannedMember(member.name, "link", member.info, source=current.name)


def safe_extract(tar: tarfile.TarFile, plan: List[PlannedMember], destination: Path) -> Path:
    """Write ``plan`` (from :func:`plan_extraction`) to ``destination``, all or nothing.

    ``destination`` must not exist or be an empty directory.
    """
    destination = Path(destination)
    if destination.exists() and (not destination.is_dir() or any(destination.iterdir())):
        raise ArchiveError(f"cannot extract to {destination}: it exists and is not empty")
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{destination.name}.partial-", dir=destination.parent))
    try:
        _write_all(tar, plan, staging)
        if destination.exists():
            destination.rmdir()
        os.replace(staging, destination)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return destination


def _write_all(tar: tarfile.TarFile, plan: List[PlannedMember], root: Path) -> None:
    os.chmod(root, 0o755)
    by_name = {member.name: member for member in plan}
    for member in plan:
        path = root.joinpath(*member.name.split("/"))
        if member.kind == "dir":
            path.mkdir(mode=0o755, parents=True, exist_ok=True)
            continue
        path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        source = by_name[member.source] if member.source else member
        _write_file(tar, source.info, path)


def _write_file(tar: tarfile.TarFile, info: tarfile.TarInfo, path: Path) -> None:
    stream = tar.extractfile(info)
    if stream is None:
        raise ArchiveError(f"member {info.name!r} cannot be read")
    mode = 0o755 if info.mode & 0o100 else 0o644
    # O_EXCL: never write through something that already exists at this path.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as out, stream:
        written = 0
        while True:
            chunk = stream.read(_COPY_CHUNK)
            if not chunk:
                break
            written += len(chunk)
            out.write(chunk)
    if written != info.size:
        raise ArchiveError(f"member {info.name!r} is truncated ({written} of {info.size} bytes)")


def check_directory_entry(path: Path, member: str, real_root: Path) -> bool:
    """The rules of :func:`plan_extraction` for one entry of an extracted archive directory
    whose real path is ``real_root``; False for a directory (not a member), else True.

    A symlink may point anywhere inside the directory (the reader follows it there), never
    out of it: a tar's link to /etc/passwd is refused, and so is the same link in a
    directory. Devices, fifos and sockets are refused (reading a fifo would block).
    """
    mode = os.lstat(path).st_mode
    if stat.S_ISDIR(mode):
        return False
    if stat.S_ISLNK(mode):
        _check_directory_link(path, member, real_root)
    elif not stat.S_ISREG(mode):
        raise UnsafeArchiveError(f"member {member!r} is a device, fifo or other special file")
    return True


def _check_directory_link(path: Path, member: str, real_root: Path) -> None:
    link = os.readlink(path)
    real = Path(os.path.realpath(path))
    if real != real_root and real_root not in real.parents:
        raise UnsafeArchiveError(f"link {member!r} -> {link!r} leaves the archive")
    try:
        os.stat(path)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise UnsafeArchiveError(f"link {member!r}: too many hops (loop?)") from None
        # dangling: the reader says what is missing, if it matters
