"""TVM's option ``extra_files_tar``: a tar the user gives, unpacked into the generated project.

Checked before anything is generated (the file exists, every member is a regular file or a
directory that stays inside the project), unpacked into the staging directory before it is
swapped in, so a bad tar leaves no project behind. Every front end (the CLI's ``-o``, the
Project API) hands the path to the generator, which is the one place that unpacks it.
"""

from __future__ import annotations

import os
import posixpath
import tarfile
from pathlib import Path
from typing import Any, Optional

from ..errors import GenerateError


def _bad_member(member: tarfile.TarInfo) -> Optional[str]:
    if not (member.isfile() or member.isdir()):
        return "is not a regular file or directory"
    name = member.name.replace("\\", "/")
    normal = posixpath.normpath(name)
    if name.startswith("/") or normal == ".." or normal.startswith("../"):
        return "escapes the project"
    return None


def check_extra_files(value: Any) -> Optional[Path]:
    """The tar ``value`` names (absolute), its members checked; None without one."""
    if not value:
        return None
    path = Path(str(value)).expanduser().resolve()
    if not path.is_file():
        raise GenerateError(f"option extra_files_tar {value}: no such file")
    try:
        with tarfile.open(path) as tar:
            for member in tar.getmembers():
                problem = _bad_member(member)
                if problem:
                    raise GenerateError(f"extra_files_tar {path}: member {member.name!r} {problem}")
    except (tarfile.TarError, OSError) as err:
        raise GenerateError(f"extra_files_tar {path}: not a readable tar ({err})") from None
    return path


def unpack_extra_files(tar_path: Path, project_dir: Path) -> None:
    """Unpack a tar :func:`check_extra_files` accepted into ``project_dir``."""
    root = project_dir.resolve()
    with tarfile.open(tar_path) as tar:
        for member in tar.getmembers():
            problem = _bad_member(member)
            dest = (root / member.name).resolve()
            if problem or (dest != root and root not in dest.parents):
                raise GenerateError(
                    f"extra_files_tar {tar_path}: member {member.name!r} "
                    f"{problem or 'escapes the project'}"
                )
            if member.isdir():
                dest.mkdir(parents=True, exist_ok=True)
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            if source is None:
                continue
            with source, open(dest, "wb") as out:
                out.write(source.read())
            os.chmod(dest, 0o755 if member.mode & 0o111 else 0o644)
