"""Part 19: the exported library (``mlf-project export``) in a user firmware against the
generated firmware (issue 35).

For ``kws_int8`` of the corpus on qemu-mps2-an385 (``--smoke``: the factory's ``mlp``), in
one run:

- the model exported for the board's CPU and built into a firmware that is not ours, as
  the export tests build it (tests/export_user.py: the test's own start-up and linker
  script, ``add_subdirectory`` of the export, the user's flags ``-O2 -ffunction-sections
  -fdata-sections``, ``--gc-sections``) around bench's main (``firmware/export_main.c.j2``):
  the export's static arena, a context of its own, ``<model>_run()`` timed with SysTick
  under ``-icount shift=0``, then the same operators called directly over the same arena
  (the bare program's calls, :func:`bench.bare.direct_calls`), both outputs checked
  against the reference;
- the ``host_driven`` firmware ``mlf-project run`` builds of the same archive (default
  options: our C at -Os with link-time optimisation, the model's at -O2).

Flash: what the library's objects (``libmlf_export_runtime.a``, ``libmlf_<model>.a``) occupy
in the user firmware's linker map, against the generated firmware's runtime + model +
params + graph tables (``footprint``'s split; its link-time optimisation's saving, which it
cannot attribute to a source, shown beside). RAM: the library's objects' .data/.bss + the
context + the arena, against ``<MODEL>_ARENA_BYTES``. ``run`` overhead: instructions of one
``<model>_run()`` minus those of the direct calls, as a percentage of the direct calls.
Targets: flash within +1 KB, RAM = arena + at most 512 B, overhead at most 0.02 %.

The same archive exported portable (no ``--cpu``/``--board``, issue 44) and built into the
same user firmware on the same board: its flash and RAM against the CPU-specific export's
(targets: within +64 B each) and the instructions of one ``<model>_run()`` (within +0.01 %).

Beside them (not in smoke runs, and only with a CMSIS-NN checkout): ``kws_int8_cmsisnn``
exported for qemu-mps2-an386, whose DSP kernels TVM gave no scratch memory, so that the
export links the CMSIS-NN adapter, whose scratch lies in the operators' workspace windows
inside the arena: RAM beyond the arena macro (held to the same 512 B) and the ``run``
overhead.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from .bare import direct_calls, render_firmware, sample_data
from .common import (
    QEMU_BOARD,
    REPO_ROOT,
    Context,
    Part,
    PartResult,
    Skip,
    Target,
    corpus_dir,
    corpus_options,
    factory_archive,
    generate,
    have,
    require_qemu,
)

CASE, SMOKE_CASE = "kws_int8", "mlp"
CMSIS_CASE, CMSIS_BOARD = "kws_int8_cmsisnn", "qemu-mps2-an386"
FLASH_MARGIN, RAM_MARGIN, RUN_TARGET_PERCENT = 1024, 512, 0.02
# The portable export against the CPU-specific one (issue 44).
PORTABLE_BYTES, PORTABLE_PERCENT = 64, 0.01
REPS, SMOKE_REPS = 3, 2
# The generated firmware's categories (project_api.footprint) that the library replaces.
LIBRARY_CATEGORIES = ("runtime", "model", "params", "graph")
FLASH_BUCKETS = (".text", ".rodata", ".data")
_RENAME = re.compile(r"^#define (\S+) (\S+)$", re.MULTILINE)
_FIGURE = re.compile(r"^([a-z_]+) (\d+)$")


def _export_user() -> Any:
    """The export tests' user firmware (tests/export_user.py: start-up, linker script,
    CMake build), which this part builds around a main of its own."""
    tests = str(REPO_ROOT / "tests")
    if tests not in sys.path:
        sys.path.append(tests)
    import export_user

    return export_user


def _case(ctx: Context) -> Tuple[Path, str, Dict[str, np.ndarray], List[np.ndarray]]:
    """(archive, export name, inputs, reference outputs) of the model to measure."""
    if ctx.smoke:
        from project_api.modelgen import catalog

        archive = factory_archive(SMOKE_CASE, ctx.work / "archives")
        model = catalog()[SMOKE_CASE]()
        inputs = dict(model.sample_inputs())
        expected = model.reference(inputs)
        return archive, SMOKE_CASE, inputs, [expected[f"output{i}"] for i in range(len(expected))]
    archive = corpus_dir() / f"{CASE}.tar"
    if not archive.is_file() or not archive.with_suffix(".outputs.npz").is_file():
        raise Skip(f"{archive.name} and its reference outputs are not in the corpus")
    return (archive, "kws", *_reference(archive))


def _reference(archive: Path) -> Tuple[Dict[str, np.ndarray], List[np.ndarray]]:
    """A corpus archive's reference inputs (by name) and outputs (in order)."""
    with np.load(archive.with_suffix(".inputs.npz")) as found:
        inputs = {k: found[k] for k in found.files}
    with np.load(archive.with_suffix(".outputs.npz")) as found:
        outputs = [found[f"output{n}"] for n in range(len(found.files))]
    return inputs, outputs


