"""Which kernel form each operator takes, and why: forced, tuned, a rule, or the only one.

Every operator has *candidates*: the forms of :data:`~.forms.FORMS` that take it (their
``refusal`` says nothing) and compute it exactly as LiteRT does (the form's rounding for that
kind is LiteRT's; a form with another rounding is never chosen, only forced). A form that
needs a dependency (``cmsis-nn``, ``simd``), or is marked ``with_cmsis_nn`` (``direct``), is a
candidate only where the user allowed it (``--cmsis-nn``); other forms of our own C always
are.

Among the candidates the choice is, in order:

1. ``forced``: ``--form KIND=FORM`` (compile/forms.py refuses it where it cannot be);
2. ``tuned``: instructions measured per candidate on a board (``compile --tune BOARD``,
   compile/tune.py): the fewest wins, ties go to the earlier candidate (``ref`` first);
3. ``rule``: the rules table (``rules/forms.json``, package data), measured once per CPU
   class and kept as data: a rule for the operator's exact shape signature first, then one
   for its kind on that class (one form, or a list in order of preference), then the
   ``default`` class's for its kind;
4. ``only``: a single candidate (``ref`` without ``--cmsis-nn``), or ``default``: ``ref``.

The reason goes into ``src/<mod>.kernels.json`` (``why``) and ``info`` shows it.
"""

from __future__ import annotations

import functools
import hashlib
import json
from importlib import resources
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..errors import CompileError
from .forms import FORMS, REF, FormPlan
from .support import LITERT_ROUNDING
from .tflite import Operator, TfliteModel

RULES_FILE = "forms.json"
DEFAULT_CLASS = "default"
# CPU classes the rules are kept for (a board or --cpu names one: cpu_class()).
CPU_CLASSES = ("default", "plain", "cortex-m0", "cortex-m3", "cortex-m-dsp", "cortex-m-mve",
               "riscv")  # fmt: skip
_V6M = ("cortex-m0", "cortex-m0plus", "cortex-m1", "cortex-m23")
Measured = Mapping[int, Mapping[str, int]]  # operator index -> {form: instructions}


def cpu_class(board: Any = None, cpu: Optional[str] = None) -> str:
    """The CPU class of a board (a loaded ``Board``) or a ``--cpu`` text (a class name or an
    ``-mcpu`` such as cortex-m4, rv32imac); ``default`` for neither."""
    if cpu:
        text = cpu.strip().lower()
        if text in CPU_CLASSES:
            return text
        if text.startswith(("rv32", "rv64", "riscv")):
            return "riscv"
        if text in ("host", "x86_64", "aarch64", "native"):
            return "plain"
        if text.startswith(_V6M):
            return "cortex-m0"
        if text.startswith(("cortex-m55", "cortex-m85")):
            return "cortex-m-mve"
        if text.startswith(("cortex-m4", "cortex-m7", "cortex-m33", "cortex-m35p")):
            return "cortex-m-dsp"
        if text.startswith("cortex-m3"):
            return "cortex-m3"
        raise CompileError(
            f"--cpu {cpu!r}: a CPU class ({', '.join(CPU_CLASSES)}) or a core such as "
            "cortex-m4 or rv32imac"
        )
    if board is None:
        return DEFAULT_CLASS
    if board.is_host:
        return "plain"
    if str(board.arch).startswith("riscv"):
        return "riscv"
    spec = board.cpu
    if getattr(spec, "mve", False):
        return "cortex-m-mve"
    if getattr(spec, "dsp", False):
        return "cortex-m-dsp"
    mcpu = str(getattr(spec, "mcpu", "") or "").lower()
    return "cortex-m0" if mcpu.startswith(_V6M) else "cortex-m3"


def signature(model: TfliteModel, op: Operator) -> str:
    """The operator's shape signature: its kind, data types, shapes of every operand, its
    options and whether its quantization is per channel; not its constant values. The same
    signature runs the same instructions (up to data-dependent branches)."""
    parts: List[str] = [op.name]
    for index in (*op.inputs, *op.outputs):
        if index < 0:
            parts.append("-")
            continue
        t = model.tensors[index]
        q = t.quantization
        grain = "" if q is None else ("/pc" if q.per_channel else "/pt")
        parts.append(f"{t.dtype}[{','.join(map(str, t.shape))}]{grain}")
    options = json.dumps(op.options, sort_keys=True, default=str, separators=(",", ":"))
    parts.append(hashlib.sha256(options.encode()).hexdigest()[:8])
    return ":".join(parts)


