"""Planning a project: which models, their C names, tables, params layout, sizes and the
fit check — everything decided before a file is written."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from ..board import Board, list_boards
from ..cmsis_nn.calls import CmsisNnCalls, find_cmsis_nn_calls
from ..errors import GenerateError, UnsupportedModelError
from ..options import GRAPH_FORMATS, normalize_options
from ..read import Archive, Model
from ..resolve.detect import refuse_cmsis_nn_off_arm
from .cmsis_nn_workspace import adapter_workspace, compiled_workspace
from .executors import ExecutorKind, LibraryCode, LibraryRequest, executor_for
from .memory_plan import MemoryPlan, plan_executor_model
from .params_blob import aligned_params, laid_out_params
from .project_types import check_owned_options, project_type_for
from .samples import SampleSet
from .sizes import FitReport, WorkspaceEstimate, fit_report
from .table_check import check_tables
from .table_sizes import json_parse_bytes, state_bytes, tables_bytes
from .tables import MLF_FUNC_COPY, GraphTables, compile_graph

PathLike = Union[str, "os.PathLike[str]"]
Progress = Callable[[str], None]

PROJECT_FILE = "project.json"
MODEL_TAR = "model.tar"
SERVER_FILE = "microtvm_api_server.py"
ALL_MODELS = "*"
PROJECT_FORMAT = 1
_ENTRY_POINT = "mlf_{}_system_lib"
_C_IDENT = re.compile(r"[^A-Za-z0-9_]")


def generator_version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("mlf-project-api")
        except PackageNotFoundError:
            pass
    except ImportError:  # pragma: no cover - Python < 3.8
        pass
    return "0.1.0"


@dataclass
class ModelPlan:
    """One model as it goes into the firmware, with every size the generator computed.

    ``arena_bytes`` answers "how many arena bytes does this model need": with const tables
    the liveness plan's arena (tensors and every operator's workspace window, ``memory``),
    with graph_format=json the runtime's sequential layout of TVM's storage ids; then
    ``separate_workspace_bytes`` more are the workspace beside it (0 with the plan)."""

    model: Model
    kind: ExecutorKind
    c_name: str
    tables: GraphTables  # as the firmware's executor sees them (a pool per tensor when planned)
    params_blob: bytes
    in_place: List[int]
    arena_bytes: int
    workspace: WorkspaceEstimate
    state_bytes: int
    graph_format: str
    tvm_tables: GraphTables  # TVM's storage ids: the JSON the device parses, TVM's own host
    cmsis_nn_calls: CmsisNnCalls  # the CMSIS-NN calls TVM wrote into its C (found once)
    memory: Optional[MemoryPlan] = None  # the liveness plan (const tables), else None
    shares_arena: bool = False  # its arena is the firmware's one arena (shared_arena_bytes)
    graph_json: bytes = b""
    parse_bytes: int = 0
    tables_flash_bytes: int = 0
    samples: Optional[SampleSet] = None
    samples_blob: bytes = b""
    renames: Dict[str, str] = field(default_factory=dict)
    # Params laid out for the const tables (storage id -> offset in params_blob); empty: the
    # blob is TVM's params format and the runtime binds it by name.
    params_layout: Dict[int, int] = field(default_factory=dict)
    sources: List[str] = field(default_factory=list)
    objects: List[str] = field(default_factory=list)
    include_dirs: List[str] = field(default_factory=list)

    @property
    def separate_workspace_bytes(self) -> int:
        """The workspace the firmware reserves beside the arena: none when the plan puts
        every operator's window in the arena."""
        return 0 if self.memory is not None else self.workspace.bytes

    @property
    def copies_params(self) -> bool:
        """Whether init copies some param into the arena (one not bound in place): the
        arena then holds data that must outlive every run, and is the model's own."""
        params = self.model.params or {}
        pools = {self.tables.views[a.view].storage for a in self.tables.args if a.name in params}
        return bool(pools - set(self.in_place))

    @property
    def tvm_plan_bytes(self) -> int:
        """What TVM's plan reserves: every storage id at its largest entry, side by side
        (params bound in place left out), plus a workspace as large as the largest
        operator's (the firmware's layout before the liveness plan)."""
        tvm = self.tvm_tables
        bound = tvm.param_bindings(self.model.params) if self.model.params else {}
        return tvm.arena_bytes(bound) + self.workspace.bytes

    @property
    def device_tables(self) -> GraphTables:
        """The tables as rendered for the device: without the args of params the tables
        bind (see :meth:`GraphTables.without_args_on`)."""
        return self.tables.without_args_on(self.params_layout)

    @property
    def name(self) -> str:
        return self.model.name

    @property
    def entry_point(self) -> str:
        return _ENTRY_POINT.format(self.c_name)

    @property
    def library(self) -> LibraryCode:
        """The function library the executor resolves the graph's functions in."""
        return self.kind.library(
            LibraryRequest(
                self.model,
                self.c_name,
                self.tables.funcs,
                self.entry_point,
                self.renames,
                bound=self.graph_format == "tables",
            )
        )

    def describe(self) -> Dict[str, Any]:
        return {
            "name": self.name,
            "c_name": self.c_name,
            **self.kind.describe(self.model),
            "inputs": [spec.to_dict() for spec in self.model.inputs],
            "outputs": [spec.to_dict() for spec in self.model.outputs],
            "graph_format": self.graph_format,
            "shares_arena": self.shares_arena,
            "sizes": {
                "arena_bytes": self.arena_bytes,
                "params_in_place": len(self.in_place),
                "workspace_bytes": self.workspace.bytes,
                "workspace_ram_bytes": self.separate_workspace_bytes,
                # What one operator call may take: its window (the largest), else the pool.
                "workspace_window_bytes": self.memory.largest_window
                if self.memory is not None
                else self.workspace.bytes,
                "tvm_plan_bytes": self.tvm_plan_bytes,
                "workspace_source": self.workspace.how,
                "workspace_metadata_bytes": self.workspace.metadata_bytes,
                "workspace_code_bytes": self.workspace.code_bytes,
                # The most the CMSIS-NN adapter takes during one call (inside the above).
                "workspace_cmsis_nn_bytes": self.workspace.adapter_bytes,
                "state_bytes": self.state_bytes,
                "params_blob_bytes": len(self.params_blob),
                "params_bytes": self.model.params_bytes,
                # Alignment padding, plus TVM's headers and names when the blob keeps them.
                "params_padding_bytes": len(self.params_blob) - self.model.params_bytes
                if self.params_blob
                else 0,
                "graph_json_bytes": len(self.graph_json),
                "graph_parse_bytes": self.parse_bytes,
                "graph_tables_bytes": self.tables_flash_bytes,
                "samples_bytes": len(self.samples_blob),
            },
            "memory_plan": None if self.memory is None else self.memory.describe(),
            "samples": None if self.samples is None else self.samples.describe(),
            "functions_outside_registry": list(self.library.linked_by_name),
            "renamed_symbols": dict(self.renames),
            "operators": self.operator_names(),
        }

    def operator_names(self) -> Dict[str, str]:
        """Graph node → function it calls, for tables that bind functions by address and so
        carry no names: the host names a failing operator from its node."""
        if self.graph_format != "tables" or not self.library.func_ptrs:
            return {}
        t = self.tables  # the device's tables leave out args, never operators
        return {str(op.node): t.funcs[op.func] for op in t.ops if op.func != MLF_FUNC_COPY}