def user_firmware(
    ctx: Context,
    archive: Path,
    name: str,
    inputs: Mapping[str, np.ndarray],
    outputs: List[np.ndarray],
    reps: int,
    *,
    board_name: str = QEMU_BOARD,
    options: Optional[Mapping[str, Any]] = None,
    portable: bool = False,
) -> Dict[str, Any]:
    """Exports ``archive`` as ``name`` for ``board_name`` (a Cortex-M QEMU board with a
    25 MHz SysTick; with ``portable``, for no CPU) and builds the user firmware for that board
    around bench's timing main; returns the export's description of the model, the firmware
    and its linker map."""
    from project_api.board import load_board
    from project_api.generate.export import export_library
    from project_api.generate.plan import plan_models
    from project_api.read import open_archive

    user = _export_user()
    board = load_board(board_name)
    work = ctx.scratch(f"export_{name}_{board_name}{'_portable' if portable else ''}")
    exported = work / "export"
    info = export_library(
        archive, exported, board=None if portable else board_name, name=name, options=options
    )
    (described,) = info["models"]
    # the arena the board's firmware reserves (the header chooses by its pointer width)
    described = {**described, "arena": described["arena_by_pointer_bits"]["32"]}
    renames_h = exported / "src" / name / f"{name}_renames.h"
    renames = dict(_RENAME.findall(renames_h.read_text()))
    with open_archive(archive) as opened:
        (plan,) = plan_models(opened, str(described["model"]), board, "host_driven", options)
        calls = direct_calls(plan, name, renames)
    arena = described["arena"]
    if calls["arena_bytes"] > max(64, arena["activation_bytes"]):
        raise RuntimeError(
            f"the direct calls lay out {calls['arena_bytes']} B of tensors, the export "
            f"{arena['activation_bytes']} B"
        )
    context = {
        **calls,
        **sample_data(calls, inputs, outputs),
        "name": name,
        "NAME": name.upper(),
        "reps": reps,
        "workspace_offset": arena["activation_bytes"],
        "workspace_bytes": arena["workspace_bytes"],
    }
    firmware = user.build_cmake(
        work / "user",
        [user.Exported(exported, name, dict(inputs), list(outputs))],
        board,
        mode="subdirectory",
        main_text=render_firmware("export_main.c.j2", context),
        link_options=["-Wl,-Map=${CMAKE_CURRENT_BINARY_DIR}/app.map"],
    )
    return {
        "model": described,
        "firmware": firmware,
        "map": firmware.parent / "app.map",
        "board": board,
        "user": user,
    }


def library_sizes(map_text: str, name: str) -> Dict[str, int]:
    """The user firmware's bytes that are the library's, from its linker map: flash (code,
    constants, initialised data) of the runtime, of the model's own objects (C API, the
    model's C, params), and RAM: the library's .data/.bss, the context and the arena."""
    from project_api.footprint import walk_linker_map

    pieces, _ = walk_linker_map(map_text)
    sizes = dict.fromkeys(
        ("runtime_flash", "model_flash", "library_ram", "context_ram", "arena_ram"), 0
    )
    for piece in pieces:
        obj = piece.obj.replace("\\", "/")
        if "libmlf_export_runtime.a(" in obj or f"libmlf_{name}.a(" in obj:
            if piece.bucket in FLASH_BUCKETS:
                owner = "runtime" if "libmlf_export_runtime.a(" in obj else "model"
                sizes[f"{owner}_flash"] += piece.size
            if piece.bucket in (".data", ".bss"):
                sizes["library_ram"] += piece.size
        elif piece.section == f".bss.{name}_arena":
            sizes["arena_ram"] += piece.size
        elif piece.section == f".bss.{name}_context":
            sizes["context_ram"] += piece.size
    return sizes


