"""``src/<mod>.kernels.json``: the kernel form of each operator of an archive ``compile`` wrote
(compile/forms.py), and for CMSIS-NN operators the kernel called and the scratch bytes the
library answered per CPU level (``portable``, ``dsp``, ``mve``). Read bounded: an archive
without it (TVM's) has none; a malformed one is ignored, never trusted in part."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

MAX_BYTES = 1 << 20
LEVELS = ("portable", "dsp", "mve")  # cmsis_nn.features.LEVELS' order: 0, 1, 2


@dataclass(frozen=True)
class OperatorForm:
    index: int  # the .tflite operator
    operator: str  # its kind (CONV_2D, ...)
    form: str  # ref, cmsis-nn, ...
    function: str  # the generated function
    call: str = ""  # arm_<kernel> for cmsis-nn
    scratch: Tuple[int, int, int] = (0, 0, 0)  # bytes per level (LEVELS)
    why: str = ""  # why this form (compile/choose.py): forced, tuned, rule ..., only, default
    tiled: str = ""  # the tiled stage it runs in (compile/tiling.py), described


@dataclass(frozen=True)
class KernelForms:
    operators: Tuple[OperatorForm, ...]
    cmsis_nn: str = ""  # the CMSIS-NN tree that answered the sizes

    @property
    def asks_cmsis_nn(self) -> bool:
        """Whether some operator calls CMSIS-NN and asks the library its scratch at run time
        (it fits CMSIS-NN built at any CPU level)."""
        return any(op.call for op in self.operators)

    def scratch_at(self, level: int) -> Dict[str, int]:
        """{function: bytes} the CMSIS-NN calls take from their workspace at CPU ``level``
        (0 portable, 1 DSP, 2 MVE); functions that take none left out."""
        needs: Dict[str, int] = {}
        for op in self.operators:
            need = op.scratch[max(0, min(level, 2))]
            if need > 0:
                needs[op.function] = max(needs.get(op.function, 0), need)
        return needs


def describe_tiled(tiled: Any) -> str:
    """One line of a ``tiled`` entry (compile/tiling.py): ``tiled stage 0 (4 layers, bands of
    4 rows, rule; peak 73,728 → 47,232 B; 1,041,408 → 1,244,928 MACs)``; "" for none. A bad
    entry is a ValueError (the file is then ignored whole)."""
    if tiled is None:
        return ""
    if not isinstance(tiled, dict):
        raise ValueError(tiled)
    stage, layers, rows = (_int(tiled.get(k)) for k in ("stage", "layers", "band_rows"))
    text = f"tiled stage {stage} ({layers} layers, bands of {rows} rows"
    by = tiled.get("by")
    if by is not None:
        if not isinstance(by, str):
            raise ValueError(by)
        text += f", {by[:16]}"
    for label, key, unit in (("peak ", "peak_bytes", " B"), ("", "macs", " MACs")):
        pair = tiled.get(key)
        if pair is None:
            continue
        if not isinstance(pair, list) or len(pair) != 2:
            raise ValueError(pair)
        text += f"; {label}{_int(pair[0]):,} → {_int(pair[1]):,}{unit}"
    return text + ")"


def describe_why(why: Any) -> str:
    """One line of a ``why`` entry (compile/choose.py): ``tuned (cpu class cortex-m-dsp):
    cmsis-nn 800 / ref 1,200 instructions on qemu-mps2-an386``, ``rule default/CONV_2D``,
    ``forced (cpu class default)``, ...; "" for none or a bad one."""
    if not isinstance(why, dict) or not isinstance(why.get("by"), str):
        return ""
    by = why["by"][:16]
    text = {"only": "the only candidate", "default": "no rule: ref"}.get(by, by)
    rule = why.get("rule")
    if isinstance(rule, str):
        where, _, shape = rule[:400].partition("/")
        kind, _, signature = shape.partition("/")
        text += f" {where}/{kind}" + (" for this shape" if signature else "")
    if isinstance(why.get("cpu"), str) and by != "rule":
        text += f" (cpu class {why['cpu'][:32]})"
    counts = why.get("instructions")
    if isinstance(counts, dict) and counts:
        measured = " / ".join(
            f"{str(form)[:32]} {n:,}" for form, n in counts.items() if isinstance(n, int)
        )
        text += f": {measured} instructions"
        if isinstance(why.get("board"), str):
            text += f" on {why['board'][:64]}"
    if why.get("fell_back") is True:
        text += ", fell back to ref"
    return text


def kernel_forms_path(root: Path, module: str) -> Path:
    return Path(root) / "src" / f"{module}.kernels.json"


def _int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 1 << 31:
        raise ValueError(value)
    return value


def read_kernel_forms(root: Path, module: str) -> Optional[KernelForms]:
    """The archive's kernel forms of model ``module``; None without (or with a bad) file."""
    path = kernel_forms_path(root, module)
    try:
        if not path.is_file() or path.is_symlink() or path.stat().st_size > MAX_BYTES:
            return None
        document = json.loads(path.read_text(encoding="utf-8"))
        operators = []
        for entry in document["operators"]:
            scratch = entry.get("scratch", {})
            operators.append(
                OperatorForm(
                    index=_int(entry["index"]),
                    operator=str(entry["operator"]),
                    form=str(entry["form"]),
                    function=str(entry["function"]),
                    call=str(entry.get("call", "")),
                    scratch=tuple(_int(scratch.get(level, 0)) for level in LEVELS),  # type: ignore[arg-type]
                    why=describe_why(entry.get("why")),
                    tiled=describe_tiled(entry.get("tiled")),
                )
            )
        return KernelForms(tuple(operators), str(document.get("cmsis_nn", "")))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def model_kernel_forms(model: Any) -> Optional[KernelForms]:
    """:func:`read_kernel_forms` of a read ``Model`` (its ``root`` and ``name``)."""
    root = getattr(model, "root", None)
    name = getattr(model, "name", None)
    if root is None or not isinstance(name, str):
        return None
    return read_kernel_forms(Path(root), name)