# --- planning ----------------------------------------------------------------------------------


def choose_models(archive: Archive, model: Optional[str]) -> List[Model]:
    names = [m.name for m in archive.models]
    if model == ALL_MODELS:
        return list(archive.models)
    if model is None:
        if len(archive.models) == 1:
            return [archive.models[0]]
        raise UnsupportedModelError(
            f"{archive.path} holds {len(names)} models: {', '.join(names)}",
            hint="choose one with --model NAME (option model=NAME), or link all of them into "
            "one firmware with --model '*'",
        )
    for candidate in archive.models:
        if candidate.name == model:
            return [candidate]
    raise UnsupportedModelError(
        f"{archive.path} has no model {model!r}; it holds: {', '.join(names)}",
        hint="or '*' for all of them",
    )


def c_names(names: Sequence[str]) -> List[str]:
    """C identifiers for model names, distinct from each other."""
    out: List[str] = []
    for name in names:
        base = _C_IDENT.sub("_", name) or "model"
        if base[0].isdigit():
            base = "m" + base
        candidate = base
        suffix = 2
        while candidate in out:
            candidate = f"{base}_{suffix}"
            suffix += 1
        out.append(candidate)
    return out


def pointer_bytes(board: Board) -> int:
    return 8 if board.is_host else 4


