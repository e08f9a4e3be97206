"""The ``path`` and ``mlf_path`` resolvers: directories used where they are (no cache).

- ``path``: a local directory, absolute, ``~``-relative, a ``file://`` url, or relative to the
  base directory the caller gives (the directory holding the MLF archive).
- ``mlf_path``: a directory inside the extracted archive (``./runtime``); it must stay inside
  the archive root, links included.

Both are copied into the generated project by :mod:`.place`, which also records a digest of
the copied files in the lock file.
"""

from __future__ import annotations

import os
import urllib.parse
import urllib.request
from pathlib import Path

from ..errors import DependencyError
from .spec import DependencySpec


def resolve_path(spec: DependencySpec, base_dir: Path) -> Path:
    """The directory a ``path`` dependency names (resolved, absolute)."""
    url = spec.url.strip()
    if url.lower().startswith("file://"):
        url = urllib.request.url2pathname(urllib.parse.urlsplit(url).path)
    local = Path(url).expanduser()
    if not local.is_absolute():
        local = Path(base_dir) / local
    if not local.is_dir():
        problem = "is not a directory" if local.exists() else "does not exist"
        raise DependencyError(
            f"{spec.short_name}: path {spec.url!r} {problem} (looked at {local})",
            hint="a relative path is taken relative to the MLF archive's directory",
        )
    return local.resolve()


def resolve_mlf_path(spec: DependencySpec, archive_root: Path, *, must_exist: bool = True) -> Path:
    """The directory inside the extracted archive that an ``mlf_path`` dependency names."""
    url = spec.url.strip()
    parts = [p for p in url.replace("\\", "/").split("/") if p not in ("", ".")]
    if url.startswith(("/", "\\")) or (len(url) > 1 and url[1] == ":") or ".." in parts:
        raise DependencyError(
            f"{spec.short_name}: mlf_path {spec.url!r} must be a relative path inside the archive"
        )
    root = Path(os.path.realpath(archive_root))
    target = root.joinpath(*parts)
    real = Path(os.path.realpath(target))
    if real != root and root not in real.parents:
        raise DependencyError(
            f"{spec.short_name}: mlf_path {spec.url!r} leads out of the archive through a link"
        )
    if must_exist and not real.is_dir():
        raise DependencyError(
            f"{spec.short_name}: mlf_path {spec.url!r} is not a directory of the archive"
        )
    return real
