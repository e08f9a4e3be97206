"""``compile --tune BOARD``: each operator's candidate forms measured under QEMU ``-icount``.

One firmware per candidate form: the model compiled with that form on every operator it can
take exactly (the others ``ref``, forced ones as forced), generated for ``BOARD`` with the
``profile`` option (the model's C compiled with ``-finstrument-functions``: one record per
operator function, the same hooks for every form), built, run once under ``-icount shift=0``
on fixed inputs. The operator's instructions are its calls' ticks × the board's instructions
per tick (40 on the MPS2 machines, so each figure is exact to within one tick). Instruction
counts are deterministic, so the measurement is exact and repeatable.

Each figure is cached in ``<cache>/tune/`` keyed by the operator's shape signature
(compile/choose.py), the board, the form and its version, the CMSIS-NN tree for a form that
calls it, and the compiler's own code (a changed emitter measures again): a second ``--tune``
of the same model builds nothing and chooses the same. A form whose every operator is cached
is not built at all. compile/choose.py then takes the fewest instructions per operator.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from ..errors import CompileError
from .cache import compiler_digest
from .choose import candidates, check_forced, signature
from .forms import CMSIS_NN_DEPENDENCY, FORMS, REF, FormPlan
from .tflite import TfliteModel, read_tflite

PathLike = Union[str, "os.PathLike[str]"]
Progress = Callable[[str], None]
CACHE_FOLDER = "tune"
RUN_SECONDS = 600.0


@dataclass
class Tuning:
    """What ``--tune`` measured: {operator index: {form: instructions}}, and its cost."""

    board: str
    measured: Dict[int, Dict[str, int]] = field(default_factory=dict)
    builds: List[str] = field(default_factory=list)  # the forms a firmware was built for
    cached: int = 0  # figures taken from the cache
    fresh: int = 0  # figures measured now
    seconds: float = 0.0
    notes: List[str] = field(default_factory=list)

    def to_json(self) -> Dict[str, Any]:
        return {
            "board": self.board,
            "builds": list(self.builds),
            "cached": self.cached,
            "measured": self.fresh,
            "seconds": self.seconds,
            "notes": list(self.notes),
            "instructions": {str(i): dict(c) for i, c in sorted(self.measured.items())},
        }


def tune_cache_dir() -> Path:
    from ..resolve.cache import default_cache_dir

    return default_cache_dir() / CACHE_FOLDER


def cache_key(sig: str, board: str, form: str, release: str) -> str:
    """The cache key of one figure (see the module docstring)."""
    text = json.dumps(
        [sig, board, form, FORMS[form].version, release if FORMS[form].dependency else "",
         compiler_digest()]
    )  # fmt: skip
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _read_cached(folder: Path, key: str) -> Optional[int]:
    try:
        value = json.loads((folder / f"{key}.json").read_text(encoding="utf-8"))["instructions"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _write_cached(folder: Path, key: str, entry: Mapping[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{key}.", dir=folder)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(entry, handle, sort_keys=True)
    os.replace(temp, folder / f"{key}.json")


def fixed_inputs(model: TfliteModel) -> Dict[str, np.ndarray]:
    """The inputs every measuring run takes: seeded random values of each input's type."""
    rng = np.random.default_rng(0)
    inputs = {}
    for index in model.inputs:
        t = model.tensors[index]
        if t.dtype == "int8":
            inputs[t.name] = rng.integers(-128, 128, size=t.shape, dtype=np.int8)
        else:
            inputs[t.name] = rng.standard_normal(size=t.shape).astype(np.float32)
    return inputs