def generated_sizes(ctx: Context, archive: Path) -> Dict[str, Any]:
    """The ``host_driven`` firmware of ``archive`` as ``mlf-project run`` builds it: its
    runtime + model + params + graph tables in flash (split as ``footprint`` splits a
    link-time optimised firmware), and what link-time optimisation saved on all of our C."""
    from project_api.footprint import project_footprint

    project = generate(archive, ctx.scratch(f"export_generated_{archive.stem}"), board=QEMU_BOARD)
    project.build()
    linked = project_footprint(project, estimate=False).linked
    assert linked is not None
    flash = {c: linked.category_bytes(c, FLASH_BUCKETS) for c in LIBRARY_CATEGORIES}
    return {
        "flash": flash,
        "flash_bytes": sum(flash.values()),
        "lto_flash_bytes": linked.category_bytes("lto", FLASH_BUCKETS),
        "firmware_flash_bytes": linked.flash_bytes,
        "arena_bytes": sum(int(m["sizes"]["arena_bytes"]) for m in project.models),
    }


def instructions(built: Mapping[str, Any], outputs: List[np.ndarray]) -> Dict[str, Any]:
    """Runs the user firmware under -icount; its outputs through the API and through the
    direct calls must equal the reference (floats to within 1e-5), and each other bit for
    bit. Returns the instructions of one run each way."""
    from project_api.modelgen import compare_outputs

    board = built["board"]
    text = built["user"].run_firmware(built["firmware"], board, timeout=600, icount=True)
    printed: Dict[Tuple[str, int], bytes] = {}
    figures: Dict[str, int] = {}
    for line in text.splitlines():
        parts = line.strip().split(" ")
        if len(parts) == 3 and parts[0] in ("api", "direct") and parts[1].isdigit():
            printed[(parts[0], int(parts[1]))] = bytes.fromhex(parts[2])
        found = _FIGURE.match(line.strip())
        if found is not None:
            figures[found.group(1)] = int(found.group(2))
    for way in ("api", "direct"):
        got = {
            f"output{i}": np.frombuffer(printed[(way, i)], dtype=expected.dtype).reshape(
                expected.shape
            )
            for i, expected in enumerate(outputs)
        }
        problems = compare_outputs(got, {f"output{i}": o for i, o in enumerate(outputs)}, rtol=1e-5)
        if problems:
            raise RuntimeError(f"the user firmware's {way} outputs differ: {problems}")
    same = all(printed[("api", i)] == printed[("direct", i)] for i in range(len(outputs)))
    if not same:
        raise RuntimeError("the API and the direct calls computed different bytes")
    per_tick = board.instructions_per_tick()
    reps = figures["reps"]
    run = figures["run_ticks"] * per_tick / reps
    direct = figures["direct_ticks"] * per_tick / reps
    return {
        "run_instructions": round(run, 1),
        "direct_instructions": round(direct, 1),
        "overhead_instructions": round(run - direct, 1),
        "overhead_percent": round(100.0 * (run - direct) / direct, 5),
        "timer_read_instructions": round(figures["empty_ticks"] * per_tick / reps, 1),
        "quantum_instructions": round(per_tick / reps, 2),
        "reps": reps,
    }


def cmsis_nn_figures(ctx: Context, result: PartResult) -> None:
    """Beside the targets: the CMSIS-NN KWS exported for an386, whose DSP kernels TVM gave no
    scratch memory, so their calls go through the CMSIS-NN adapter (crt/cmsis_nn/), which takes
    it from the operators' workspace windows in the arena. Its RAM beyond the arena macro (the
    RAM target holds it too) and its ``run`` overhead, as rows and ``cmsis_*`` summary figures
    (or a note in ``skipped``)."""
    archive = corpus_dir() / f"{CMSIS_CASE}.tar"
    options = corpus_options(archive)
    if not archive.with_suffix(".outputs.npz").is_file() or not options:
        result.skipped.append(f"{CMSIS_CASE}: needs the archive and a CMSIS-NN checkout")
        return
    inputs, outputs = _reference(archive)
    name = "kws_cmsis"
    built = user_firmware(
        ctx, archive, name, inputs, outputs, 1, board_name=CMSIS_BOARD, options=options
    )
    library = library_sizes(Path(built["map"]).read_text(errors="replace"), name)
    counts = instructions(built, outputs)
    ram = library["library_ram"] + library["context_ram"] + library["arena_ram"]
    beyond = ram - int(built["model"]["arena"]["arena_bytes"])
    label = f"{CMSIS_CASE} on {CMSIS_BOARD}"
    result.rows += [
        {"figure": f"RAM: {label}, library - arena macro", "bytes": beyond,
         "arena": library["arena_ram"], "context": library["context_ram"],
         "globals": library["library_ram"]},
        {"figure": f"instructions: {label}, overhead", "instructions":
         counts["overhead_instructions"], "percent": counts["overhead_percent"]},
    ]  # fmt: skip
    result.summary.update(
        {
            "cmsis_model": label,
            "cmsis_ram_beyond_arena_bytes": beyond,
            "cmsis_globals_bytes": library["library_ram"],
            "cmsis_overhead_percent": counts["overhead_percent"],
            "ram_target_met": bool(result.summary.get("ram_target_met"))
            and 0 <= beyond <= RAM_MARGIN,
        }
    )
    ctx.log(f"  {label}: RAM {beyond:+,} B beyond the arena macro")


