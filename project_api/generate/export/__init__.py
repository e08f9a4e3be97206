"""``mlf-project export``: the model as a C library for the user's own firmware.

One folder per export, which is every package at once (``--format`` limits the build files
written; ``src/`` is always complete)::

    src/<name>.h, src/<name>.c   the model's C API (sizes, tensor tables, init/input/output/run)
    src/<name>/                  TVM's generated C under the model's prefix, params as const C
    src/mlf_runtime/, src/*.h    the runtime (shared by every exported model of a firmware)
    CMakeLists.txt, cmake/       add_subdirectory / build + install + find_package / ESP-IDF
    <name>.mk                    Makefile projects
    library.properties, examples/   Arduino (1.5)
    library.json                 PlatformIO
    zephyr/                      Zephyr module
    idf_component.yml            ESP-IDF component
    export.json                  what was exported, with every size

Without ``--cpu``/``--board`` the folder is portable C99: nothing in it depends on the target
but what the compiler decides when it builds it (``<MODEL>_ARENA_BYTES`` by pointer width,
whether the runtime checks its tables again by whether it runs under an OS). A CPU-specific
export differs only by what is CPU-specific: CMSIS-NN (built for that CPU, and checked at
compile time), the flash estimate and the compiler its C is checked with. No file carries
CPU flags: the firmware's own choose the CPU. ``export.json``'s ``kind`` says which it is.

Planning is the generator's (:func:`..plan.plan_models_normalized` with project type
``library``, which names the models' symbols under their C prefix): the same tables, params
layout, arena and workspace as a generated firmware. The archive's dependencies are judged by
the same trust rule before anything is written; the folder is written in a staging folder
swapped in at the end (:mod:`..staging`, as a generated project is).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from ...errors import GenerateError
from ...options import normalize_options
from ...read import open_archive
from ..dependencies import declare_dependencies
from ..model_source import archive_source
from ..plan import (
    PathLike,
    Progress,
    choose_models,
    generator_version,
    plan_models_normalized,
    pointer_bytes,
)
from ..render import template_environment
from ..staging import Destination, check_destination, staged
from .api import tensor_summary, write_api
from .check import check_archive_c
from .cmsis import write_dependencies
from .manifests import package_context, write_manifests
from .sources import write_model_code, write_params, write_runtime
from .target import (
    FORMATS,
    check_c_name,
    export_board,
    export_names,
    export_target,
    parse_formats,
)

EXPORT_FILE = "export.json"
EXPORT_TYPE = "library"

__all__ = ["EXPORT_FILE", "FORMATS", "export_library", "is_export"]


def is_export(path: Path) -> bool:
    return (Path(path) / EXPORT_FILE).is_file()


EXPORT_DESTINATION = Destination(
    recognise=is_export,
    kind="an export",
    not_ours="is not empty and holds no earlier export",
    not_ours_hint="choose a new or empty directory (--force replaces only an earlier export)",
    force_hint="pass --force to replace it",
    verb="exporting",
)


def export_library(
    archive: PathLike,
    directory: PathLike,
    *,
    board: Optional[str] = None,
    cpu: Optional[str] = None,
    model: Optional[str] = None,
    name: Optional[str] = None,
    formats: Optional[str] = None,
    options: Optional[Mapping[str, Any]] = None,
    progress: Optional[Progress] = None,
    force: bool = False,
) -> Dict[str, Any]:
    """Exports the model(s) into ``directory``: portable C99 without ``board`` and ``cpu``
    (or with the host), else for that CPU; returns what it wrote to ``export.json``."""
    say = progress or (lambda _message: None)
    chosen = parse_formats(formats)
    the_board = export_board(board, cpu)
    if name is not None:
        check_c_name(name, "--name")  # before the archive is read
    opts = normalize_options({k: v for k, v in (options or {}).items() if k != "project_type"})
    if opts["graph_format"] != "tables":
        raise GenerateError(
            f"option graph_format={opts['graph_format']}: an export binds const tables",
            hint="leave the option out",
        )
    destination = Path(directory)
    check_destination(destination, force, EXPORT_DESTINATION)
    # A portable export's model is compiled for no CPU class in particular.
    archive_path = archive_source(archive, say, opts, the_board if board or cpu else None)
    say(f"reading {archive_path}")
    with open_archive(archive_path) as opened:
        names = export_names([m.name for m in choose_models(opened, model)], name)
        plans = plan_models_normalized(opened, model, the_board, EXPORT_TYPE, opts, names)
        declared = declare_dependencies(opened, archive_path, plans, opts, say)
        with staged(destination, EXPORT_DESTINATION) as staging:
            info = _write_export(
                staging, opened, archive_path, plans, the_board, chosen, opts, say, declared,
                force,
            )  # fmt: skip
    say(f"exported {destination}")
    return info


def _package_name(names: List[str], archive_path: Path) -> str:
    if len(names) == 1:
        return names[0]
    stem = re.sub(r"[^A-Za-z0-9_]", "_", archive_path.name.split(".")[0]) or "models"
    return stem if stem[0].isalpha() else f"models_{stem}"


def _write_export(
    root: Path,
    archive: Any,
    archive_path: Path,
    plans: List[Any],
    board: Any,
    formats: List[str],
    opts: Mapping[str, Any],
    say: Progress,
    declared: Any,
    force: bool,
) -> Dict[str, Any]:
    say("writing the runtime and the model's C")
    src = root / "src"
    src.mkdir()
    runtime = write_runtime(src)
    carried = write_dependencies(
        root, archive, declared, plans, board, opts, say, archive_path.name
    )
    runtime += carried.sources
    cmsis_nn = carried.cmsis_nn
    portable = board.is_host
    cpu = None if portable else (board.cpu.core if board.cpu else board.arch)
    target = export_target(cpu, cmsis_nn)
    bits = 8 * pointer_bytes(board)
    # What came from the archive or its dependencies (the C API includes the model's headers).
    archive_c = list(carried.sources)
    models: List[Dict[str, Any]] = []
    described: List[Dict[str, Any]] = []
    names = [plan.c_name for plan in plans]
    for plan, c_name in zip(plans, names):
        code = write_model_code(src, plan, c_name, carried.renames)
        sources = code + write_params(src, plan, c_name)
        api = write_api(src, plan, c_name, target, cmsis_nn)
        archive_c += [f"src/{c_name}.c", *code]
        layouts = api["arena_layouts"]
        models.append(
            {
                "name": c_name,
                "NAME": c_name.upper(),
                "KCONFIG": f"MLF_MODEL_{c_name.upper()}",
                "model_name": plan.model.name,
                "lib": f"mlf_{c_name}",
                "target": f"mlf::{c_name}",
                "api": f"src/{c_name}.c",
                "header": f"src/{c_name}.h",
                "header_name": f"{c_name}.h",
                "sources": sources,
                "arena_bytes": layouts[32]["arena_bytes"],
            }
        )
        described.append(
            {
                "name": c_name,
                "model": plan.model.name,
                "executor": plan.kind.name,
                "header": f"src/{c_name}.h",
                # as planned for the CPU checked with (the host's: 64-bit), and for each width
                "arena": layouts[bits],
                "arena_pointer_bits": bits,
                "arena_by_pointer_bits": {str(b): layout for b, layout in layouts.items()},
                "arena_align": api["arena_align"],
                "params_bytes": len(plan.params_blob),
                "graph_tables_bytes": plan.tables_flash_bytes,
                "static_pools_bytes": api["static_ram_bytes"],
                "runs_must_not_overlap": bool(api["global_state"]),
                "tensors": tensor_summary(api),
            }
        )
    checked_for = "the host" if portable else (board.cpu.label if board.cpu else board.arch)
    checked = check_archive_c(root, archive_c, board, checked_for, force=force, say=say)
    context = package_context(_package_name(names, archive_path), target, runtime, models)
    say("writing the packages: " + ", ".join(formats))
    files = write_manifests(root, template_environment("export"), formats, context)
    info: Dict[str, Any] = {
        "generator": "mlf-project-api",
        "generator_version": generator_version(),
        "archive": archive_path.name,
        "mlf_version": archive.version,
        "package": context["package"],
        # portable: C99 for any CPU; cpu: CMSIS-NN and the flash estimate for ``cpu``
        "kind": "portable" if portable else "cpu",
        "cpu": cpu,
        "board": None if portable else board.name,
        "cmsis_nn": cmsis_nn,
        "target": target,
        "formats": formats,
        "files": files,
        "runtime_sources": runtime,
        "dependencies": carried.described,
        "archive_c": checked,
        "models": described,
    }
    (root / EXPORT_FILE).write_text(json.dumps(info, indent=2) + "\n")
    return info
