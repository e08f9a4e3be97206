"""The result of resolving one dependency: :class:`ResolvedDependency`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .spec import DependencySpec, Recipe


@dataclass(frozen=True)
class ResolvedDependency:
    """A dependency whose files are ready on disk.

    - ``path``: the ready directory (a cache entry's tree, a local directory, a directory of
      the extracted archive; for a skipped dependency, where it would have been, maybe None);
    - ``resolved``: the git commit (40 hex) or the downloaded archive's sha256 (64 hex); None
      for ``path``/``mlf_path`` dependencies;
    - ``recipe``: how it is built, ``recipe.kind`` decided (``cmsis-nn``, ``generic``,
      ``cmake``, ``none`` = not compiled);
    - ``note``: a sentence for the user (e.g. why it is not compiled);
    - ``placed`` / ``tree_sha256``: set by :func:`~.place.place_dependencies`: the directory
      relative to the project (``deps/<short_name>``) and a digest of the files copied there.
    """

    spec: DependencySpec
    path: Optional[Path]
    resolved: Optional[str]
    recipe: Recipe
    note: Optional[str] = None
    placed: Optional[str] = None
    tree_sha256: Optional[str] = None

    @property
    def short_name(self) -> str:
        return self.spec.short_name

    @property
    def skipped(self) -> bool:
        """True when the dependency is not compiled into the firmware (recipe ``none``)."""
        return self.recipe.kind == "none"

    @property
    def resolved_kind(self) -> Optional[str]:
        """``"commit"`` for git, ``"sha256"`` for url, None otherwise."""
        if self.resolved is None:
            return None
        return "commit" if self.spec.url_type == "git" else "sha256"

    def replace(self, **changes: object) -> ResolvedDependency:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]
