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
from typing import Any, Callable, Mapping, Optional, Union

from ..compile import CmsisNnSource, is_tflite
from ..compile.cache import cached_archive
from ..compile.choose import cpu_class
from ..resolve.cache import default_cache_dir

PathLike = Union[str, "os.PathLike[str]"]


def archive_source(
    path: PathLike,
    say: Optional[Callable[[str], None]] = None,
    options: Optional[Mapping[str, Any]] = None,
    board: Any = None,
) -> Path:
    """``path`` itself, or the cached archive compiled from the ``.tflite`` at ``path``.
    ``options`` (normalized project options) choose how: ``cmsis_nn``, and where CMSIS-NN
    and the cache are (``cmsis_path``, ``dependencies``, ``offline``, ``cache_dir``); the
    ``board``'s CPU class picks each operator's form by the package's rules (none: the
    default class, as ``compile`` without ``--board``)."""
    if not is_tflite(path):
        return Path(path)
    opts = options or {}
    root = Path(opts["cache_dir"]) if opts.get("cache_dir") else default_cache_dir()
    cmsis_nn = bool(opts.get("cmsis_nn"))
    if say is not None:
        how = " with CMSIS-NN" if cmsis_nn else ""
        say(f"compiling {Path(path).name}{how} (cached under {root / 'compiled'})")
    source = CmsisNnSource(
        cmsis_path=opts.get("cmsis_path"),
        dependencies=tuple(opts.get("dependencies") or ()),
        offline=bool(opts.get("offline")),
    )
    return cached_archive(
        path,
        root,
        name=tflite_module_name(path),
        cmsis_nn=cmsis_nn,
        source=source,
        cpu=cpu_class(board),
    )


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
