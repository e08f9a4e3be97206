"""Where a model comes from: an MLF archive as given, or a ``.tflite`` compiled on the fly
into the cache (``compile.cache``), so every command that takes an archive takes a
``.tflite`` too."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Optional, Union

from ..compile import is_tflite
from ..compile.cache import cached_archive
from ..resolve.cache import default_cache_dir

PathLike = Union[str, "os.PathLike[str]"]


def archive_source(path: PathLike, say: Optional[Callable[[str], None]] = None) -> Path:
    """``path`` itself, or the cached archive compiled from the ``.tflite`` at ``path``."""
    if not is_tflite(path):
        return Path(path)
    if say is not None:
        say(f"compiling {Path(path).name} (cached under {default_cache_dir() / 'compiled'})")
    return cached_archive(path, default_cache_dir())