def exact(form: str, kind: str) -> bool:
    """Whether ``form`` computes an operator of ``kind`` with LiteRT's rounding (a kind
    LiteRT requantizes in no particular way, a pool, takes any)."""
    mine, theirs = FORMS[form].rounding.get(kind), LITERT_ROUNDING.get(kind)
    return mine is None or theirs is None or mine == theirs


def candidates(model: TfliteModel, op: Operator, *, cmsis_nn: bool = False) -> List[str]:
    """The exact forms that take ``op`` (``ref`` first); dependency forms only if allowed."""
    found = []
    for name, form in FORMS.items():
        if form.forced_only:
            continue
        if (form.dependency is not None or form.with_cmsis_nn) and not cmsis_nn:
            continue
        if exact(name, op.name) and form.refusal(model, op) is None:
            found.append(name)
    if REF in found:
        found.remove(REF)
    return [REF, *found]


@functools.lru_cache(maxsize=1)
def load_rules() -> Dict[str, Any]:
    """The rules table shipped with the package (``rules/forms.json``)."""
    text = resources.files(__package__).joinpath("rules").joinpath(RULES_FILE).read_text("utf-8")
    table: Dict[str, Any] = json.loads(text)
    return table


def rule_for(
    rules: Mapping[str, Any], cpu: str, kind: str, sig: str, allowed: List[str]
) -> Optional[Tuple[str, str, Dict[str, Any]]]:
    """(form, rule name, rule) the table gives an operator, among ``allowed``; None if none."""
    classes = rules.get("classes", {})
    for where in dict.fromkeys((cpu, DEFAULT_CLASS)):
        kinds = classes.get(where, {}).get("operators", {}).get(kind, {})
        shaped = kinds.get("signatures", {}).get(sig)
        if shaped and shaped.get("form") in allowed:
            return shaped["form"], f"{where}/{kind}/{sig}", dict(shaped)
        # a kind's rule: one form, or forms in order of preference (the first allowed wins)
        general = kinds.get("form")
        for form in [general] if isinstance(general, str) else list(general or []):
            if form in allowed:
                return form, f"{where}/{kind}", {"form": form}
    return None


def check_forced(model: TfliteModel, forced: Mapping[str, str]) -> None:
    """A one-line CompileError for the first operator a forced form {kind: form} cannot
    take."""
    for op in model.operators:
        name = forced.get(op.name)
        refused = FORMS[name].refusal(model, op) if name else None
        if refused:
            raise CompileError(f"operator {op.index} ({op.name}): form {name} {refused}")


def choose_forms(
    model: TfliteModel,
    *,
    cmsis_nn: bool = False,
    forced: Optional[Mapping[str, str]] = None,
    cpu: str = DEFAULT_CLASS,
    measured: Optional[Measured] = None,
    rules: Optional[Mapping[str, Any]] = None,
    measured_on: str = "",
) -> FormPlan:
    """Each operator's form and why (see the module docstring): ``measured`` {index: {form:
    instructions}} on board ``measured_on`` (compile/tune.py), ``rules`` (default: the
    package's table) for CPU class ``cpu``. A forced form that cannot take an operator is a
    one-line CompileError."""
    forced = dict(forced or {})
    check_forced(model, forced)
    table = load_rules() if rules is None else rules
    wanted: Dict[int, str] = {}
    is_forced: Dict[int, bool] = {}
    why: Dict[int, Dict[str, Any]] = {}
    for op in model.operators:
        if op.name in forced:
            wanted[op.index], is_forced[op.index] = forced[op.name], True
            why[op.index] = {"by": "forced"}
            continue
        allowed = candidates(model, op, cmsis_nn=cmsis_nn)
        counts = {f: int(n) for f, n in (measured or {}).get(op.index, {}).items() if f in allowed}
        if len(allowed) > 1 and counts and all(f in counts for f in allowed):
            best = min(allowed, key=lambda f: (counts[f], allowed.index(f)))
            wanted[op.index] = best
            why[op.index] = {"by": "tuned", "instructions": counts}
            if measured_on:
                why[op.index]["board"] = measured_on
            continue
        if len(allowed) == 1:
            wanted[op.index] = allowed[0]
            why[op.index] = {"by": "only"}
            continue
        found = rule_for(table, cpu, op.name, signature(model, op), allowed)
        if found is None:
            wanted[op.index] = REF
            why[op.index] = {"by": "default"}
            continue
        form, rule, entry = found
        wanted[op.index] = form
        why[op.index] = {"by": "rule", "rule": rule}
        if "instructions" in entry:
            why[op.index]["instructions"] = entry["instructions"]
    for reason in why.values():
        reason["cpu"] = cpu
    return FormPlan(wanted, is_forced, why=why)
