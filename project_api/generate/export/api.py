"""A model's C API: ``src/<name>.h`` (sizes, tensor tables, the functions) and
``src/<name>.c`` (the const tables, the arena's layout, the functions over the runtime).

Every size comes from the generator's plan (:mod:`..plan`): the arena is the plan's tensor
arena, then its operator workspace, then the executor's state, so the figure changes with
the planner and never disagrees with it. Only the executor's state depends on the target (its
pointer width): it is planned for 32- and 64-bit pointers, and the header chooses between
them by ``UINTPTR_MAX`` when the firmware is compiled.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, List, Optional

from ...read.model import TensorSpec
from ...read.quant import Quantization, tensor_quantization
from ..plan import ModelPlan, generator_version
from ..render import tables_c, template_environment
from ..sizes import align
from ..table_sizes import state_bytes
from ..tables import STORAGE_ALIGN, c_string, state_bytes_expression

# Machine words in <name>_ctx: the executor's record, the workspace's and a flag (19 + 10 + 1
# words with 4-byte pointers, 17 + 9 + 1 with 8-byte ones), with room to spare; <name>.c
# refuses to compile if they ever outgrow it.
CTX_WORDS = 32


# The pointer widths every export plans the arena for (bits); the compiler picks one.
POINTER_BITS = (32, 64)


def arena_layout(plan: ModelPlan, bits: int) -> Dict[str, int]:
    """The arena of an exported model with ``bits``-bit pointers: tensors (with the liveness
    plan, and each operator's workspace window among them), a workspace apart (none with the
    plan), executor state (bytes)."""
    activations = plan.arena_bytes
    workspace = align(plan.separate_workspace_bytes, STORAGE_ALIGN)
    state = state_bytes(plan.device_tables, bits // 8)
    return {
        "activation_bytes": activations,
        "workspace_bytes": workspace,
        "state_bytes": state,
        "arena_bytes": activations + workspace + state,
    }


def _tensor(spec: TensorSpec, kind: str, index: int, quant: Optional[Quantization], why: str):
    shape = [int(d) for d in spec.shape]
    return {
        "kind": kind,
        "KIND": kind.upper(),
        "index": index,
        "name": spec.name,
        "name_literal": c_string(spec.name),
        "dtype": spec.dtype,
        "shape": shape,
        "shape_text": "[" + ", ".join(str(d) for d in shape) + "]",
        "nbytes": spec.nbytes,
        "quant": None
        if quant is None
        else {"scale": repr(float(quant.scale)), "zero_point": int(quant.zero_point)},
        "quant_why": why,
    }


def _concurrency(plan: ModelPlan) -> Optional[str]:
    """Why runs must not overlap, or None when they may."""
    reasons = []
    if plan.workspace.bytes:
        reasons.append(
            "the operators draw scratch memory through TVM's TVMBackendAllocWorkspace, whose "
            "ABI has no context: the runtime binds this context's workspace for the run"
        )
    if plan.kind.ram_items(plan.model):
        reasons.append("TVM's AOT code keeps its pools (USMP) in static memory")
    return "; ".join(reasons) + "." if reasons else None


def api_context(plan: ModelPlan, name: str, target: str, cmsis_nn: bool) -> Dict[str, Any]:
    """The templates' context; ``target`` says what the export is for (a comment),
    ``cmsis_nn`` whether the model's C calls the CMSIS-NN carried with it (its C API then
    checks the compiler's target first)."""
    model = plan.model
    quants = tensor_quantization(model)
    inputs = [
        _tensor(spec, "input", i, quants.inputs[i], quants.why)
        for i, spec in enumerate(model.inputs)
    ]
    outputs = [
        _tensor(spec, "output", i, quants.outputs[i], quants.why)
        for i, spec in enumerate(model.outputs)
    ]
    library = plan.library
    tables, symbol = tables_c(plan)
    layouts = {bits: arena_layout(plan, bits) for bits in POINTER_BITS}
    global_state = _concurrency(plan)
    return {
        "generator_version": generator_version(),
        "name": name,
        "NAME": name.upper(),
        "c_name": plan.c_name,
        "model_name": model.name,
        "executor": plan.kind.name,
        "target": target,
        "cmsis_nn": cmsis_nn,
        "inputs": inputs,
        "outputs": outputs,
        "arena_align": STORAGE_ALIGN,
        "ctx_words": CTX_WORDS,
        **layouts[32],
        "arena32": layouts[32],
        "arena64": layouts[64],
        "arena_layouts": layouts,
        # The executor lends the bound workspace each operator's window (liveness plan).
        "binds_workspace": plan.workspace.bytes > 0,
        "static_ram_bytes": sum(plan.kind.ram_items(model).values()),
        "global_state": global_state,
        "concurrency": global_state
        or "no global state: contexts of this model may run at the same time.",
        "entry_point": plan.entry_point,
        "functions_linked": bool(library.func_ptrs),
        "library": library.library,
        "registry_c": _local_includes(library.c_text, name),
        "tables_c": tables,
        "tables_symbol": symbol,
        "state_expression": state_bytes_expression(plan.device_tables),
        "has_params": bool(plan.params_blob),
        "params_in_tables": bool(plan.params_layout),
    }


_LOCAL_INCLUDE = re.compile(r'^#include "([^"/\n]+\.h)"', re.MULTILINE)


def _local_includes(text: str, name: str) -> str:
    """The adapter includes the model's header by its bare name; in the export it sits in
    ``src/<name>/``."""
    return _LOCAL_INCLUDE.sub(lambda m: f'#include "{name}/{m.group(1)}"', text)


def write_api(
    src: Path, plan: ModelPlan, name: str, target: str, cmsis_nn: bool = False
) -> Dict[str, Any]:
    """Writes ``src/<name>.h`` and ``src/<name>.c``; returns the template context."""
    env = template_environment("export")
    context = api_context(plan, name, target, cmsis_nn)
    (src / f"{name}.h").write_text(env.get_template("model.h.j2").render(context))
    (src / f"{name}.c").write_text(env.get_template("model.c.j2").render(context))
    return context


def tensor_summary(context: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The tensors as export.json records them."""
    return [
        {k: t[k] for k in ("kind", "index", "name", "dtype", "shape", "nbytes", "quant")}
        for t in context["inputs"] + context["outputs"]
    ]