def portable_figures(
    ctx: Context,
    result: PartResult,
    case: Tuple[Path, str, Dict[str, np.ndarray], List[np.ndarray]],
    specific: Mapping[str, Any],
) -> None:
    """The portable export of the same archive in the same user firmware on the same board,
    against the CPU-specific one (``specific``: its library sizes and instruction counts):
    rows and ``portable_*`` summary figures."""
    archive, name, inputs, outputs = case
    reps = SMOKE_REPS if ctx.smoke else REPS
    built = user_firmware(ctx, archive, name, inputs, outputs, reps, portable=True)
    library = library_sizes(Path(built["map"]).read_text(errors="replace"), name)
    counts = instructions(built, outputs)
    flash = library["runtime_flash"] + library["model_flash"]
    ram = library["library_ram"] + library["context_ram"] + library["arena_ram"]
    flash_delta = flash - specific["flash"]
    ram_delta = ram - specific["ram"]
    run_delta = counts["run_instructions"] - specific["run_instructions"]
    percent = round(100.0 * run_delta / specific["run_instructions"], 5)
    result.rows += [
        {"figure": "portable export: flash, - CPU-specific export's", "bytes": flash_delta,
         "runtime": library["runtime_flash"], "model": library["model_flash"]},
        {"figure": "portable export: RAM, - CPU-specific export's", "bytes": ram_delta,
         "arena": library["arena_ram"], "context": library["context_ram"],
         "globals": library["library_ram"]},
        {"figure": f"portable export: instructions of {name}_run(), - CPU-specific's",
         "instructions": round(run_delta, 1), "percent": percent},
    ]  # fmt: skip
    result.summary.update(
        {
            "portable_flash_bytes": flash,
            "portable_flash_delta_bytes": flash_delta,
            "portable_ram_bytes": ram,
            "portable_ram_delta_bytes": ram_delta,
            "portable_run_instructions": counts["run_instructions"],
            "portable_run_delta_percent": percent,
            "portable_target_met": flash_delta <= PORTABLE_BYTES
            and ram_delta <= PORTABLE_BYTES
            and percent <= PORTABLE_PERCENT,
        }
    )
    ctx.log(
        f"  portable export: flash {flash_delta:+,} B, RAM {ram_delta:+,} B, run "
        f"{run_delta:+,.0f} instructions ({percent:+.5f} %) against the CPU-specific export"
    )


