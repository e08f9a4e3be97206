"""Where a model comes from: an MLF archive as given, or a ``.tflite`` compiled on the fly
into the cache (``compile.cache``), so every command that takes an archive takes a
``.tflite`` too.

A ``.tflite`` compiled here is named after its file (:func:`tflite_module_name`:
``kws_ref_model.tflite`` is the module ``kws_ref_model``), so ``export model.tflite`` has a C
prefix without ``--name``, and every door (run, generate, export, footprint, the Project
API) names it alike. ``mlf-project compile`` keeps tvmc's ``default`` unless ``--name``."""

from __future__ import annotations

import os
import re
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
    return cached_archive(path, default_cache_dir(), name=tflite_module_name(path))


MAX_NAME = 40


def tflite_module_name(path: PathLike) -> str:
    """The module name of a ``.tflite`` compiled on the fly: its file's stem with every run of
    other characters than letters, digits and ``_`` made one ``_``, at most 40 characters;
    ``model_<stem>`` where that is no free C prefix (a digit first, a keyword, ``tvm...``),
    ``model`` where nothing is left."""
    from .export.target import free_c_name  # export's own rules; export imports this module

    stem = re.sub(r"[^A-Za-z0-9_]+", "_", Path(path).stem).strip("_")[:MAX_NAME]
    if not stem:
        return "model"
    return stem if free_c_name(stem) else f"model_{stem}"[:MAX_NAME]
