"""The probe firmware: a generated project whose main.c is replaced by bench's own.

The probe measures, on the device, with the runtime's own functions: RAM (executor state,
graph tables parsed from JSON), the arena with params bound in place and copied, the
instruction count of inferences through the graph executor and through a straight-line
sequence of direct operator calls (built here from the same GraphTables the generator
emitted: the AOT-style limit of dispatch), and the params copy path. See
firmware/probe_main.c.j2.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .common import FIRMWARE_DIR, Context, c_bytes, firmware_tables, generate

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LINE = re.compile(r"^([a-z_]+) (\d+)$")
# Inputs the probe sets to zero rather than to pseudo-random data (by model and input name):
# the factory's `failing` model fails on purpose when its flag is non-zero.
ZERO_INPUTS = {"failing": ("fail",)}


@dataclass
class ProbeResult:
    """What one probe run printed (``values``), with the project it ran in."""

    model: str
    board: str
    graph_format: str
    values: Dict[str, int]
    project: Any
    instructions_per_tick: Optional[float]
    build_seconds: float = 0.0
    notes: List[str] = field(default_factory=list)

    def get(self, key: str) -> Optional[int]:
        return self.values.get(key)

    def per_inference(self, key: str) -> Optional[float]:
        """Instructions (QEMU -icount) or ticks (elsewhere) of one inference on a path."""
        ticks = self.values.get(key)
        reps = self.values.get("reps")
        if ticks is None or not reps:
            return None
        factor = self.instructions_per_tick or 1.0
        return ticks * factor / reps

    @property
    def quantum(self) -> Optional[float]:
        """The resolution of a per-inference figure: one tick spread over ``reps``."""
        reps = self.values.get("reps")
        if not reps:
            return None
        return (self.instructions_per_tick or 1.0) / reps


def probe_context(
    project: Any,
    *,
    target_ticks: int,
    max_reps: int = 100000,
    direct: bool = True,
) -> Dict[str, Any]:
    """The template context for a generated single-model project."""
    from project_api.generate import MODEL_TAR
    from project_api.generate.params_blob import aligned_params
    from project_api.generate.tables import MLF_FUNC_COPY, c_name, state_bytes_expression
    from project_api.read import open_archive

    (described,) = project.models
    name = str(described["name"])
    plan = described.get("memory_plan")  # the liveness plan of const tables, else None
    tables, params = firmware_tables(project)  # as the firmware's executor runs them
    with open_archive(Path(project.dir) / MODEL_TAR) as archive:
        (model,) = [m for m in archive.models if m.name == name]
        aot_direct = _aot_direct_call(model, described) if direct else None
    windows = [tuple(w) for w in plan["windows"]] if plan else [(0, 0)] * len(tables.ops)
    in_place = tables.bound_in_place(params) if params else set()
    funcs = list(tables.funcs)
    # An AOT model's one call goes to tvmgen_<mod>_run in its own convention, not packed.
    direct_ok = direct and aot_direct is None and all(_IDENT.match(f) for f in funcs)
    shapes: List[int] = []
    views = []
    for view in tables.views:
        views.append(
            {
                "storage": view.storage,
                "shape": len(shapes),
                "ndim": len(view.shape),
                "code": view.dtype.code,
                "bits": view.dtype.bits,
                "lanes": view.dtype.lanes,
            }
        )
        shapes.extend(view.shape)
    ops = []
    for op, window in zip(tables.ops, windows):
        ops.append(
            {
                "func": None if op.func == MLF_FUNC_COPY else op.func,
                "args": list(op.args),
                "copy_bytes": tables.views[op.args[0]].nbytes,
                "window": window,
            }
        )
    writable = [0 if tables.views[v].storage in in_place else 1 for v in tables.outputs] or [0]
    inputs = [a.name for a in tables.args if a.name not in params]
    zero = [i for i, n in enumerate(inputs) if n in ZERO_INPUTS.get(name, ())]
    param_pools = tables.param_storage(params.keys()) if params else set()
    has_params = bool(params)
    copy_path = has_params and not described.get("functions_outside_registry")
    # TVM's params format, for the runtime's own binding rule and its copy path: the
    # firmware's blob may be laid out for the tables instead (no headers to bind by name).
    tvm_params = c_bytes(aligned_params(params)[0]) if has_params else []
    return {
        "name": name,
        "c_name": described["c_name"],
        "graph_format": described["graph_format"],
        "target_ticks": int(target_ticks),
        "max_reps": int(max_reps),
        "direct": direct_ok,
        "aot_direct": aot_direct,
        "funcs": funcs,
        "views": views,
        "shapes": shapes,
        "ops": ops,
        "max_args": tables.max_op_args,
        "writable_outputs": writable,
        "has_params": has_params,
        "tvm_params": tvm_params,
        "copy_path": copy_path,
        "entry_point": f"mlf_{described['c_name']}_system_lib",
        "state_expression": state_bytes_expression(tables),
        # Every arg, params included: the firmware's const tables leave out those they bind
        # (graph.json parsed on the device keeps them all, numbered its own way).
        "plain_args": [f"{{{c_name(a.name)}, {a.view}u, {a.node}u}}" for a in tables.args]
        if described["graph_format"] == "tables"
        else [],
        "copy_arena_bytes": tables.arena_bytes(()),
        # The copy path lays the pools out one after another, its workspace apart.
        "copy_workspace_bytes": max(size for _, size in windows)
        if plan and windows
        else int(described["sizes"]["workspace_bytes"]),
        "arena_without_params": tables.arena_bytes(param_pools),
        "zero_inputs": zero,
        "num_ops": len(tables.ops),
        "num_views": len(tables.views),
        "storage_bytes": sum(tables.storage_bytes),
    }


def _aot_direct_call(model: Any, described: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """For an AOT model with the C interface: what a bare program calling
    ``tvmgen_<mod>_run`` needs (TVM's header, its struct members and the executor storage
    each points at: the one-call graph stores inputs, then outputs, one storage each)."""
    entry = getattr(model, "aot", None)
    if entry is None or entry.interface != "c" or not entry.header_member:
        return None
    header = f"../model/{described['c_name']}/{entry.header_member}"
    fields = list(entry.input_fields) + list(entry.output_fields)
    return {
        "header": header,
        "prefix": entry.prefix,
        "run": entry.run_function,
        "inputs": [(f, i) for i, f in enumerate(entry.input_fields)],
        "outputs": [(f, len(entry.input_fields) + j) for j, f in enumerate(entry.output_fields)],
        "num_fields": len(fields),
    }


def render_probe(context: Mapping[str, Any]) -> str:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(FIRMWARE_DIR)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    return env.get_template("probe_main.c.j2").render(**context)


def build_probe(
    archive: Path,
    project_dir: Path,
    *,
    board: str,
    model: Optional[str] = None,
    graph_format: str = "tables",
    options: Optional[Mapping[str, Any]] = None,
    target_ticks: Optional[int] = None,
    direct: bool = True,
) -> Any:
    """Generates a project for ``model`` of ``archive`` on ``board``, puts the probe in its
    main.c and builds it; returns the Project (its ``probe_context`` attribute set)."""
    from .common import stopwatch

    opts = dict(options or {})
    opts["graph_format"] = graph_format
    project = generate(archive, project_dir, board=board, model=model, options=opts)
    tick_hz = int(project.board.timer.clock_hz)
    context = probe_context(
        project,
        target_ticks=target_ticks if target_ticks is not None else max(1000, tick_hz // 100),
        direct=direct and graph_format == "tables",
    )
    (Path(project.dir) / "src" / "main.c").write_text(render_probe(context))
    elapsed = stopwatch()
    project.build()
    project.probe_context = context
    project.probe_build_seconds = elapsed()
    return project


def run_probe(project: Any, *, timeout: float = 600.0, icount: bool = True) -> ProbeResult:
    """Runs a built probe (natively, or on its QEMU machine with -icount shift=0) and parses
    its report; RuntimeError when it fails."""
    board = project.board
    firmware = Path(project.firmware).resolve()
    with tempfile.TemporaryDirectory(prefix="mlf-probe-") as scratch:
        console = Path(scratch) / "console.txt"
        if board.is_host:
            with console.open("wb") as out:
                done = subprocess.run(
                    [str(firmware)],
                    stdout=out,
                    stderr=subprocess.PIPE,
                    stdin=subprocess.DEVNULL,
                    timeout=timeout,
                    check=False,
                )
        else:
            argv = board.qemu_command(firmware, icount=icount, serial=f"file:{console}")
            done = subprocess.run(
                argv,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                timeout=timeout,
                check=False,
            )
        text = console.read_text("utf-8", "replace") if console.exists() else ""
    values: Dict[str, int] = {}
    for line in text.splitlines():
        found = _LINE.match(line.strip())
        if found is not None:
            values[found.group(1)] = int(found.group(2))
    context = project.probe_context
    if done.returncode != 0 or values.get("done") != 1:
        raise RuntimeError(
            f"probe of {context['name']} on {board.name} failed (status {done.returncode}): "
            f"{text.strip()[-400:]} {done.stderr.decode('utf-8', 'replace')[-400:]}"
        )
    factor = board.instructions_per_tick() if (board.is_qemu and icount) else None
    return ProbeResult(
        model=context["name"],
        board=board.name,
        graph_format=context["graph_format"],
        values=values,
        project=project,
        instructions_per_tick=factor,
        build_seconds=getattr(project, "probe_build_seconds", 0.0),
    )


_PROBES_LOCK = threading.Lock()
_PROBE_LOCKS: Dict[Tuple[str, Optional[str], str, str], threading.Lock] = {}


def cached_probe(
    ctx: Context,
    archive: Path,
    *,
    board: str,
    model: Optional[str] = None,
    graph_format: str = "tables",
    options: Optional[Mapping[str, Any]] = None,
) -> ProbeResult:
    """Builds and runs the probe once per (archive, model, board, format) in a benchmark run;
    benchmarks that need the same probe share it (built once when they run side by side)."""
    key = (str(archive), model, board, graph_format)
    with _PROBES_LOCK:
        lock = _PROBE_LOCKS.setdefault(key, threading.Lock())
    with lock:
        found = ctx.probes.get(key)
        if found is not None:
            return found
        label = f"{archive.stem}_{model or 'm'}_{board}_{graph_format}"
        project = build_probe(
            archive,
            ctx.work / "probes" / re.sub(r"[^A-Za-z0-9_.-]", "_", label),
            board=board,
            model=model,
            graph_format=graph_format,
            options=options,
        )
        result = run_probe(project)
        ctx.probes[key] = result
        return result
