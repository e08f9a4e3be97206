"""Part 12: the firmware against a bare program of the same model, built in the same run.

For ``kws_int8`` of the corpus on qemu-mps2-an385 (``--smoke``: ``mlp_default``; part 14,
``machines.py``, measures the same on the other machines through :func:`measure`):

- the ``host_driven`` firmware ``mlf-project run`` builds (default options: const tables,
  our C at -Os, the model's at -O2, the board's 4 KiB stack), linked;
- a bare program (``firmware/bare_main.c.j2``) in a second generated project, same flags
  and board seam: every operator called directly from const tables, params read in place,
  one static arena laid out by the same liveness plan as the firmware's (each tensor at its
  offset, each operator's workspace window set before its call, as a hand-written program
  with that plan would) — no executor, protocol or error texts. It runs the corpus sample
  under QEMU and must exit 0 (outputs equal to the reference), so it is a program that
  works, not a size estimate.

Flash and RAM come from each linker map (``footprint``'s split). The bare program's embedded
sample (input and expected output) is subtracted from its flash. Targets of issue 14: the
firmware within 3 KB of flash and 2 KB of RAM of the bare program (the issue's absolute
figures, 68 KB and 111 KB, are printed too).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Dict, List, Mapping, Sequence, Tuple

import numpy as np

from .common import (
    FIRMWARE_DIR,
    QEMU_BOARD,
    Context,
    Part,
    PartResult,
    Skip,
    Target,
    c_bytes,
    corpus_dir,
    generate,
    require_qemu,
)

CASE, SMOKE_CASE = "kws_int8", "mlp_default"
FLASH_MARGIN, RAM_MARGIN = 3 * 1024, 2 * 1024
FLASH_TARGET, RAM_TARGET = 68 * 1024, 111 * 1024
ALIGN = 64


def _storage_data(
    tables: Any, params: Mapping[str, Any], c_name: str, memory: Any
) -> Tuple[List[str], int]:
    """The C address of every storage id (params where the generator laid them out, the rest
    in the arena: where the liveness plan put them, else by the runtime's rule) and the
    arena's size."""
    from project_api.generate.params_blob import laid_out_params

    bindings = tables.param_bindings(params) if params else {}
    _, in_flash, _ = laid_out_params(params, bindings) if bindings else (b"", {}, 0)
    in_arena = tables.arena_offsets(in_flash) if memory is None else memory.pool_offsets
    addresses = [
        f"mlf_params_{c_name} + {in_flash[sid]}" if sid in in_flash else f"arena + {in_arena[sid]}"
        for sid in range(len(tables.storage_bytes))
    ]
    arena = tables.arena_bytes(in_flash) if memory is None else memory.arena_bytes
    return addresses, max(ALIGN, arena)


def direct_calls(plan: Any, c_name: str, renamed: Mapping[str, str]) -> Dict[str, Any]:
    """What a program calling a model's operators directly needs
    (``firmware/direct_calls.c.j2``), from the generator's plan of it (``plan``, a
    :class:`~project_api.generate.plan.ModelPlan`): const views over the params where they
    lie in flash (``mlf_params_<c_name>``) and over a static ``arena`` laid out as the
    firmware lays it out, the operators in order with their functions (named as ``renamed``
    says) and workspace windows, and the views that hold the inputs (by name) and the
    outputs."""
    from project_api.generate.tables import MLF_FUNC_COPY

    tables, memory = plan.tables, plan.memory
    params = dict(plan.model.params or {})
    addresses, arena_bytes = _storage_data(tables, params, c_name, memory)
    windows = memory.windows if memory is not None else [(0, 0)] * len(tables.ops)
    # The shapes shared where they repeat, as the firmware's tables have them.
    shapes, shape_offsets = tables.shape_layout()
    views = [
        {
            "data": addresses[view.storage],
            "ndim": len(view.shape),
            "shape": offset,
            "code": view.dtype.code,
            "bits": view.dtype.bits,
            "lanes": view.dtype.lanes,
        }
        for view, offset in zip(tables.views, shape_offsets)
    ]
    ops = [
        {
            "func": None if op.func == MLF_FUNC_COPY else op.func,
            "args": list(op.args),
            "copy_bytes": tables.views[op.args[0]].nbytes,
            "window": window,
        }
        for op, window in zip(tables.ops, windows)
    ]
    return {
        "c_name": c_name,
        "has_params": bool(params),
        "funcs": [renamed.get(f, f) for f in tables.funcs],
        "arena_bytes": arena_bytes,
        "windows": any(size for _, size in windows),
        "shapes": shapes,
        "views": views,
        "ops": ops,
        "max_args": tables.max_op_args,
        "input_views": {a.name: a.view for a in tables.args if a.name not in params},
        "output_views": list(tables.outputs),
    }


def sample_data(
    calls: Mapping[str, Any], inputs: Mapping[str, Any], outputs: Sequence[Any]
) -> Dict[str, Any]:
    """The sample a program embeds (``inputs`` by name, ``outputs`` in order) as the
    template's ``inputs``/``outputs``: each array's view, bytes and C initialiser lines."""
    items = {
        "inputs": [
            {"view": view, "bytes": np.ascontiguousarray(inputs[name]).tobytes()}
            for name, view in calls["input_views"].items()
        ],
        "outputs": [
            {"view": view, "bytes": np.ascontiguousarray(array).tobytes()}
            for view, array in zip(calls["output_views"], outputs)
        ],
    }
    for item in items["inputs"] + items["outputs"]:
        item["lines"] = c_bytes(item["bytes"]) or ["0,"]
    return items


def bare_context(project: Any, archive: Path) -> Dict[str, Any]:
    """The template context of the bare program for a generated single-model project."""
    from project_api.generate import MODEL_TAR
    from project_api.generate.plan import plan_models
    from project_api.read import open_archive

    (described,) = project.models
    with open_archive(Path(project.dir) / MODEL_TAR) as opened:
        (plan,) = plan_models(
            opened, str(described["name"]), project.board, project.project_type, project.options
        )
        calls = direct_calls(
            plan, str(described["c_name"]), dict(described.get("renamed_symbols") or {})
        )
    samples_in = np.load(archive.with_suffix(".inputs.npz"))
    samples_out = np.load(archive.with_suffix(".outputs.npz"))
    outputs = [samples_out[f"output{i}"] for i in range(len(calls["output_views"]))]
    samples = sample_data(calls, samples_in, outputs)
    return {
        **calls,
        **samples,
        "name": described["name"],
        "workspace_bytes": int(described["sizes"]["workspace_ram_bytes"]),
        "sample_bytes": sum(len(i["bytes"]) for i in samples["inputs"] + samples["outputs"]),
    }


def render_firmware(template: str, context: Mapping[str, Any]) -> str:
    """A program of ``firmware/`` (a Jinja template) rendered for ``context``."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(FIRMWARE_DIR)),
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    return env.get_template(template).render(context)


def _linked(project: Any) -> Dict[str, int]:
    from project_api.footprint import linked_sizes

    sizes = linked_sizes(Path(project.build_dir), Path(project.firmware))
    return {"flash_bytes": sizes.flash_bytes, "ram_bytes": sizes.ram_bytes}


def _run_bare(project: Any) -> int:
    argv = project.board.qemu_command(Path(project.firmware).resolve(), serial="null")
    done = subprocess.run(argv, capture_output=True, timeout=300, check=False)
    return done.returncode


def measure(ctx: Context, archive: Path, board: str) -> Dict[str, Any]:
    """Builds the ``host_driven`` firmware and the bare program of ``archive`` for ``board``,
    runs the bare program under QEMU (it must exit 0) and returns both programs' linked flash
    and RAM (the bare program's embedded sample subtracted) and the differences."""
    label = f"{archive.stem}_{board}"
    firmware = generate(archive, ctx.scratch(f"bare_firmware_{label}"), board=board)
    firmware.build()
    bare = generate(archive, ctx.scratch(f"bare_program_{label}"), board=board)
    context = bare_context(bare, archive)
    src = Path(bare.dir) / "src"
    (src / "main.c").write_text(render_firmware("bare_main.c.j2", context))
    (src / f"model_{context['c_name']}.c").write_text("/* bare program: no executor */\n")
    bare.build()
    status = _run_bare(bare)
    if status != 0:
        raise RuntimeError(
            f"the bare program of {archive.stem} failed under QEMU on {board} (status {status})"
        )
    ours, base = _linked(firmware), _linked(bare)
    base_flash = base["flash_bytes"] - context["sample_bytes"]
    return {
        "board": board,
        "firmware_flash_bytes": ours["flash_bytes"],
        "firmware_ram_bytes": ours["ram_bytes"],
        "bare_flash_bytes": base_flash,
        "bare_ram_bytes": base["ram_bytes"],
        "flash_delta_bytes": ours["flash_bytes"] - base_flash,
        "ram_delta_bytes": ours["ram_bytes"] - base["ram_bytes"],
    }


def run(ctx: Context, result: PartResult) -> None:
    require_qemu()
    stem = SMOKE_CASE if ctx.smoke else CASE
    archive = corpus_dir() / f"{stem}.tar"
    if not archive.is_file() or not archive.with_suffix(".outputs.npz").is_file():
        raise Skip(f"{archive.name} and its reference outputs are not in the corpus")
    m = measure(ctx, archive, QEMU_BOARD)
    flash_delta, ram_delta = m["flash_delta_bytes"], m["ram_delta_bytes"]
    result.rows = [
        {"program": "host_driven firmware", "flash_bytes": m["firmware_flash_bytes"],
         "ram_bytes": m["firmware_ram_bytes"]},
        {"program": "bare program (sample subtracted)", "flash_bytes": m["bare_flash_bytes"],
         "ram_bytes": m["bare_ram_bytes"]},
        {"program": "firmware - bare", "flash_bytes": flash_delta, "ram_bytes": ram_delta},
    ]  # fmt: skip
    result.summary = {
        "model": stem,
        "board": QEMU_BOARD,
        "bare_outputs_match": True,
        **{k: v for k, v in m.items() if k != "board"},
        "flash_within_limit": m["firmware_flash_bytes"] <= FLASH_TARGET,
        "flash_within_margin": flash_delta <= FLASH_MARGIN,
        "ram_within_limit": m["firmware_ram_bytes"] <= RAM_TARGET,
        "ram_within_margin": ram_delta <= RAM_MARGIN,
    }
    s = result.summary
    s["flash_target_met"] = s["flash_within_margin"] and s["flash_within_limit"]
    s["ram_target_met"] = s["ram_within_margin"] and s["ram_within_limit"]
    s["target_met"] = bool(s["flash_target_met"] and s["ram_target_met"])
    ctx.log(
        f"  {stem}: firmware {m['firmware_flash_bytes']:,} / {m['firmware_ram_bytes']:,} B, "
        f"bare {m['bare_flash_bytes']:,} / {m['bare_ram_bytes']:,} B (flash / RAM)"
    )


def _yes(flag: object) -> str:
    return "met" if flag else "not met"


PART = Part(
    "bare",
    "12. the KWS firmware against a bare direct-call program: flash and RAM",
    run,
    columns=["program", "flash_bytes", "ram_bytes"],
    targets=[
        Target(
            "KWS firmware within 3 KB flash / 2 KB RAM of a bare program (<= 68 KB / 111 KB)",
            lambda b: (
                f"{b['model']}: {b['firmware_flash_bytes']:,} / {b['firmware_ram_bytes']:,} B vs "
                f"bare {b['bare_flash_bytes']:,} / {b['bare_ram_bytes']:,} B: "
                f"+{b['flash_delta_bytes']:,} / +{b['ram_delta_bytes']:,} B (flash: limit "
                f"{_yes(b['flash_within_limit'])}, margin {_yes(b['flash_within_margin'])}; RAM: "
                f"limit {_yes(b['ram_within_limit'])}, margin {_yes(b['ram_within_margin'])})"
            ),
            "target_met",
        ),
    ],
)
