"""Where a firmware's RAM and flash go: planned before building, linked after.

    report = footprint("model.tar", board="qemu-mps2-an385")          # planned only
    report = footprint("proj/", build=True)                            # + linked sizes
    print(report.text()); json.dumps(report.to_json())

**Planned** figures come from the generator (``project.json``): arena, workspace, executor
state, graph tables parsed into RAM (graph_format=json), the console buffer of the project
type (host_driven: the protocol's receive buffer; mlperftiny: the input ``db`` loads) and the
stack; params, graph tables / graph.json and samples in flash. The code of the model and
of the runtime is estimated by compiling their C to objects with the board's compiler and
flags (no linking: functions the linker would drop are counted, so it is an upper bound).

**Linked** figures come from the built firmware: the sizes of its ``.text``, ``.rodata``,
``.data`` and ``.bss`` (and ``.stack``/``.heap`` on Cortex-M), each split by where the bytes
come from. Cortex-M builds are read from the linker map (``firmware.map``, written with
``-Wl,-Map``: exact after ``--gc-sections``); host builds from the section headers of every
object file in the build tree (the host link keeps whole objects).

Categories (``CATEGORIES``): ``runtime`` (crt/src objects), ``model`` (the model's generated
C, its object files and external dependencies), ``params``, ``graph`` (const graph tables or
graph.json, and the RAM graph.json is parsed into), ``samples``, ``firmware`` (main.c, the
model's glue in model_<mod>.c, the device-protocol, standalone or mlperftiny loop), ``board`` (the
board's C seam), ``libc`` (newlib / libgcc / libm), and RAM buffers: ``arena``,
``workspace``, ``state`` (executor state arrays and the mlf_executor / mlf_workspace
structs), ``rx_buffer``, ``stack``, ``heap``; ``other`` for anything unrecognised.

``runtime_ram_bytes`` — RAM beyond tensors (arena) and operator workspace — counts the
executor state, graph tables in RAM (graph_format=json), the receive buffer of the device
protocol and, once linked, the runtime's own globals (the last-error text, the bound
workspace pointer). The stack, libc's and the board's globals are not in it (they are in
``ram_total_bytes``).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from ..errors import BoardError, FitError, GenerateError
from .estimate import CodeEstimate, code_estimates, estimate_code
from .linked import (
    CATEGORIES,
    LOOP_SOURCES,
    SECTIONS,
    SHF_ALLOC,
    SHF_EXECINSTR,
    SHF_WRITE,
    SHT_NOBITS,
    ElfSection,
    LinkedSizes,
    MapPiece,
    PathLike,
    Progress,
    classify,
    elf_sections,
    linked_sizes,
    map_objects,
    parse_linker_map,
    section_bucket,
    walk_linker_map,
)
from .report import Footprint

# --- entry points ----------------------------------------------------------------------------


def _planned(info: Mapping[str, Any]) -> Tuple[Dict[str, int], Dict[str, Optional[int]]]:
    """Planned RAM and flash items from what the generator computed (project.json)."""
    from ..generate.executors.aot import POOLS_RAM_ITEM

    models = info.get("models", [])
    ram_items = dict(info.get("fit", {}).get("ram", {}).get("items", {}))
    own = [m for m in models if not m.get("shares_arena")]  # each its own arena
    planned_ram: Dict[str, int] = {
        # The models that share one arena take the largest one's (with a JSON graph's
        # workspace inside it); the liveness plan's arena holds the operators' windows.
        "arena": int(info.get("shared_arena_bytes") or 0)
        + sum(int(m["sizes"]["arena_bytes"]) for m in own),
        "workspace": sum(
            int(m["sizes"].get("workspace_ram_bytes", m["sizes"]["workspace_bytes"])) for m in own
        ),
        "executor state": sum(int(m["sizes"]["state_bytes"]) for m in models),
        "graph tables": sum(int(m["sizes"].get("graph_parse_bytes") or 0) for m in models),
        "rx buffer": int(ram_items.get(_link_buffer_item(info), 0)),
        "stack": int(info.get("stack_bytes") or 0),
        "model pools": fit_items_bytes(info, "ram", POOLS_RAM_ITEM),
        "cmsis-nn adapter": sum(  # its kept kernel sums (its scratch is in the windows)
            int(v) for k, v in ram_items.items() if str(k).startswith("cmsis-nn ")
        ),
    }
    planned_flash: Dict[str, Optional[int]] = {
        "params": sum(int(m["sizes"]["params_blob_bytes"]) for m in models),
        "graph": sum(
            int(m["sizes"].get("graph_tables_bytes") or 0)
            + int(m["sizes"].get("graph_json_bytes") or 0)
            for m in models
        ),
        "samples": sum(int(m["sizes"].get("samples_bytes") or 0) for m in models),
    }
    return planned_ram, planned_flash


def fit_items_bytes(info: Mapping[str, Any], memory: str, item: str) -> int:
    """The bytes of the fit check's ``item`` in ``memory`` ("ram", "flash") for every model
    (project.json: "<model> <item>" when the firmware holds several)."""
    items = info.get("fit", {}).get(memory, {}).get("items", {})
    return sum(int(size) for what, size in items.items() if what.endswith(item))


def _link_buffer_item(info: Mapping[str, Any]) -> str:
    """The fit item that is the project type's console buffer (host_driven's frame receive
    buffer, mlperftiny's input buffer; standalone has none)."""
    from ..generate.project_types import KINDS

    kind = KINDS.get(str(info.get("project_type")))
    return (kind.link_buffer_item if kind is not None else None) or ""


