"""Open a Model Library Format archive: a tar (plain or compressed, whatever its name) or an
already-extracted directory. Everything is validated before :func:`open_archive` returns.
"""

from __future__ import annotations

import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

from ..errors import ArchiveError, NotAnMlfError, UnsupportedModelError
from .extract import ExtractLimits, PlannedMember, plan_extraction, safe_extract
from .layout import load_models, read_metadata
from .limits import CappedTarInfo, ReadLimits, check_directory
from .mblob import ArtifactReport, inspect_artifact
from .metadata import MEMBER
from .model import GRAPH_EXPORT_HINT, Model

# Members worth opening when a tar without metadata.json may be export_library output.
_ARTIFACT_SUFFIXES = (".so", ".o", ".c", ".cc", ".dylib", ".dll")
_MAX_ARTIFACT_BYTES = 64 << 20


class Archive:
    """An opened, validated archive. Use as a context manager or call :meth:`close`."""

    def __init__(
        self,
        path: Path,
        root: Path,
        version: int,
        metadata: Dict[str, Any],
        models: List[Model],
        owned_dir: Optional[Path] = None,
    ) -> None:
        self.path = path
        self.root = root
        self.version = version
        self.metadata = metadata
        self.models = models
        self._owned_dir = owned_dir  # a temporary extraction we must delete; never user data

    def model(self, name: Optional[str] = None) -> Model:
        """The model called ``name``; with ``None``, the only model of the archive."""
        names = [model.name for model in self.models]
        if name is None:
            if len(self.models) == 1:
                return self.models[0]
            raise UnsupportedModelError(
                f"{self.path} holds {len(names)} models ({', '.join(names)})",
                hint="choose one by name",
            )
        for model in self.models:
            if model.name == name:
                return model
        raise UnsupportedModelError(
            f"{self.path} has no model {name!r}; it holds: {', '.join(names)}"
        )

    def close(self) -> None:
        if self._owned_dir is not None:
            shutil.rmtree(self._owned_dir, ignore_errors=True)
            self._owned_dir = None

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Archive({str(self.path)!r}, version={self.version}, models={len(self.models)})"


def open_archive(
    path: Union[str, Path],
    *,
    extract_to: Optional[Path] = None,
    limits: Optional[ExtractLimits] = None,
) -> Archive:
    """Open and fully validate an MLF archive (tar, tar.gz, ... or extracted directory).

    A tar is extracted safely to ``extract_to`` (kept after close) or to a temporary directory
    (deleted by :meth:`Archive.close`). ``limits`` caps member count, total size and each
    member's size by its role (default: :meth:`ReadLimits.from_environment`); a directory is
    held to the same caps. Raises ArchiveError subclasses for unusable containers
    (NotAnMlfError for TVM export_library artifacts, UnsafeArchiveError for hostile members,
    in a directory too: a symlink out of it, a fifo)
    and ValidationError subclasses for rule violations inside the archive.
    """
    path = Path(path)
    read_limits = ReadLimits.adopt(limits)
    if path.is_dir():
        _check_directory(path)
        check_directory(path, read_limits)
        return _load(path, path, owned_dir=None)
    if not path.exists():
        raise ArchiveError(f"{path}: no such file or directory")
    if not path.is_file():
        raise ArchiveError(f"{path}: not a regular file or directory")
    return _open_file(path, Path(extract_to) if extract_to else None, read_limits)


def _open_file(path: Path, extract_to: Optional[Path], limits: ExtractLimits) -> Archive:
    with path.open("rb") as handle:
        head = handle.read(4)
    if head == b"\x7fELF":
        _refuse_artifact(path, _read_capped(path))
        raise ArchiveError(f"{path}: an ELF binary, not a Model Library Format archive")
    owned = Path(tempfile.mkdtemp(prefix="mlf-")) if extract_to is None else None
    destination = owned / "archive" if owned is not None else Path(str(extract_to))
    created: Optional[Path] = owned
    existed = destination.is_dir()  # an empty extract_to given by the caller: restore it
    try:
        _extract_checked(path, destination, limits)
        created = created or destination  # only now is extract_to ours to remove on failure
        return _load(path, destination, owned_dir=owned)
    except BaseException:
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
            if existed and owned is None:
                destination.mkdir(exist_ok=True)
        raise