def run(ctx: Context, result: PartResult) -> None:
    require_qemu()
    if not have("cmake", "ninja"):
        raise Skip("needs cmake and ninja on PATH (the user firmware is a CMake project)")
    archive, name, inputs, outputs = _case(ctx)
    built = user_firmware(ctx, archive, name, inputs, outputs, SMOKE_REPS if ctx.smoke else REPS)
    ctx.log(f"  user firmware with the exported {name} built: {built['firmware']}")
    library = library_sizes(Path(built["map"]).read_text(errors="replace"), name)
    generated = generated_sizes(ctx, archive)
    counts = instructions(built, outputs)
    arena_macro = int(built["model"]["arena"]["arena_bytes"])
    library_flash = library["runtime_flash"] + library["model_flash"]
    library_ram = library["library_ram"] + library["context_ram"] + library["arena_ram"]
    flash_delta = library_flash - generated["flash_bytes"]
    ram_beyond = library_ram - arena_macro
    result.rows = [
        {"figure": "flash: exported library (user firmware)", "bytes": library_flash,
         "runtime": library["runtime_flash"], "model": library["model_flash"]},
        {"figure": "flash: generated runtime + model + params + graph", "bytes":
         generated["flash_bytes"], "runtime": generated["flash"]["runtime"],
         "model": sum(generated["flash"][c] for c in ("model", "params", "graph"))},
        {"figure": "flash: library - generated", "bytes": flash_delta},
        {"figure": "flash: generated firmware's link-time optimisation (all our C)",
         "bytes": generated["lto_flash_bytes"]},
        {"figure": "RAM: library (arena + context + globals)", "bytes": library_ram,
         "arena": library["arena_ram"], "context": library["context_ram"],
         "globals": library["library_ram"]},
        {"figure": f"RAM: {name.upper()}_ARENA_BYTES", "bytes": arena_macro},
        {"figure": "RAM: library - arena macro", "bytes": ram_beyond},
        {"figure": f"instructions: {name}_run()", "instructions": counts["run_instructions"]},
        {"figure": "instructions: direct operator calls", "instructions":
         counts["direct_instructions"]},
        {"figure": "instructions: overhead", "instructions": counts["overhead_instructions"],
         "percent": counts["overhead_percent"]},
    ]  # fmt: skip
    result.summary = {
        "model": archive.stem,
        "board": f"{QEMU_BOARD} (-icount shift=0)",
        "library_flash_bytes": library_flash,
        "generated_flash_bytes": generated["flash_bytes"],
        "flash_delta_bytes": flash_delta,
        "generated_lto_flash_bytes": generated["lto_flash_bytes"],
        "library_ram_bytes": library_ram,
        "arena_macro_bytes": arena_macro,
        "generated_arena_bytes": generated["arena_bytes"],
        "ram_beyond_arena_bytes": ram_beyond,
        **counts,
        "outputs_match": True,
        "flash_target_met": flash_delta <= FLASH_MARGIN,
        "ram_target_met": 0 <= ram_beyond <= RAM_MARGIN,
        "run_target_met": counts["overhead_percent"] <= RUN_TARGET_PERCENT,
    }
    specific = {"flash": library_flash, "ram": library_ram, **counts}
    portable_figures(ctx, result, (archive, name, inputs, outputs), specific)
    if not ctx.smoke:
        cmsis_nn_figures(ctx, result)
    ctx.log(
        f"  {name}: library {library_flash:,} B flash vs generated {generated['flash_bytes']:,} "
        f"B; RAM {library_ram:,} B (arena macro {arena_macro:,}); run "
        f"{counts['overhead_instructions']:,.0f} instructions over the direct calls "
        f"({counts['overhead_percent']:.4f} %)"
    )


PART = Part(
    "export",
    "19. the exported library in a user firmware vs the generated firmware (and portable)",
    run,
    columns=[
        "figure",
        "bytes",
        "runtime",
        "model",
        "arena",
        "context",
        "globals",
        "instructions",
        "percent",
    ],  # fmt: skip
    targets=[
        Target(
            "exported library's flash within +1 KB of the generated firmware's model + runtime",
            lambda e: (
                f"{e['model']}: {e['library_flash_bytes']:,} B vs {e['generated_flash_bytes']:,} B "
                f"({e['flash_delta_bytes']:+,} B; the generated firmware's LTO "
                f"{e['generated_lto_flash_bytes']:+,} B on all our C)"
            ),
            "flash_target_met",
        ),
        Target(
            "exported library's RAM = <MODEL>_ARENA_BYTES + <= 512 B",
            lambda e: (
                f"{e['library_ram_bytes']:,} B = arena {e['arena_macro_bytes']:,} B "
                f"{e['ram_beyond_arena_bytes']:+,} B ({e['model']})"
                + (
                    f"; {e['cmsis_model']}: {e['cmsis_ram_beyond_arena_bytes']:+,} B (its "
                    "CMSIS-NN adapter's scratch in the arena)"
                    if "cmsis_model" in e
                    else ""
                )
            ),
            "ram_target_met",
        ),
        Target(
            "<model>_run() over direct operator calls <= 0.02 % of KWS instructions (an385)",
            lambda e: (
                f"{e['overhead_percent']:.4f} % ({e['overhead_instructions']:,.0f} of "
                f"{e['direct_instructions']:,.0f} instructions, {e['model']})"
            ),
            "run_target_met",
        ),
        Target(
            "portable export vs the CPU-specific one (an385): flash and RAM <= +64 B, "
            "instructions <= +0.01 %",
            lambda e: (
                f"flash {e['portable_flash_delta_bytes']:+,} B, RAM "
                f"{e['portable_ram_delta_bytes']:+,} B, run "
                f"{e['portable_run_delta_percent']:+.5f} % ({e['model']})"
            ),
            "portable_target_met",
        ),
    ],
)