def _attributed(project: Any, linked: LinkedSizes, progress: Optional[Progress]) -> LinkedSizes:
    """``linked`` split by source: a firmware linked with link-time optimisation (MLF_LTO)
    has our C compiled into one object, and one whose runtime library came from the shared
    cache (project_api.build.runtime_cache) has no runtime objects in its build tree, so the
    project is also built without either (beside the build directory, incrementally) and
    that build's split is used, with what the optimisation saved as its own row."""
    from ..build import build, runtime_cache

    plain = build(
        Path(project.dir),
        project.build_dir.with_name(project.build_dir.name + "-no-lto"),
        firmware_name=str(project.info.get("firmware", "firmware")),
        progress=progress,
        cmake=project.options.get("cmake"),
        board_name=project.board.name,
        cache_entries={"MLF_LTO": "OFF", runtime_cache.CACHE_ENTRY: ""},
        compilers=[project.board.architecture.compiler],
        sandbox_option=getattr(project, "sandbox_option", None),
    )
    return linked.attributed_by(linked_sizes(plain.firmware.parent, plain.firmware))


def _runtime_objects_elsewhere(linked: LinkedSizes, build_dir: Path) -> bool:
    """Split by the build tree's objects, but the runtime library was linked from the cache."""
    runtime_objects = build_dir / "CMakeFiles" / "mlf_runtime.dir"
    return linked.method == "objects" and not runtime_objects.is_dir()


def project_footprint(
    project: Any, *, estimate: bool = True, progress: Optional[Progress] = None
) -> Footprint:
    """The footprint of a generated :class:`project_api.driver.Project`: planned figures
    always, linked figures when its firmware has been built."""
    board = project.board
    planned_ram, planned_flash = _planned(project.info)
    notes: List[str] = []
    if estimate:
        from ..generate.executors.aot import CONSTANT_POOLS_FLASH_ITEM

        code = code_estimates(project, notes)
        if code["model code"] is not None:  # the constant pools defined beside the adapter
            code["model code"] += fit_items_bytes(project.info, "flash", CONSTANT_POOLS_FLASH_ITEM)
        planned_flash.update(code)
    params_ram, in_place, total = _project_params_ram(project)
    result = Footprint(
        project_dir=Path(project.dir),
        board=board,
        info=project.info,
        planned_ram=planned_ram,
        planned_flash=planned_flash,
        params_ram_bytes=params_ram,
        params_in_place=in_place,
        params_total=total,
        notes=notes,
    )
    firmware = Path(project.firmware)
    if firmware.is_file():
        result.linked = linked_sizes(Path(project.build_dir), firmware)
        if result.linked.link_time_optimised:
            result.linked = _attributed(project, result.linked, progress)
            notes.append(
                "link-time optimised (MLF_LTO): bytes split as a build without it splits them"
            )
        elif _runtime_objects_elsewhere(result.linked, Path(project.build_dir)):
            result.linked = _attributed(project, result.linked, progress)
        if board.is_host:
            notes.append("host: the stack is the OS's; .bss/.data are the process's statics")
    return result


