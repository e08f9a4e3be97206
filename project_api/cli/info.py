"""``mlf-project info ARCHIVE [--json]``: what a Model Library Format archive holds."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Dict, List, Optional

from ..cmsis_nn.adapter import workspace_needs
from ..cmsis_nn.calls import API_CMSIS5, API_V4, CmsisNnCalls, find_cmsis_nn_calls
from ..cmsis_nn.features import LEVELS
from ..compile import is_tflite
from ..generate.dependencies import archive_base_dir
from ..generate.memory_plan import model_memory
from ..read import Archive, Model, TensorSpec, open_archive
from ..read.kernel_forms import LEVELS as FORM_LEVELS
from ..read.kernel_forms import model_kernel_forms
from ..resolve import check_dependencies, collect_dependencies
from ..resolve.trust import TrustPolicy, Verdict, assess_all
from .command import EXIT_OK, Command
from .compile import describe_tflite, tflite_lines
from .generate import add_trust_arguments, trust_options


class InfoCommand(Command):
    name = "info"
    help = "validate an MLF archive and describe its models"
    description = (
        "Open and fully validate a TVM Model Library Format archive (tar, tar.gz or extracted "
        "directory) and its external_dependencies (without fetching them), and print its "
        "version and, for each model: executor, targets, inputs, outputs, parameter and "
        "memory sizes, operators and external dependencies: where each would come from and "
        "whether it is allowed (docs/security.md), before anything is fetched."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "archive",
            help="MLF archive (.tar, .tar.gz) or extracted directory, or a .tflite (its "
            "operators, tensors and quantization, and whether compile takes it)",
        )
        parser.add_argument("--json", action="store_true", help="print one JSON object")
        add_trust_arguments(parser.add_argument_group("what the archive's dependencies may do"))

    def do_run(self, args: argparse.Namespace) -> int:
        if is_tflite(args.archive):
            summary = describe_tflite(args.archive)
            print(json.dumps(summary, indent=2) if args.json else "\n".join(tflite_lines(summary)))
            return EXIT_OK
        policy = TrustPolicy.from_options(trust_options(args, {}))
        with open_archive(args.archive) as archive:
            verdicts = check_archive_dependencies(archive, policy)
            if args.json:
                summary = archive_summary(archive)
                summary["dependencies"] = [verdict.to_json() for verdict in verdicts]
                print(json.dumps(summary, indent=2))
            else:
                print("\n".join(describe_archive(archive) + describe_verdicts(verdicts)))
        return EXIT_OK


def check_archive_dependencies(archive: Archive, policy: TrustPolicy) -> List[Verdict]:
    """The checks generate makes of the archive's external_dependencies before fetching any
    (their keys, url_type, short_name, urls, duplicates that disagree, mlf_path directories),
    raising the same DependencyError, and the trust rule's verdict on each. Nothing is
    fetched and nothing outside the archive read."""
    specs = collect_dependencies(
        [model.external_dependencies for model in archive.models],
        model_names=[model.name for model in archive.models],
    )
    check_dependencies(specs, archive.root)
    base_dir = archive_base_dir(Path(archive.path))
    return assess_all(specs, policy, archive_root=archive.root, base_dir=base_dir)


def describe_verdicts(verdicts: List[Verdict]) -> List[str]:
    """One line per dependency: where it would come from, and whether it is allowed."""
    if not verdicts:
        return []
    lines = ["", "external dependencies (nothing fetched yet):"]
    for verdict in verdicts:
        spec = verdict.spec
        at = f" at {spec.version_spec}" if spec.version_spec else ""
        state = "allowed" if verdict.allowed else "REFUSED"
        lines.append(f"  {spec.short_name}: {spec.url_type} from {verdict.source}{at}: {state}")
        lines.append(f"    {verdict.reason}")
    return lines


def archive_summary(archive: Archive) -> Dict[str, Any]:
    models = []
    for model in archive.models:
        summary = {**model.summary(), "memory_plan": _memory(model)}
        calls = find_cmsis_nn_calls(model.sources)
        if calls.api is not None:
            summary["cmsis_nn"] = {"api": calls.api, "calls": len(calls.sites),
                                   "kernels": calls.kernels,
                                   "adapter_scratch_bytes": _adapter_scratch(calls)}  # fmt: skip
        forms = model_kernel_forms(model)
        if forms is not None:
            summary["kernel_forms"] = [
                {"index": op.index, "operator": op.operator, "form": op.form,
                 "function": op.function, "call": op.call or None,
                 "scratch_bytes": dict(zip(FORM_LEVELS, op.scratch)) if op.call else None,
                 "why": op.why or None, "tiled": op.tiled or None}
                for op in forms.operators
            ]  # fmt: skip
        models.append(summary)
    return {"archive": str(archive.path), "version": archive.version, "models": models}


def _adapter_scratch(calls: CmsisNnCalls) -> Dict[str, int]:
    """The most one call takes from its operator's workspace window through the CMSIS-NN
    adapter, per CPU level CMSIS-NN may be compiled at (the board decides which)."""
    return {
        name: max(workspace_needs(calls, level, keep_sums=True).values(), default=0)
        for level, name in enumerate(LEVELS)
    }


def _memory(model: Model) -> Optional[Dict[str, Any]]:
    """The liveness plan's figures (const-table firmware, any board): the arena the model's
    tensors and operator workspace windows take, TVM's plan and the lower bound."""
    memory = model_memory(model)
    if memory is None:
        return None
    return {k: v for k, v in memory.describe().items() if k not in ("placed", "windows")}


