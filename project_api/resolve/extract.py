"""Safe extraction of an untrusted tar (plain, gzip, bzip2, xz) or zip archive.

The rules are those of MLF extraction (spec mlf.md "Container"): no absolute names, no ``..``,
no link escaping the destination, no device files or FIFOs, a bounded total size and member
count. In detail:

- names: ``./`` prefixes are dropped; absolute names, drive letters (``C:``), backslashes and
  ``..`` components are refused;
- nothing is written through a link: a member whose parent path contains a symlink is refused,
  and an existing symlink is never overwritten;
- a symlink is created only if its target, resolved from its (real) parent directory, stays
  inside the destination; a hard link must name a regular file extracted before (it is copied);
- only the executable bit of a file's mode is kept (files 0644/0755, directories 0755);
- the byte count is enforced while writing, so a lying header or a zip bomb stops at the limit.

Members are written by hand, never by ``tarfile.extract``, so the rules hold on every Python
version (the ``data`` filter exists only from 3.12).
"""

from __future__ import annotations

import lzma
import os
import posixpath
import shutil
import stat
import tarfile
import zipfile
import zlib
from pathlib import Path
from typing import IO, Dict, Optional

from ..errors import ArchiveError, UnsafeArchiveError

MAX_TOTAL_BYTES = 2 << 30
MAX_MEMBERS = 200_000
_CHUNK = 1 << 20


def _clean_name(name: str, what: str) -> Optional[str]:
    """The member's path relative to the destination, or None for the root itself."""
    if "\\" in name or "\x00" in name:
        raise UnsafeArchiveError(f"{what}: member {name!r} has a backslash or NUL in its name")
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise UnsafeArchiveError(f"{what}: member {name!r} has an absolute path")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UnsafeArchiveError(f"{what}: member {name!r} climbs out with '..'")
    return "/".join(parts) if parts else None


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root + os.sep)


class _Extractor:
    def __init__(self, dest: Path, what: str, max_total_bytes: int, max_members: int) -> None:
        dest.mkdir(parents=True, exist_ok=True)
        self.dest = dest
        self.root = os.path.realpath(dest)
        self.what = what
        self.budget = max_total_bytes
        self.max_total_bytes = max_total_bytes
        self.members_left = max_members
        self.files: Dict[str, str] = {}  # member name -> real path of extracted regular file

    def _target(self, rel: str) -> str:
        """The absolute path for ``rel``, after checking no parent component is a link."""
        self.members_left -= 1
        if self.members_left < 0:
            raise UnsafeArchiveError(f"{self.what}: more than the allowed number of members")
        parent_rel = posixpath.dirname(rel)
        parent = os.path.join(self.root, *parent_rel.split("/")) if parent_rel else self.root
        os.makedirs(parent, exist_ok=True)
        if os.path.realpath(parent) != os.path.normpath(parent):
            raise UnsafeArchiveError(f"{self.what}: member {rel!r} would be written through a link")
        target = os.path.join(parent, posixpath.basename(rel))
        if os.path.islink(target):
            raise UnsafeArchiveError(f"{self.what}: member {rel!r} would overwrite a link")
        return target

    def directory(self, rel: str) -> None:
        target = self._target(rel)
        if os.path.exists(target) and not os.path.isdir(target):
            raise UnsafeArchiveError(f"{self.what}: directory {rel!r} replaces a file")
        os.makedirs(target, exist_ok=True)

    def file(self, rel: str, source: IO[bytes], mode: int) -> None:
        target = self._target(rel)
        if os.path.isdir(target):
            raise UnsafeArchiveError(f"{self.what}: file {rel!r} replaces a directory")
        with open(target, "wb") as out:
            while True:
                chunk = source.read(_CHUNK)
                if not chunk:
                    break
                self.budget -= len(chunk)
                if self.budget < 0:
                    raise UnsafeArchiveError(
                        f"{self.what}: expands to more than {self.max_total_bytes} bytes"
                    )
                out.write(chunk)
        os.chmod(target, 0o755 if mode & 0o111 else 0o644)
        self.files[rel] = target

    def symlink(self, rel: str, link: str) -> None:
        target = self._target(rel)
        if not link or link.startswith("/") or "\\" in link or "\x00" in link:
            raise UnsafeArchiveError(f"{self.what}: link {rel!r} -> {link!r} is absolute or empty")
        pointed = os.path.realpath(os.path.join(os.path.dirname(target), link))
        if not _inside(pointed, self.root):
            raise UnsafeArchiveError(f"{self.what}: link {rel!r} -> {link!r} escapes the archive")
        if os.path.lexists(target):
            raise UnsafeArchiveError(f"{self.what}: link {rel!r} replaces an existing member")
        os.symlink(link, target)

    def hardlink(self, rel: str, link: str) -> None:
        source_rel = _clean_name(link, self.what)
        if source_rel is None or source_rel not in self.files:
            raise UnsafeArchiveError(
                f"{self.what}: hard link {rel!r} -> {link!r} does not name an earlier file"
            )
        with open(self.files[source_rel], "rb") as source:
            mode = os.stat(self.files[source_rel]).st_mode
            self.file(rel, source, mode)


