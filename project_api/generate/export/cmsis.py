"""External dependencies of an exported model (CMSIS-NN): judged by the trust rule as for a
generated project (:func:`..dependencies.declare_dependencies`), then resolved and their
sources copied into ``src/`` beside the runtime, built for the export's CPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Mapping, Sequence, Tuple

from ...errors import GenerateError


def write_dependencies(
    root: Path,
    archive: Any,
    declared: Any,
    plans: Sequence[Any],
    board: Any,
    opts: Mapping[str, Any],
    say: Any,
) -> Tuple[List[str], List[Dict[str, Any]]]:
    """The dependencies' sources under ``src/`` (relative to ``root``) and their record."""
    if not declared.specs:
        return [], []
    raise GenerateError("exporting models with external dependencies is not supported yet")