def describe_archive(archive: Archive) -> List[str]:
    count = len(archive.models)
    lines = [
        f"archive: {archive.path}",
        f"Model Library Format version {archive.version}, {count} model{'s' * (count != 1)}",
    ]
    for model in archive.models:
        lines.append("")
        lines.extend(describe_model(model))
    return lines


def describe_model(model: Model) -> List[str]:
    lines = [
        f"model {model.name}: {model.executor} executor, {model.style}",
        f"  targets: {'; '.join(model.targets) or '-'}",
        "  inputs:",
        *_tensor_lines(model.inputs),
        "  outputs:",
        *_tensor_lines(model.outputs),
        f"  params: {model.param_count} tensors, {_bytes(model.params_bytes)}",
        f"  storage plan: {_bytes(model.storage_bytes) if model.graph else '- (no graph)'}",
        f"  workspace (metadata): {_bytes(model.workspace_bytes)}",
        *_memory_lines(model),
        f"  operators: {model.op_count} calls, {len(model.operator_functions)} functions",
        *(f"    {name}" for name in model.operator_functions),
        f"  sources: {len(model.sources)} C files, {len(model.objects)} objects",
        f"  external dependencies: {_dependencies(model.external_dependencies)}",
    ]
    if model.aot is not None:
        lines += _aot_lines(model.aot.describe())
    elif model.graph is None:
        lines.append(f"  note: {model.executor} model, no graph executor configuration")
    if model.arm_dsp:
        lines.append(
            "  note: its C calls Arm DSP intrinsics (arm_acle.h): Cortex-M boards with DSP only"
        )
    lines += _form_lines(model)
    calls = find_cmsis_nn_calls(model.sources)
    if calls.api is not None:
        written = {API_V4: "as TVM 0.12-0.18 wrote them for CMSIS-NN v4.1.0's API",
                   API_CMSIS5: "as TVM <= 0.11 wrote them for CMSIS 5's NN"}[calls.api]  # fmt: skip
        lines.append(f"  CMSIS-NN: {calls.describe()} {written}")
        scratch = _adapter_scratch(calls)
        if any(scratch.values()):
            per_level = ", ".join(f"{_bytes(n)} ({level})" for level, n in scratch.items())
            lines.append(
                f"    the adapter's scratch, at most {per_level} a call, is added to the "
                "windows of those operators for the board's CPU (not in the arena above)"
            )
    return lines


def _form_lines(model: Model) -> List[str]:
    """The kernel form of each operator of an archive ``compile`` wrote (compile/forms.py)."""
    forms = model_kernel_forms(model)
    if forms is None:
        return []
    lines = ["  kernel forms (compile):"]
    for op in forms.operators:
        text = f"    {op.index:3d} {op.operator}: {op.form}"
        if op.call:
            per_level = ", ".join(f"{level} {n}" for level, n in zip(FORM_LEVELS, op.scratch))
            text += f" ({op.call}; scratch B: {per_level})"
        if op.why:
            text += f"  [{op.why}]"
        if op.tiled:
            text += f"  {{{op.tiled}}}"
        lines.append(text)
    if forms.cmsis_nn:
        lines.append(
            f"    scratch sizes as CMSIS-NN {forms.cmsis_nn} answers them; the board's level "
            "is added to each operator's workspace window"
        )
    return lines


def _memory_lines(model: Model) -> List[str]:
    memory = model_memory(model)
    if memory is None:
        return []
    return [
        f"  arena: {_bytes(memory.arena_bytes)} planned (tensors and each operator's workspace "
        f"window), TVM's plan {_bytes(memory.tvm_bytes)}, lower bound "
        f"{_bytes(memory.lower_bound)}"
    ]


def _aot_lines(aot: Dict[str, Any]) -> List[str]:
    pools = [f"{p['name']} {_bytes(p['bytes'])} in {p['section']}" for p in aot["static_pools"]]
    pools += [
        f"{p['name']} {_bytes(p['bytes'])} {'constant' if p['constant'] else 'workspace'} "
        "given by the firmware"
        for p in aot.get("caller_pools") or ()
    ]
    memory = "USMP pools " + ", ".join(pools) if aot["usmp"] else "TVMBackendAllocWorkspace"
    if aot.get("io_in_pools"):
        memory += "; inputs and outputs inside the pools"
    return [
        f"  entry point: {aot['entry_point']} (interface {aot['interface']}"
        f"{', declared in ' + aot['header'] if aot['header'] else ''})",
        f"  memory: {memory}",
    ]


def _tensor_lines(specs: List[TensorSpec]) -> List[str]:
    if not specs:
        return ["    (none)"]
    width = max(len(spec.name) for spec in specs)
    return [
        f"    {spec.name:<{width}}  {spec.dtype}{list(spec.shape)}  {_bytes(spec.nbytes)}"
        for spec in specs
    ]


def _bytes(count: int) -> str:
    return f"{count:,} bytes"


def _dependencies(entries: List[dict]) -> str:
    if not entries:
        return "none"
    return ", ".join(
        f"{dep.get('short_name')} ({dep.get('url_type')}: {dep.get('url')}"
        f"{' @ ' + str(dep['version_spec']) if dep.get('version_spec') else ''})"
        for dep in entries
    )