def _extract_tar(archive: Path, ex: _Extractor) -> None:
    try:
        with tarfile.open(archive, mode="r:*") as tar:
            for member in tar:
                rel = _clean_name(member.name, ex.what)
                if rel is None:
                    continue
                if member.isdir():
                    ex.directory(rel)
                elif member.isfile():
                    if member.size > ex.budget:
                        raise UnsafeArchiveError(
                            f"{ex.what}: expands to more than {ex.max_total_bytes} bytes"
                        )
                    stream = tar.extractfile(member)
                    if stream is None:  # pragma: no cover - isfile() members always have data
                        raise ArchiveError(f"{ex.what}: member {rel!r} has no data")
                    with stream:
                        ex.file(rel, stream, member.mode)
                elif member.issym():
                    ex.symlink(rel, member.linkname)
                elif member.islnk():
                    ex.hardlink(rel, member.linkname)
                else:
                    raise UnsafeArchiveError(
                        f"{ex.what}: member {rel!r} is a device, FIFO or other special file"
                    )
    except (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError) as err:
        raise ArchiveError(f"{ex.what}: not a readable tar archive: {err}") from None
    except OSError as err:
        if err.errno is not None:  # a real I/O error (disk full, ...), not corrupt data
            raise
        raise ArchiveError(f"{ex.what}: not a readable tar archive: {err}") from None


def _extract_zip(archive: Path, ex: _Extractor) -> None:
    try:
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                rel = _clean_name(info.filename, ex.what)
                if rel is None:
                    continue
                mode = (info.external_attr >> 16) & 0xFFFF
                kind = stat.S_IFMT(mode)
                if info.is_dir():
                    ex.directory(rel)
                elif kind == stat.S_IFLNK:
                    if info.file_size > 4096:
                        raise UnsafeArchiveError(f"{ex.what}: link {rel!r} has an oversized target")
                    ex.symlink(rel, zf.read(info).decode("utf-8", "replace"))
                elif kind in (0, stat.S_IFREG):
                    if info.file_size > ex.budget:
                        raise UnsafeArchiveError(
                            f"{ex.what}: expands to more than {ex.max_total_bytes} bytes"
                        )
                    with zf.open(info) as stream:
                        ex.file(rel, stream, mode)
                else:
                    raise UnsafeArchiveError(
                        f"{ex.what}: member {rel!r} is a device, FIFO or other special file"
                    )
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as err:
        raise ArchiveError(f"{ex.what}: not a readable zip archive: {err}") from None


def archive_kind(path: Path) -> str:
    """``"zip"`` or ``"tar"`` by content (never by file name)."""
    with open(path, "rb") as handle:
        head = handle.read(4)
    return "zip" if head[:4] in (b"PK\x03\x04", b"PK\x05\x06") else "tar"


def safe_extract(
    archive: Path,
    dest: Path,
    *,
    what: str = "archive",
    max_total_bytes: int = MAX_TOTAL_BYTES,
    max_members: int = MAX_MEMBERS,
) -> None:
    """Extract ``archive`` (tar of any compression, or zip) into ``dest`` under the rules above.

    Raises :class:`UnsafeArchiveError` for a hostile member, :class:`ArchiveError` when the
    file is not a readable archive. ``dest`` may be left partly written on error: extract into
    a staging directory and remove it on failure.
    """
    ex = _Extractor(dest, what, max_total_bytes, max_members)
    if archive_kind(archive) == "zip":
        _extract_zip(archive, ex)
    else:
        _extract_tar(archive, ex)


_IGNORED_TOP = ("__MACOSX",)


def strip_single_top(extracted: Path, tree: Path) -> None:
    """Move ``extracted`` to ``tree``; if it holds one directory only (``foo-1.2/``), move that.

    ``tree`` must not exist. macOS ``__MACOSX`` folders are ignored when counting.
    """
    entries = [p for p in extracted.iterdir() if p.name not in _IGNORED_TOP]
    if len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink():
        os.rename(entries[0], tree)
        shutil.rmtree(extracted)
    else:
        os.rename(extracted, tree)
