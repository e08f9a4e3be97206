"""Find out whether generated C needs CMSIS-NN, which TVM never lists in the metadata.

TVM's CMSIS-NN backend writes ``#include <arm_nnfunctions.h>`` (and ``arm_nn_types.h``,
``arm_nn_math_types.h``) and calls kernels such as ``arm_convolve_wrapper_s8(``,
``arm_depthwise_conv_wrapper_s8(``, ``arm_fully_connected_s8(``, ``arm_softmax_s8(``,
``arm_avgpool_s8(``. Either sign counts. CMSIS-DSP names (``arm_mat_mult_f32``) do not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, List, Optional, Sequence, Tuple, Union

from ..errors import DependencyError
from .spec import CMSIS_NN_DEPENDENCY_FLAG, DependencySpec

_INCLUDE = re.compile(
    r'^[ \t]*#[ \t]*include[ \t]*[<"]'
    r'(arm_nnfunctions|arm_nn_types|arm_nn_math_types|arm_nnsupportfunctions)\.h[>"]',
    re.MULTILINE,
)
_KERNEL = re.compile(
    r"arm_(?<!\warm_)(?:convolve|depthwise_conv|fully_connected|softmax|avgpool|max_pool|elementwise|"
    r"nn_|relu|svdf|lstm|concatenation|reshape|transpose|batch_matmul|pad|minimum|maximum|"
    r"ds_cnn|q7_to_q15|s8_to_s16)\w*\s*\(",
)


@dataclass(frozen=True)
class CmsisNnUse:
    """Where generated code needs CMSIS-NN: ``file:line: text`` evidence."""

    path: Path
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.path.name}:{self.line}: {self.text}"


def find_cmsis_nn_uses(sources: Iterable[Union[Path, str]], limit: int = 5) -> List[CmsisNnUse]:
    """Up to ``limit`` places in ``sources`` (C files) that include or call CMSIS-NN."""
    uses: List[CmsisNnUse] = []
    for source in sources:
        path = Path(source)
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for pattern in (_INCLUDE, _KERNEL):
            for match in pattern.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                snippet = text[match.start() : match.end()].strip()
                uses.append(CmsisNnUse(path, line, snippet))
                if len(uses) >= limit:
                    return uses
    return uses


def detect_cmsis_nn(sources: Iterable[Union[Path, str]]) -> bool:
    """True when the generated C includes CMSIS-NN headers or calls its kernels."""
    return bool(find_cmsis_nn_uses(sources, limit=1))


def refuse_cmsis_nn_off_arm(
    models: Sequence[Tuple[str, Sequence[Union[Path, str]]]], board: Any
) -> None:
    """Raise :class:`DependencyError` (one line) when a model's C calls CMSIS-NN and the board's
    architecture is not one CMSIS-NN is built for (``Architecture.runs_cmsis_nn``: Arm's
    library, its kernels and TVM's buffer sizing are for Cortex-M). ``models`` are
    (name, sources) pairs."""
    arch = board.architecture
    if arch.runs_cmsis_nn:
        return
    for name, sources in models:
        if detect_cmsis_nn(sources):
            raise DependencyError(
                f"model {name} calls CMSIS-NN kernels, which are Arm-only: board {board.name} is "
                f"{arch.name}; choose a Cortex-M board, or generate the model without CMSIS-NN"
            )


def require_cmsis_nn(
    sources: Iterable[Union[Path, str]],
    dependencies: Sequence[DependencySpec],
    *,
    cmsis_path: Optional[str] = None,
) -> bool:
    """Raise :class:`DependencyError` when the code needs CMSIS-NN and nothing provides it.

    Provided means: a dependency named cmsis-nn (from the archive, ``--dependency`` or the
    ``cmsis_path`` option, which :func:`~.spec.collect_dependencies` turns into one), or a
    non-empty ``cmsis_path``. Returns whether CMSIS-NN is used.
    """
    uses = find_cmsis_nn_uses(list(sources), limit=3)
    if not uses:
        return False
    if cmsis_path or any(dep.is_cmsis_nn for dep in dependencies):
        return True
    evidence = "; ".join(str(use) for use in uses)
    raise DependencyError(
        "the model's generated C calls CMSIS-NN, which the archive does not list as a "
        f"dependency ({evidence}); "
        "point at a checkout with --option cmsis_path=/path/to/CMSIS-NN "
        "(a CMSIS-NN or CMSIS_5 tree), or add it with "
        f"{CMSIS_NN_DEPENDENCY_FLAG}",
        hint="TVM 0.14 targeted CMSIS-NN v4.1.0",
    )