def _workspace(kind: Any, model: Any, override: Optional[int], adapter: Mapping[str, int]) -> Any:
    """The model's workspace, with what the CMSIS-NN adapter takes during its calls
    (``adapter``); an override below what its code allocates at once is refused (its
    operators would fail at run time, in words that do not name the workspace)."""
    estimate = kind.workspace(model, override, adapter)
    needed = estimate.code_bytes
    if override is not None and needed is not None and override < needed:
        source = "its code" + (" and the CMSIS-NN adapter" if estimate.adapter else "")
        raise GenerateError(
            f"option workspace_size_bytes: {override:,} bytes is less than model "
            f"{model.name!r} allocates at once ({needed:,} bytes, from {source})",
            hint="leave the option out to use the estimate",
        )
    return estimate


def plan_models_normalized(
    archive: Archive,
    model: Optional[str],
    board: Board,
    project_type: str,
    opts: Mapping[str, Any],
    names: Optional[Sequence[str]] = None,
) -> List[ModelPlan]:
    """:func:`plan_models` over options already normalized (:func:`normalize_options`).
    ``names``: the models' C names, chosen by the caller (an export's ``--name``), one per
    model chosen; else :func:`c_names` of the models' names. The project type renames the
    models' symbols (:meth:`ProjectType.symbol_renames`)."""
    ptype = project_type_for(project_type, opts)
    check_owned_options(ptype, opts)
    if opts.get("qemu_icount") and not board.is_qemu:
        raise GenerateError(f"option qemu_icount applies to QEMU boards, not {board.name}")
    models = choose_models(archive, model)
    _check_cpu(models, board)
    # Before the dependencies are judged: no CMSIS-NN dependency makes such a model build here.
    refuse_cmsis_nn_off_arm([(m.name, m.sources) for m in models], board)
    ptype.check(models, opts)
    # What the CMSIS-NN adapter takes from each operator's workspace: in its window.
    calls = [find_cmsis_nn_calls(m.sources) for m in models]
    adapter = adapter_workspace(models, {m.name: c for m, c in zip(models, calls)}, board, opts)
    # ... and what the CMSIS-NN calls of a compiled archive take (the library's own answers).
    for name, needs in compiled_workspace(models, board).items():
        adapter.setdefault(name, {}).update(needs)
    plans: List[ModelPlan] = []
    ptr = pointer_bytes(board)
    graph_format = opts["graph_format"]
    assert graph_format in GRAPH_FORMATS
    chosen = list(names) if names is not None else c_names([m.name for m in models])
    if len(chosen) != len(models):
        raise GenerateError(f"{len(chosen)} C names given for {len(models)} models")
    for the_model, c_name, found in zip(models, chosen, calls):
        kind = executor_for(the_model)
        if kind.name == "operator" and not ptype.serves_operators:
            the_model.require_graph()  # the explanation: no graph to run
        graph = kind.graph(the_model)
        tvm_tables = tables = compile_graph(graph)
        workspace = _workspace(
            kind, the_model, opts["workspace_size_bytes"], adapter.get(the_model.name, {})
        )
        memory = None
        tables_format = kind.graph_format(graph_format) == "tables"
        if tables_format and opts["memory_plan"] == "liveness":
            tables, memory = plan_executor_model(
                the_model, kind, workspace, opts["workspace_size_bytes"]
            )
        bindings = tables.param_bindings(the_model.params) if the_model.params else {}
        in_place = sorted(bindings)
        layout: Dict[int, int] = {}
        if tables_format and bindings and len(bindings) == len(the_model.params):
            blob, layout, _ = laid_out_params(the_model.params, bindings)
        else:
            blob, _ = aligned_params(the_model.params) if the_model.params else (b"", {})
        plan = ModelPlan(
            model=the_model,
            kind=kind,
            c_name=c_name,
            tables=tables,
            params_blob=blob,
            in_place=in_place,
            arena_bytes=tables.arena_bytes(in_place) if memory is None else memory.arena_bytes,
            workspace=workspace,
            state_bytes=state_bytes(tables.without_args_on(layout), ptr),
            graph_format=kind.graph_format(graph_format),
            tvm_tables=tvm_tables,
            memory=memory,
            cmsis_nn_calls=found,
            params_layout=layout,
        )
        if plan.graph_format == "json":
            assert the_model.graph_member is not None
            plan.graph_json = (the_model.root / the_model.graph_member).read_bytes()
            plan.parse_bytes = json_parse_bytes(graph, tables, ptr) + 64
        else:
            device_tables = plan.device_tables
            check_tables(device_tables, plan.params_layout, plan.name, plan.memory)
            plan.tables_flash_bytes = tables_bytes(
                device_tables,
                ptr,
                func_names=not plan.library.func_ptrs,
                storage_data=bool(plan.params_layout),
                memory=plan.memory,
            )
        ptype.plan(plan, archive, opts)
        plans.append(plan)
    for plan, renames in zip(plans, ptype.symbol_renames(plans)):
        plan.renames = renames
    for plan in plans:
        plan.shares_arena = ptype.shares_arena and not plan.copies_params
    if graph_format == "json" and not any(plan.graph_format == "json" for plan in plans):
        raise GenerateError(
            "option graph_format=json: no graph.json to parse on the device: "
            + ", ".join(repr(plan.model.name) for plan in plans)
            + " run through AOT code",
            hint="leave the option out for AOT archives",
        )
    return plans