def refused_footprint(
    archive: PathLike,
    board_name: str,
    *,
    model: Optional[str] = None,
    options: Optional[Mapping[str, Any]] = None,
    project_type: str = "host_driven",
) -> Footprint:
    """The planned footprint of a model the generator refuses for ``board`` because it does
    not fit (its fit check runs before anything is written): the same planning, no
    project."""
    from ..board import load_board
    from ..generate import normalize_options
    from ..generate.model_source import archive_source
    from ..generate.plan import memory_fit, plan_models_normalized, shared_arena_bytes
    from ..read import open_archive

    board = load_board(board_name)
    opts = normalize_options(options)
    stack = int(opts["stack_bytes"]) if opts["stack_bytes"] is not None else board.stack_bytes
    with open_archive(archive_source(archive, options=opts, board=board)) as opened:
        plans = plan_models_normalized(opened, model, board, project_type, opts)
        fit = memory_fit(plans, board, stack if not board.is_host else 0, project_type)
        info: Dict[str, Any] = {
            "project_type": project_type,
            "models": [plan.describe() for plan in plans],
            "shared_arena_bytes": shared_arena_bytes(plans),
            "fit": fit.to_json(),
            "stack_bytes": stack if not board.is_host else None,
        }
        params_ram, in_place, total = _params_ram(
            (plan.tables, plan.model.params or {}) for plan in plans
        )
    planned_ram, planned_flash = _planned(info)
    return Footprint(
        project_dir=Path(archive),
        board=board,
        info=info,
        planned_ram=planned_ram,
        planned_flash=planned_flash,
        params_ram_bytes=params_ram,
        params_in_place=in_place,
        params_total=total,
        notes=[
            "the generator refuses this model for this board: " + "; ".join(fit.problems()),
            "model code and runtime not estimated: nothing is compiled for a refused model",
        ],
    )


def _project_params_ram(project: Any) -> Tuple[int, int, int]:
    from ..generate import MODEL_TAR
    from ..generate.executors import executor_for
    from ..generate.tables import compile_graph
    from ..read import open_archive

    names = {str(m["name"]) for m in project.models}
    with open_archive(Path(project.dir) / MODEL_TAR) as archive:
        return _params_ram(
            (compile_graph(executor_for(model).graph(model)), model.params or {})
            for model in archive.models
            if model.name in names
        )


def _params_ram(models: Iterable[Tuple[Any, Mapping[str, Any]]]) -> Tuple[int, int, int]:
    """(bytes of params copied into the arena, param pools bound in place, param pools) over
    (GraphTables, params) pairs: the runtime's binding rule, as the generator applies it."""
    copied = in_place = total = 0
    for tables, params in models:
        bound = tables.bound_in_place(params) if params else set()
        pools = {tables.views[a.view].storage for a in tables.args if a.name in params}
        total += len(pools)
        in_place += len(pools & bound)
        copied += sum(tables.storage_bytes[sid] for sid in pools - bound)
    return copied, in_place, total


def footprint(
    target: PathLike,
    *,
    board: Optional[str] = None,
    model: Optional[str] = None,
    options: Optional[Mapping[str, Any]] = None,
    build: bool = False,
    estimate: bool = True,
    progress: Optional[Progress] = None,
    project_type: str = "host_driven",
) -> Footprint:
    """The footprint of an MLF archive on ``board`` (generated in a scratch directory,
    built there with ``build=True``) or of a generated project directory (built first with
    ``build=True``; its linked sizes are reported whenever its firmware exists)."""
    from ..driver import Project
    from ..generate import is_generated_project

    path = Path(target)
    if path.is_dir() and is_generated_project(path):
        project = Project.open(path)
        if board and board != project.board.name:
            raise BoardError(
                f"{path} was generated for board {project.board.name}, not {board}",
                hint="omit --board, or generate the project again for that board",
            )
        if model and model not in {m["name"] for m in project.models}:
            raise GenerateError(f"{path} holds no model {model!r}")
        if build:
            project.build(progress=progress)
        return project_footprint(project, estimate=estimate, progress=progress)
    if not board:
        raise BoardError(
            f"{path} is an archive: say which board it is for",
            hint="--board NAME (see `mlf-project boards`)",
        )
    with tempfile.TemporaryDirectory(prefix="mlf-footprint-") as scratch:
        try:
            project = Project.generate(
                path,
                Path(scratch) / "project",
                board=board,
                project_type=project_type,
                model=model,
                options=options,
                progress=progress,
            )
        except FitError:
            return refused_footprint(
                path, board, model=model, options=options, project_type=project_type
            )
        if build:
            project.build(progress=progress)
        result = project_footprint(project, estimate=estimate, progress=progress)
        result.notes.append("generated in a scratch directory (deleted afterwards)")
        result.temporary = True
        return result


def footprint_json(report: Footprint) -> str:
    return json.dumps(report.to_json(), indent=2)


__all__ = [
    "CATEGORIES",
    "CodeEstimate",
    "ElfSection",
    "Footprint",
    "LOOP_SOURCES",
    "LinkedSizes",
    "MapPiece",
    "PathLike",
    "Progress",
    "SECTIONS",
    "SHF_ALLOC",
    "SHF_EXECINSTR",
    "SHF_WRITE",
    "SHT_NOBITS",
    "classify",
    "elf_sections",
    "estimate_code",
    "footprint",
    "footprint_json",
    "linked_sizes",
    "map_objects",
    "parse_linker_map",
    "project_footprint",
    "refused_footprint",
    "section_bucket",
    "walk_linker_map",
]