def tune_forms(
    path: PathLike,
    board: str,
    *,
    cmsis_nn: bool = False,
    forced: Optional[Mapping[str, str]] = None,
    source: Any = None,
    progress: Optional[Progress] = None,
    cache_dir: Optional[Path] = None,
) -> Tuning:
    """Measures every candidate form of every operator with more than one (cached figures
    are reused); ``source`` is compile's ``CmsisNnSource``. One-line CompileErrors."""
    from ..board import load_board
    from ..errors import MlfProjectError

    start = time.perf_counter()
    say = progress or (lambda text: None)
    try:
        machine = load_board(board)
    except MlfProjectError as err:
        raise CompileError(f"--tune {board}: {err}") from None
    if not machine.is_qemu:
        raise CompileError(
            f"--tune {board}: tuning counts instructions under QEMU -icount; name a QEMU board "
            "(qemu-mps2-an386, qemu-mps3-an547, qemu-riscv32, ...)"
        )
    if cmsis_nn and not machine.architecture.runs_cmsis_nn:
        raise CompileError(
            f"--tune {board}: CMSIS-NN is not built for {machine.arch}; tune without --cmsis-nn"
        )
    model = read_tflite(path)
    forced = dict(forced or {})
    check_forced(model, forced)  # before any firmware is built with them
    allowed = {
        op.index: candidates(model, op, cmsis_nn=cmsis_nn)
        for op in model.operators
        if op.name not in forced
    }
    chosen_between = {i: forms for i, forms in allowed.items() if len(forms) > 1}
    tuning = Tuning(board)
    if not chosen_between:
        say("tune: every operator has one candidate form; nothing to measure")
        return tuning
    release, cmsis_root = "", None
    if any(FORMS[f].dependency for forms in chosen_between.values() for f in forms):
        from . import CmsisNnSource
        from .cmsis_scratch import cmsis_nn_tree

        where = source or CmsisNnSource()
        cmsis_root, release = cmsis_nn_tree(
            dict(CMSIS_NN_DEPENDENCY),
            cmsis_path=where.cmsis_path,
            overrides=where.dependencies,
            offline=where.offline,
        )
    folder = cache_dir or tune_cache_dir()
    operators = {op.index: op for op in model.operators}
    keys: Dict[Tuple[int, str], str] = {}
    missing: Dict[str, List[int]] = {}
    for index, forms in chosen_between.items():
        sig = signature(model, operators[index])
        for form in forms:
            key = keys[index, form] = cache_key(sig, board, form, release)
            value = _read_cached(folder, key)
            if value is None:
                missing.setdefault(form, []).append(index)
            else:
                tuning.measured.setdefault(index, {})[form] = value
                tuning.cached += 1
    order = [f for f in FORMS if f in missing]
    for number, form in enumerate(order, 1):
        say(
            f"tune: [{number}/{len(order)}] form {form}: {len(missing[form])} operator(s) "
            f"to measure on {board} (generate, build, run with -icount)"
        )
        began = time.perf_counter()
        counts, nested = _measure(
            path, model, machine.name, form, allowed, forced, source, cmsis_root
        )
        tuning.builds.append(form)
        if nested:
            note = (f"form {form}: {nested} call(s) inside operator functions were recorded too; "
                    "their hooks are in those operators' figures (no_instrument_function "
                    "keeps a helper out)")  # fmt: skip
            tuning.notes.append(note)
            say(f"tune: note: {note}")
        say(f"tune: [{number}/{len(order)}] form {form}: {time.perf_counter() - began:.1f} s")
        for index in missing[form]:
            if index not in counts:
                raise CompileError(
                    f"--tune {board}: operator {index} ({operators[index].name}) left no "
                    f"record in the {form} firmware's profile"
                )
            value = counts[index]
            tuning.measured.setdefault(index, {})[form] = value
            tuning.fresh += 1
            _write_cached(folder, keys[index, form], {
                "instructions": value, "signature": signature(model, operators[index]),
                "board": board, "form": form, "version": FORMS[form].version,
                "release": release if FORMS[form].dependency else "",
            })  # fmt: skip
    tuning.seconds = time.perf_counter() - start
    return tuning


def _measure(
    path: PathLike,
    model: TfliteModel,
    board: str,
    form: str,
    allowed: Mapping[int, List[str]],
    forced: Mapping[str, str],
    source: Any,
    cmsis_root: Optional[Path],
) -> Tuple[Dict[int, int], int]:
    """({operator index: instructions}, calls recorded below the operators) of one firmware
    with ``form`` wherever it is a candidate (``ref`` elsewhere, forced kinds as forced)."""
    from ..driver import Project
    from ..errors import MlfProjectError
    from ..modelgen.emit import tar_bytes
    from ..report.profile import build_profile, profile_target
    from . import archive_members, compile_model

    wanted: Dict[int, str] = {}
    is_forced: Dict[int, bool] = {}
    for op in model.operators:
        if op.name in forced:
            wanted[op.index], is_forced[op.index] = forced[op.name], True
        else:
            wanted[op.index] = form if form in allowed.get(op.index, [REF]) else REF
    cmsis_nn = any(FORMS[f].dependency for f in wanted.values())
    # each operator measured on its own: no tiled stage merges them (compile/tiling.py)
    compiled = compile_model(path, cmsis_nn=cmsis_nn, source=source,
                             plan=FormPlan(wanted, is_forced), tiling="off")  # fmt: skip
    functions: Dict[str, int] = {}
    for index, _, _, number in compiled.forms.chosen:
        functions[compiled.generated.lowered.op_functions[number]] = index
    work = Path(tempfile.mkdtemp(prefix="mlf-tune-"))
    try:
        archive = work / "model.tar"
        archive.write_bytes(tar_bytes(archive_members(compiled, "graph", Path(path))))
        options: Dict[str, Any] = {"profile": True, "qemu_icount": True}
        if cmsis_root is not None:
            options["cmsis_path"] = str(cmsis_root)
        try:
            project = Project.generate(archive, work / "project", board=board, options=options)
            project.build()
            name = compiled.generated.lowered.module
            with project.session(timeout=60.0, run_timeout=RUN_SECONDS) as session:
                session.run(fixed_inputs(model))
                records, dropped, anchor = session.profile()
                ticks = session.last_stats.ticks if session.last_stats else 0
                profile = build_profile(
                    profile_target(project, name),
                    [(records, dropped, anchor, ticks)],
                    session.info.tick_hz,
                    session.ticks_to_instructions,
                )
        except MlfProjectError as err:
            raise CompileError(f"--tune {board}: form {form}: {err}") from None
        if profile.unit != "instructions" or profile.dropped:
            raise CompileError(
                f"--tune {board}: form {form}: the profile counted {profile.unit}"
                f"{', with calls dropped' if profile.dropped else ''}, not every instruction"
            )
        counts: Dict[int, int] = {}
        for call in profile.calls:
            owner = functions.get(call.function)
            if owner is not None:
                counts[owner] = counts.get(owner, 0) + round(call.value)
        return counts, max(0, len(records) - len(profile.calls))
    finally:
        shutil.rmtree(work, ignore_errors=True)