def plan_models(
    archive: Archive,
    model: Optional[str],
    board: Board,
    project_type: str = "host_driven",
    options: Optional[Mapping[str, Any]] = None,
) -> List[ModelPlan]:
    """What the generator plans for ``model`` (a name, ``'*'`` or None) of an open
    ``archive`` on ``board`` — tables, liveness plan, params, sizes — without writing
    anything: for tools that need a firmware's own plan (footprint, benchmarks, export)."""
    return plan_models_normalized(archive, model, board, project_type, normalize_options(options))


def _check_cpu(models: Sequence[Model], board: Board) -> None:
    """A model whose C calls Arm DSP intrinsics builds only for a core that has them."""
    if board.cpu is not None and board.cpu.dsp:
        return
    for model in models:
        if model.arm_dsp:
            targets = ", ".join(model.targets) or "its target"
            core = f"a {board.cpu.core}" if board.cpu is not None else "the host's CPU"
            fitting = [b.name for b in list_boards() if b.cpu is not None and b.cpu.dsp]
            raise GenerateError(
                f"model {model.name!r} calls Arm DSP intrinsics (its C includes arm_acle.h: "
                f"TVM's Cortex-M micro-kernels for {targets}); board {board.name} has {core} "
                "without the DSP extension",
                hint="choose a board with DSP (" + ", ".join(fitting) + "), or build the "
                "model again for a target without -mcpu",
            )


def shared_arena_bytes(plans: Sequence[ModelPlan]) -> int:
    """The firmware's one arena: the largest of the sharing models' (with a JSON graph's
    workspace after its arena). One inference runs at a time, so their tensors and windows
    may use the same bytes; a model's inputs and outputs hold until another model uses the
    arena (the device protocol refuses a RUN or GET_OUTPUT after that)."""
    return max(
        (p.arena_bytes + p.separate_workspace_bytes for p in plans if p.shares_arena), default=0
    )


def memory_fit(
    plans: Sequence[ModelPlan],
    board: Board,
    stack_bytes: int,
    project_type: str = "host_driven",
    opts: Optional[Mapping[str, Any]] = None,
) -> FitReport:
    ptype = project_type_for(project_type, opts)
    ram: Dict[str, int] = {}
    flash: Dict[str, int] = {}
    many = len(plans) > 1
    sharing = [plan.name for plan in plans if plan.shares_arena and ptype.keeps_executor(plan)]
    if sharing:
        shared = "arena" if len(sharing) == 1 else f"arena (shared: {', '.join(sharing)})"
        ram[shared] = shared_arena_bytes(plans)
    for plan in plans:
        if not ptype.keeps_executor(plan):
            continue
        tag = f"{plan.name} " if many else ""
        if not plan.shares_arena:
            ram[f"{tag}arena"] = plan.arena_bytes
            ram[f"{tag}workspace"] = plan.separate_workspace_bytes
        ram[f"{tag}executor state"] = plan.state_bytes
        for what, size in plan.kind.ram_items(plan.model).items():
            ram[f"{tag}{what}"] = size
        if plan.parse_bytes:
            ram[f"{tag}graph tables"] = plan.parse_bytes
        flash[f"{tag}params"] = len(plan.params_blob)
        for what, size in plan.kind.flash_items(plan.model).items():
            flash[f"{tag}{what}"] = size
        if plan.graph_json:
            flash[f"{tag}graph.json"] = len(plan.graph_json)
        if plan.tables_flash_bytes:
            flash[f"{tag}graph tables"] = plan.tables_flash_bytes
        if plan.samples_blob:
            flash[f"{tag}samples"] = len(plan.samples_blob)
    ram.update(ptype.ram_items(plans, board, opts or {}))
    ram["stack"] = stack_bytes
    return fit_report(board, ram_items=ram, flash_items=flash)
