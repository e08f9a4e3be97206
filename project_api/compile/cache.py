"""A ``.tflite`` compiled once into a cache, for the commands that take an archive.

The key is the file's SHA-256, the options that change the archive (module name, executor)
and a digest of the compiler's own code (``compile/`` and ``modelgen/``), so a changed model,
option or compiler compiles again and an unchanged one costs a hash. Entries are written
beside their final name and renamed into place (two processes compiling the same model both
end with a whole archive); the newest :data:`KEEP` stay.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Union

from ..errors import CompileError
from .choose import DEFAULT_CLASS
from .tflite import MAX_FILE_BYTES, read_tflite

if TYPE_CHECKING:
    from . import CmsisNnSource

KEEP = 32
PathLike = Union[str, "os.PathLike[str]"]


@functools.lru_cache(maxsize=1)
def compiler_digest() -> str:
    """A digest of the code that writes the archive (this package and modelgen)."""
    here = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for folder in (here, here.parent / "modelgen"):
        for source in sorted(folder.rglob("*.py")):
            digest.update(str(source.relative_to(folder)).encode())
            digest.update(source.read_bytes())
    return digest.hexdigest()[:16]


def cached_archive(
    path: PathLike,
    cache_root: PathLike,
    *,
    name: str = "default",
    executor: str = "graph",
    cmsis_nn: bool = False,
    source: Optional[CmsisNnSource] = None,
    cpu: str = DEFAULT_CLASS,
) -> Path:
    """The MLF archive of the ``.tflite`` at ``path``, compiled into ``cache_root/compiled``
    unless it is there already. ``cmsis_nn``, ``source`` and ``cpu`` (a CPU class, whose rules
    choose each operator's form): as ``compile_tflite``'s. With ``cmsis_nn`` the key holds
    where CMSIS-NN comes from as given (``cmsis_path``, ``dependencies``), since the archive
    records that tree's scratch answers; it is not resolved to find the key."""
    from . import compile_tflite

    model = Path(path)
    try:
        if model.stat().st_size > MAX_FILE_BYTES:
            read_tflite(model)  # refuses it, in its own words, by its size
        data = model.read_bytes()
    except OSError as err:
        raise CompileError(f"{model}: {err.strerror or err}") from None
    given = {"name": name, "executor": executor, "cmsis_nn": cmsis_nn, "cpu": cpu}
    if cmsis_nn and source is not None:
        given["cmsis_path"] = source.cmsis_path
        given["dependencies"] = list(source.dependencies)
    options = json.dumps(given, sort_keys=True, default=str)
    key = hashlib.sha256(data + options.encode() + compiler_digest().encode()).hexdigest()[:32]
    folder = Path(cache_root) / "compiled"
    archive = folder / f"{model.stem[:40]}-{key}.tar"
    if archive.is_file():
        os.utime(archive)  # the newest stay
        return archive
    folder.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".compiling-", dir=folder))
    try:
        staged = work / "model.tflite"
        staged.write_bytes(data)  # compile what was hashed, not what the path holds now
        built = compile_tflite(
            staged, work / archive.name, name=name, executor=executor, cmsis_nn=cmsis_nn,
            source=source, cpu=cpu,
        )  # fmt: skip
        os.replace(built, archive)
    finally:
        for leftover in work.iterdir():
            leftover.unlink()
        work.rmdir()
    _prune(folder)
    return archive


def _prune(folder: Path) -> None:
    entries = sorted(folder.glob("*.tar"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in entries[KEEP:]:
        with contextlib.suppress(OSError):
            old.unlink()