def _extract_checked(path: Path, destination: Path, limits: ExtractLimits) -> None:
    try:
        with tarfile.open(path, mode="r:*", tarinfo=CappedTarInfo) as tar:
            plan = plan_extraction(tar, limits)
            if not any(m.name == MEMBER and m.kind != "dir" for m in plan):
                _refuse_tar_without_metadata(path, tar, plan)
            safe_extract(tar, plan, destination)
    except (tarfile.TarError, EOFError, OSError) as err:
        if isinstance(err, tarfile.ReadError) and not _looks_like_tar(path):
            raise ArchiveError(
                f"{path}: not a Model Library Format archive (neither a tar, plain or gzip, "
                "nor an extracted directory)"
            ) from None
        if isinstance(err, (tarfile.TarError, EOFError)):
            raise ArchiveError(f"{path}: unreadable archive: {err}") from None
        raise ArchiveError(f"{path}: cannot extract: {err}") from None


def _looks_like_tar(path: Path) -> bool:
    with path.open("rb") as handle:
        head = handle.read(512)
    return head[:2] == b"\x1f\x8b" or head[257:262] == b"ustar"


def _load(path: Path, root: Path, owned_dir: Optional[Path]) -> Archive:
    metadata = read_metadata(root)
    version, models = load_models(root, metadata)
    return Archive(path, root, version, metadata, models, owned_dir=owned_dir)


# --- not an MLF -------------------------------------------------------------------------


def _check_directory(path: Path) -> None:
    if (path / MEMBER).is_file():
        return
    for candidate in sorted(path.iterdir()):
        if (
            candidate.is_file()
            and not candidate.is_symlink()
            and candidate.suffix in _ARTIFACT_SUFFIXES
        ):
            _refuse_artifact(candidate, _read_capped(candidate))
    raise ArchiveError(
        f"{path}: no {MEMBER} in this directory: not an extracted Model Library Format archive"
    )


def _read_capped(path: Path) -> bytes:
    with path.open("rb") as handle:
        return handle.read(_MAX_ARTIFACT_BYTES)


def _refuse_tar_without_metadata(
    path: Path, tar: tarfile.TarFile, plan: List[PlannedMember]
) -> None:
    for member in plan:
        if member.kind == "file" and member.name.endswith(_ARTIFACT_SUFFIXES):
            if member.info.size > _MAX_ARTIFACT_BYTES:
                continue
            stream = tar.extractfile(member.info)
            if stream is not None:
                _refuse_artifact(path, stream.read(), inner=member.name)
    nested = [m.name for m in plan if m.name.endswith("/" + MEMBER)]
    hint = f"found {nested[0]}: archive that directory's contents instead" if nested else None
    raise ArchiveError(
        f"{path}: no {MEMBER} at the archive root: not a Model Library Format archive", hint=hint
    )


def _refuse_artifact(path: Path, data: bytes, inner: str = "") -> None:
    """Raise NotAnMlfError when ``data`` is a TVM export_library artifact."""
    report = inspect_artifact(data)
    if report is not None:
        raise not_an_mlf_error(path, report, inner)


def not_an_mlf_error(path: Path, report: ArtifactReport, inner: str = "") -> NotAnMlfError:
    where = f"{path} ({inner})" if inner else str(path)
    return NotAnMlfError(
        f"{where} is a TVM export_library artifact ({report.kind}), not a Model Library Format "
        f"archive. Serialized modules: {report.tree()}. A compiled library cannot become "
        "firmware: the project needs the generated C sources, graph and params as separate "
        "files, and only C/LLVM host code can run on a microcontroller",
        hint=GRAPH_EXPORT_HINT,
        modules=[module.to_dict() for module in report.modules],
    )
