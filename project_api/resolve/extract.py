"""Safe extraction of an untrusted dependency archive: tar (plain, gzip, bzip2, xz) or zip.

Tar archives go through the MLF reader's own extraction (:mod:`project_api.read.extract`), so a
downloaded dependency obeys exactly the rules an MLF archive does: no absolute names, no
``..``, no device files or FIFOs, capped member count and size, links turned into copies of
the regular file they name inside the archive (any other link refused), plain file modes,
all-or-nothing. Zip files (which the reader never sees) are held to the same rules here.
"""

from __future__ import annotations

import lzma
import os
import posixpath
import shutil
import stat
import tarfile
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from ..errors import ArchiveError, UnsafeArchiveError
from ..read.extract import (
    MAX_LINK_HOPS,
    ExtractLimits,
    normalise_name,
    plan_extraction,
)
from ..read.extract import safe_extract as _write_tar_plan

_CHUNK = 1 << 20
_MAX_LINK_TARGET = 4096


def _extract_tar(archive: Path, dest: Path, limits: ExtractLimits) -> None:
    try:
        with tarfile.open(archive, mode="r:*") as tar:
            plan = plan_extraction(tar, limits)
            _write_tar_plan(tar, plan, dest)
    except (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError) as err:
        raise ArchiveError(f"not a readable tar archive: {err}") from None
    except OSError as err:
        if err.errno is not None:  # a real I/O error (disk full, ...), not corrupt data
            raise
        raise ArchiveError(f"not a readable tar archive: {err}") from None


_ZipPlan = Tuple[List[Tuple[str, zipfile.ZipInfo]], Dict[str, str], List[str]]


def _zip_plan(zf: zipfile.ZipFile, limits: ExtractLimits) -> _ZipPlan:
    """(regular files, links name -> target name, directories), all checked."""
    files: List[Tuple[str, zipfile.ZipInfo]] = []
    links: Dict[str, str] = {}
    dirs: List[str] = []
    kinds: Dict[str, str] = {}
    total = 0
    for count, info in enumerate(zf.infolist(), start=1):
        if count > limits.max_members:
            raise UnsafeArchiveError(f"more than {limits.max_members} members (limit)")
        name = normalise_name(info.filename)
        mode = (info.external_attr >> 16) & 0xFFFF
        kind = stat.S_IFMT(mode)
        if info.is_dir():
            if name:
                dirs.append(name)
                kinds.setdefault(name, "dir")
            continue
        if not name:
            raise UnsafeArchiveError(f"member {info.filename!r} replaces the root")
        if name in kinds:
            raise UnsafeArchiveError(f"member {info.filename!r} appears twice")
        if kind == stat.S_IFLNK:
            if info.file_size > _MAX_LINK_TARGET:
                raise UnsafeArchiveError(f"link {info.filename!r} has an oversized target")
            link = zf.read(info).decode("utf-8", "replace")
            if link.startswith("/") or "\\" in link:
                raise UnsafeArchiveError(f"link {info.filename!r} points to absolute path {link!r}")
            target = posixpath.normpath(posixpath.join(posixpath.dirname(name), link))
            if target == ".." or target.startswith("../"):
                raise UnsafeArchiveError(f"link {info.filename!r} -> {link!r} leaves the archive")
            links[name] = normalise_name(target)
            kinds[name] = "link"
        elif kind in (0, stat.S_IFREG):
            total += info.file_size
            if total > limits.max_total_bytes:
                raise UnsafeArchiveError(
                    f"member {info.filename!r} takes the content past "
                    f"{limits.max_total_bytes} bytes"
                )
            files.append((name, info))
            kinds[name] = "file"
        else:
            raise UnsafeArchiveError(
                f"member {info.filename!r} is a device, fifo or other special file"
            )
    for name in kinds:
        parent = posixpath.dirname(name)
        while parent:
            if kinds.get(parent, "dir") != "dir":
                raise UnsafeArchiveError(f"member {name!r} lies under non-directory {parent!r}")
            parent = posixpath.dirname(parent)
    for name in links:
        current = name
        for _ in range(MAX_LINK_HOPS):
            if kinds.get(current) != "link":
                break
            current = links[current]
        else:
            raise UnsafeArchiveError(f"link {name!r}: too many hops (loop?)")
        if kinds.get(current) != "file":
            raise UnsafeArchiveError(f"link {name!r} does not lead to a regular file (refused)")
        links[name] = current
    return files, links, dirs


def _write_zip(zf: zipfile.ZipFile, plan: _ZipPlan, root: Path, limits: ExtractLimits) -> None:
    files, links, dirs = plan
    budget = limits.max_total_bytes
    for name in dirs:
        root.joinpath(*name.split("/")).mkdir(mode=0o755, parents=True, exist_ok=True)
    written: Dict[str, Path] = {}
    for name, info in files:
        path = root.joinpath(*name.split("/"))
        path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        mode = 0o755 if (info.external_attr >> 16) & 0o100 else 0o644
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        with os.fdopen(fd, "wb") as out, zf.open(info) as stream:
            while True:
                chunk = stream.read(_CHUNK)
                if not chunk:
                    break
                budget -= len(chunk)
                if budget < 0:  # the header lied about the size (zip bomb)
                    raise UnsafeArchiveError(f"content expands past {limits.max_total_bytes} bytes")
                out.write(chunk)
        written[name] = path
    for name, source in links.items():
        path = root.joinpath(*name.split("/"))
        path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        shutil.copyfile(written[source], path)
        os.chmod(path, os.stat(written[source]).st_mode & 0o777)


def _extract_zip(archive: Path, dest: Path, limits: ExtractLimits) -> None:
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise ArchiveError(f"cannot extract to {dest}: it exists and is not empty")
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.partial-", dir=dest.parent))
    try:
        with zipfile.ZipFile(archive) as zf:
            plan = _zip_plan(zf, limits)
            _write_zip(zf, plan, staging, limits)
        if dest.exists():
            dest.rmdir()
        os.replace(staging, dest)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, zlib.error) as err:
        shutil.rmtree(staging, ignore_errors=True)
        raise ArchiveError(f"not a readable zip archive: {err}") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def archive_kind(path: Path) -> str:
    """``"zip"`` or ``"tar"`` by content (never by file name)."""
    with open(path, "rb") as handle:
        head = handle.read(4)
    return "zip" if head[:4] in (b"PK\x03\x04", b"PK\x05\x06") else "tar"


def safe_extract(archive: Path, dest: Path, *, limits: Optional[ExtractLimits] = None) -> None:
    """Extract ``archive`` (tar of any compression, or zip, sniffed) into ``dest``.

    ``dest`` must not exist or be empty; it appears complete or not at all. Raises
    :class:`UnsafeArchiveError` for a hostile member, :class:`ArchiveError` for a file that is
    not a readable archive.
    """
    limits = limits or ExtractLimits()
    if archive_kind(archive) == "zip":
        _extract_zip(archive, dest, limits)
    else:
        _extract_tar(archive, dest, limits)


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
