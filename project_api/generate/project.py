"""Render a firmware project for one model (or every model) of an archive on a board.

The project is self-contained and uses relative paths only, so it can be moved::

    model.tar                  copy of the archive (its presence marks a generated project)
    microtvm_api_server.py     TVM's client talks to the project through it
    project.json               what was generated: board, type, options, models, sizes
    CMakeLists.txt
    model/<mod>/...            the model's generated C (and objects, include dirs)
    src/main.c                 set up every model, then serve the device protocol (host_driven),
                               run the embedded samples once (standalone) or answer the MLPerf
                               Tiny benchmark protocol (mlperftiny): project_types/
    src/mlf_models.h
    src/model_<mod>.c          const graph tables (or the JSON parse buffer), state, arena,
                               workspace, init function
    src/params_<mod>.S + .bin  the params blob, 64-byte aligned, read-only, via .incbin
    src/graph_<mod>.S + .json  graph_format=json only
    src/samples_<mod>.S + .bin standalone only
    runtime/                   copy of crt/include, crt/src, template_project/firmware
    board/                     the board's C seam, linker script, toolchain file
    deps/, deps.cmake, dependencies.lock.json   when the model has external dependencies

Generation happens in a staging directory beside the destination, which is swapped in at
the end: a failure leaves the destination as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from ..boards import Board, load_board
from ..errors import GenerateError, UnsupportedModelError
from ..jsontext import parse_json
from ..options import GRAPH_FORMATS, normalize_options
from ..read import Archive, Model, open_archive
from ..resources import crt_dir, template_dir
from .executors import ExecutorKind, LibraryCode, LibraryRequest, executor_for
from .params_blob import aligned_params, laid_out_params
from .project_types import ProjectType, check_owned_options, project_type_for, wire_payload
from .registry import defined_functions
from .samples import SampleSet
from .sizes import FitReport, WorkspaceEstimate, fit_report
from .tables import (
    GraphTables,
    c_string,
    compile_graph,
    json_parse_bytes,
    json_raw,
    render_c,
    state_bytes,
    state_bytes_expression,
    tables_bytes,
)

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
    """One model as it goes into the firmware, with every size the generator computed."""

    model: Model
    kind: ExecutorKind
    c_name: str
    tables: GraphTables
    params_blob: bytes
    in_place: List[int]
    arena_bytes: int
    workspace: WorkspaceEstimate
    state_bytes: int
    graph_format: str
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
            "sizes": {
                "arena_bytes": self.arena_bytes,
                "params_in_place": len(self.in_place),
                "workspace_bytes": self.workspace.bytes,
                "workspace_source": self.workspace.how,
                "workspace_metadata_bytes": self.workspace.metadata_bytes,
                "workspace_code_bytes": self.workspace.code_bytes,
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
            "samples": None if self.samples is None else self.samples.describe(),
            "functions_outside_registry": list(self.library.linked_by_name),
            "renamed_symbols": dict(self.renames),
        }


def generate_project(
    archive: PathLike,
    project_dir: PathLike,
    *,
    board: str = "host",
    project_type: str = "host_driven",
    model: Optional[str] = None,
    options: Optional[Mapping[str, Any]] = None,
    progress: Optional[Progress] = None,
    force: bool = False,
) -> Dict[str, Any]:
    """Generates the project; returns what it wrote to ``project.json``."""
    say = progress or (lambda _message: None)
    project_type_for(project_type)
    opts = normalize_options(options)
    the_board = load_board(board)
    archive_path = Path(archive)
    destination = Path(project_dir)
    _check_destination(destination, force)
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(
        tempfile.mkdtemp(prefix=f".{destination.name}.generating-", dir=destination.parent)
    )
    try:
        say(f"reading {archive_path}")
        with open_archive(archive_path) as opened:
            plans = _plan_models(opened, model, the_board, project_type, opts)
            info = _write_project(
                staging,
                opened,
                archive_path,
                plans,
                the_board,
                project_type,
                model,
                opts,
                say,
                previous=destination,
                requested=dict(options or {}),
            )
        _swap_in(staging, destination)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    say(f"generated {destination}")
    return info


# --- destination ---------------------------------------------------------------------------


def is_generated_project(path: Path) -> bool:
    return (path / MODEL_TAR).is_file() and (path / PROJECT_FILE).is_file()


def _check_destination(destination: Path, force: bool) -> None:
    if destination.exists() and not destination.is_dir():
        raise GenerateError(f"{destination} exists and is not a directory")
    if not destination.is_dir() or not any(destination.iterdir()):
        return
    if not is_generated_project(destination):
        raise GenerateError(
            f"{destination} is not empty and is not a generated project",
            hint="choose a new or empty directory",
        )
    if not force:
        raise GenerateError(
            f"{destination} already holds a generated project",
            hint="pass --force (force=True) to replace it",
        )


def _swap_in(staging: Path, destination: Path) -> None:
    old: Optional[Path] = None
    if destination.exists():
        old = destination.with_name(f".{destination.name}.old-{os.getpid()}")
        shutil.rmtree(old, ignore_errors=True)
        os.rename(destination, old)
    try:
        os.rename(staging, destination)
    except OSError:
        if old is not None:
            os.rename(old, destination)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


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


def _plan_models(
    archive: Archive,
    model: Optional[str],
    board: Board,
    project_type: str,
    opts: Mapping[str, Any],
) -> List[ModelPlan]:
    ptype = project_type_for(project_type)
    check_owned_options(ptype, opts)
    models = choose_models(archive, model)
    ptype.check(models, opts)
    plans: List[ModelPlan] = []
    ptr = pointer_bytes(board)
    graph_format = opts["graph_format"]
    assert graph_format in GRAPH_FORMATS
    for the_model, c_name in zip(models, c_names([m.name for m in models])):
        kind = executor_for(the_model)
        graph = kind.graph(the_model)
        tables = compile_graph(graph)
        bindings = tables.param_bindings(the_model.params) if the_model.params else {}
        in_place = sorted(bindings)
        layout: Dict[int, int] = {}
        if (
            kind.graph_format(graph_format) == "tables"
            and bindings
            and len(bindings) == len(the_model.params)
        ):
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
            arena_bytes=tables.arena_bytes(in_place),
            workspace=kind.workspace(the_model, opts["workspace_size_bytes"]),
            state_bytes=state_bytes(tables, ptr),
            graph_format=kind.graph_format(graph_format),
            params_layout=layout,
        )
        if plan.graph_format == "json":
            assert the_model.graph_member is not None
            plan.graph_json = (the_model.root / the_model.graph_member).read_bytes()
            plan.parse_bytes = json_parse_bytes(graph, tables, ptr) + 64
        else:
            plan.tables_flash_bytes = tables_bytes(tables, ptr)
        ptype.plan(plan, archive, opts)
        plans.append(plan)
    _rename_shared_symbols(plans)
    return plans


def _rename_shared_symbols(plans: Sequence[ModelPlan]) -> None:
    """Functions that several models of one firmware define (TVM names most of them
    ``tvmgen_<mod>_...``, but not all, e.g. ``__tvm_main__``) get a per-model name through a
    -D on that model's code, so the firmware links."""
    if len(plans) < 2:
        return
    defined = [defined_functions(plan.model.sources) for plan in plans]
    counts: Dict[str, int] = {}
    for names in defined:
        for name in names:
            counts[name] = counts.get(name, 0) + 1
    for plan, names in zip(plans, defined):
        plan.renames = {
            name: f"mlf_{plan.c_name}_{name.lstrip('_')}"
            for name in sorted(names)
            if counts[name] > 1
        }


def memory_fit(
    plans: Sequence[ModelPlan], board: Board, stack_bytes: int, project_type: str = "host_driven"
) -> FitReport:
    ram: Dict[str, int] = {}
    flash: Dict[str, int] = {}
    many = len(plans) > 1
    for plan in plans:
        tag = f"{plan.name} " if many else ""
        ram[f"{tag}arena"] = plan.arena_bytes
        ram[f"{tag}workspace"] = plan.workspace.bytes
        ram[f"{tag}executor state"] = plan.state_bytes
        for what, size in plan.kind.ram_items(plan.model).items():
            ram[f"{tag}{what}"] = size
        if plan.parse_bytes:
            ram[f"{tag}graph tables"] = plan.parse_bytes
        flash[f"{tag}params"] = len(plan.params_blob)
        if plan.graph_json:
            flash[f"{tag}graph.json"] = len(plan.graph_json)
        if plan.tables_flash_bytes:
            flash[f"{tag}graph tables"] = plan.tables_flash_bytes
        if plan.samples_blob:
            flash[f"{tag}samples"] = len(plan.samples_blob)
    ram.update(project_type_for(project_type).ram_items(plans, board))
    ram["stack"] = stack_bytes
    return fit_report(board, ram_items=ram, flash_items=flash)


# --- writing -------------------------------------------------------------------------------------


def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_dir() / "templates")),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["cmake_quote"] = _cmake_quote
    return env


def _cmake_quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    return f'"{escaped}"'


def _write_project(
    root: Path,
    archive: Archive,
    archive_path: Path,
    plans: List[ModelPlan],
    board: Board,
    project_type: str,
    model_option: Optional[str],
    opts: Mapping[str, Any],
    say: Progress,
    *,
    previous: Path,
    requested: Mapping[str, Any],
) -> Dict[str, Any]:
    stack = int(opts["stack_bytes"]) if opts["stack_bytes"] is not None else board.stack_bytes
    ptype = project_type_for(project_type)
    fit = memory_fit(plans, board, stack if not board.is_host else 0, project_type)
    what = (
        f"model {plans[0].name}"
        if len(plans) == 1
        else f"models {', '.join(p.name for p in plans)}"
    )
    fit.check(board.name, what)

    say("copying the model and the runtime")
    _copy_archive(archive_path, archive, root / MODEL_TAR)
    shutil.copyfile(template_dir() / SERVER_FILE, root / SERVER_FILE)
    for plan in plans:
        _copy_model_code(plan, archive, root)
    any_json = any(plan.graph_format == "json" for plan in plans)
    runtime_sources = _copy_runtime(
        root, ptype, "json" if any_json else "tables", bool(opts["profile"])
    )
    seam_sources, seam_dirs = _copy_board(root, board, stack)

    dependencies = _install_dependencies(
        root, archive, archive_path, plans, board, opts, say, previous=previous
    )

    say("rendering the project")
    env = _environment()
    src = root / "src"
    src.mkdir(parents=True, exist_ok=True)
    blobs: List[Dict[str, str]] = []
    model_contexts = []
    for plan in plans:
        blobs += _write_blobs(env, src, plan)
        model_contexts.append(_model_context(plan))
    own = list(opts["compile_definitions"] or [])
    definitions = [f"{name}={value}" for name, value in board.compile_definitions().items()]
    definitions += [d for d in ptype.definitions if _macro(d) not in {_macro(o) for o in own}]
    definitions += own
    if opts["profile"]:
        definitions.append("MLF_PROFILE=1")
    context = {
        "generator_version": generator_version(),
        "board": board,
        "project_type": project_type,
        "models": model_contexts,
        "cross": not board.is_host,
        "cpu_flags": board.cpu_flags(),
        "werror": bool(opts["warning_as_error"]),
        "profile": bool(opts["profile"]),
        "opt_flags": board.model_opt_flags(),
        "runtime_opt_flags": board.runtime_opt_flags(),
        "definitions": definitions,
        "runtime_sources": runtime_sources,
        "seam_sources": seam_sources,
        "seam_include_dirs": seam_dirs,
        "blobs": blobs,
        "dependencies": dependencies,
        **ptype.context(plans, board, opts),
    }
    (root / "CMakeLists.txt").write_text(env.get_template("CMakeLists.txt.j2").render(context))
    (src / "main.c").write_text(env.get_template(ptype.main_template).render(context))
    (src / "mlf_models.h").write_text(env.get_template("models.h.j2").render(context))
    for plan, model_context in zip(plans, model_contexts):
        text = env.get_template("model.c.j2").render(model=model_context)
        (src / f"model_{plan.c_name}.c").write_text(text)

    stored_options = {k: v for k, v in opts.items() if v is not None}
    info: Dict[str, Any] = {
        "format": PROJECT_FORMAT,
        "generator": "mlf-project-api",
        "generator_version": generator_version(),
        "archive": archive_path.name,
        "archive_sha256": _sha256(root / MODEL_TAR) if archive_path.is_file() else None,
        "mlf_version": archive.version,
        "board": board.name,
        "project_type": project_type,
        **ptype.describe(plans, opts),
        "model": model_option,
        "options": stored_options,
        "requested_options": json.loads(json.dumps(dict(sorted(requested.items())), default=str)),
        "models": [plan.describe() for plan in plans],
        "max_payload": wire_payload(board),
        "stack_bytes": stack if not board.is_host else None,
        "fit": fit.to_json(),
        "dependencies": [d for d in (dependencies or [])],
        "firmware": "firmware" if board.is_host else "firmware.elf",
    }
    (root / PROJECT_FILE).write_text(json.dumps(info, indent=2) + "\n")
    return info


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _copy_archive(archive_path: Path, archive: Archive, target: Path) -> None:
    if archive_path.is_dir():
        with tarfile.open(target, "w") as tar:
            for child in sorted(archive_path.iterdir()):
                tar.add(str(child), arcname=f"./{child.name}")
    else:
        shutil.copyfile(archive_path, target)


def _copy_model_code(plan: ModelPlan, archive: Archive, root: Path) -> None:
    model = plan.model
    base = Path("model") / plan.c_name

    def place(path: Path) -> str:
        rel = path.relative_to(model.root)
        target = root / base / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir():
            shutil.copytree(path, target, dirs_exist_ok=True)
        else:
            shutil.copyfile(path, target)
        return (base / rel).as_posix()

    plan.sources = [place(p) for p in model.sources]
    plan.objects = [place(p) for p in model.objects]
    plan.include_dirs = [place(p) for p in model.include_dirs]
    # Headers beside the sources (TVM writes some models' headers there).
    for source in model.sources:
        for header in source.parent.glob("*.h"):
            place(header)


# Runtime sources a project does not compile (build time is part of the product): TVM's
# graph-executor API needs TVMPlatformMemoryAllocate, which our firmware has no use for; the
# JSON parser only serves graph_format=json. Of template_project/firmware/ a project compiles
# what its type names (ProjectType.firmware_sources), plus the profile hooks when asked.
_NOT_COMPILED = {"mlf_tvm_compat.c"}
_PROFILE_SOURCE = "mlf_profile.c"
_JSON_ONLY = {"mlf_graph_json.c", "mlf_json.c"}


def _copy_runtime(root: Path, kind: ProjectType, graph_format: str, profile: bool) -> List[str]:
    crt = crt_dir()
    runtime = root / "runtime"
    shutil.copytree(crt / "include", runtime / "include")
    skip = set(_NOT_COMPILED) | (_JSON_ONLY if graph_format != "json" else set())
    firmware = set(kind.firmware_sources) | ({_PROFILE_SOURCE} if profile else set())
    sources: List[str] = []
    for source_dir, target in ((crt / "src", "src"), (template_dir() / "firmware", "firmware")):
        (runtime / target).mkdir(parents=True)
        for path in sorted(source_dir.iterdir()):
            wanted = path.name in firmware if target == "firmware" else path.name not in skip
            if path.suffix == ".h" or (path.suffix == ".c" and wanted):
                shutil.copyfile(path, runtime / target / path.name)
                if path.suffix == ".c":
                    sources.append(f"runtime/{target}/{path.name}")
    if not any(s.startswith("runtime/src/") for s in sources):
        raise GenerateError(
            f"the runtime sources are missing from {crt / 'src'}",
            hint="this installation of mlf-project-api is incomplete",
        )
    return sources


def _copy_board(root: Path, board: Board, stack_bytes: int) -> tuple[List[str], List[str]]:
    sources: List[str] = []
    include_dirs: List[str] = []
    for directory in board.seam_dirs():
        target = root / "board" / directory.name
        target.mkdir(parents=True, exist_ok=True)
        for path in sorted(directory.iterdir()):
            if path.suffix in (".c", ".h"):
                shutil.copyfile(path, target / path.name)
                if path.suffix == ".c":
                    sources.append(f"board/{directory.name}/{path.name}")
        include_dirs.append(f"board/{directory.name}")
    if not board.is_host:
        (root / "board" / "linker.ld").write_text(board.render_linker_script(stack_bytes))
        toolchain = board.toolchain_file
        assert toolchain is not None
        shutil.copyfile(toolchain, root / "board" / "toolchain.cmake")
    return sources, include_dirs


def _install_dependencies(
    root: Path,
    archive: Archive,
    archive_path: Path,
    plans: Sequence[ModelPlan],
    board: Board,
    opts: Mapping[str, Any],
    say: Progress,
    *,
    previous: Path,
) -> Optional[List[Dict[str, Any]]]:
    """Resolve, place and pin the external dependencies; ``deps.cmake`` builds them.

    Lock files: ``lock_file`` regenerates exactly what it pins (every dependency must be in
    it; it supplies those only it lists). Otherwise a project regenerated in place reuses its
    own ``dependencies.lock.json`` for every dependency declared as before (same commit or
    archive digest, even for a moving branch) and resolves changed or new ones afresh;
    ``refresh_dependencies`` ignores it and fetches git/url dependencies again.
    """
    from ..errors import DependencyError
    from ..resolve import (
        LOCK_FILE_NAME,
        LockFile,
        assumed_features,
        cmsis_nn_build,
        collect_dependencies,
        detect_cmsis_nn,
        install_dependencies,
        read_lock,
        require_cmsis_nn,
        resolve_dependencies,
        reusable_lock,
        specs_from_lock,
    )

    sources = [p for plan in plans for p in plan.model.sources]
    cmsis_path = opts["cmsis_path"]
    if cmsis_path is None and os.environ.get("CMSIS_PATH") and detect_cmsis_nn(sources):
        cmsis_path = os.environ["CMSIS_PATH"]  # TVM's convention, only when the code needs it
    overrides = opts["dependencies"] or []
    if isinstance(overrides, dict):
        overrides = [overrides]
    specs = collect_dependencies(
        [plan.model.external_dependencies for plan in plans],
        overrides=overrides,
        cmsis_path=cmsis_path,
        model_names=[plan.name for plan in plans],
    )
    lock = None
    partial = False
    if opts["lock_file"]:
        lock = read_lock(Path(opts["lock_file"]).expanduser())
        user = collect_dependencies([], overrides=overrides, cmsis_path=cmsis_path)
        specs = specs_from_lock(specs, lock, user_names=[spec.short_name for spec in user])
        say(f"dependencies as pinned by {lock.path}")
    require_cmsis_nn(sources, specs, cmsis_path=cmsis_path)
    if not specs:
        return None
    own_lock = previous / LOCK_FILE_NAME
    if lock is None and own_lock.is_file() and not opts["refresh_dependencies"]:
        try:
            old_lock = read_lock(own_lock)
        except DependencyError as err:  # the project is being replaced anyway
            say(f"ignoring the project's damaged lock file: {err.message}")
            old_lock = LockFile()
        lock, fresh = reusable_lock(specs, old_lock)
        partial = True
        if lock.entries:
            say(f"reusing the pins of {own_lock} for {', '.join(lock.entries)}")
        for spec in fresh:
            say(f"{spec.short_name}: not pinned as declared in {own_lock}; resolving it afresh")
    say(f"resolving {len(specs)} external dependenc{'y' if len(specs) == 1 else 'ies'}")
    cache_dir = Path(opts["cache_dir"]).expanduser() if opts["cache_dir"] else None
    resolved = resolve_dependencies(
        specs,
        archive_root=archive.root,
        base_dir=(archive_path if archive_path.is_dir() else archive_path.parent).resolve(),
        cache_dir=cache_dir,
        offline=bool(opts["offline"]),
        lock=lock,
        partial_lock=partial,
        refresh=bool(opts["refresh_dependencies"]),
        progress=say,
        notify=say,
    )
    cmsis = None
    if any(dep.recipe.kind == "cmsis-nn" and not dep.skipped for dep in resolved):
        assumed = [
            (plan.name, assumed_features(plan.model.targets))
            for plan in plans
            if detect_cmsis_nn(plan.model.sources)
        ]
        cmsis = cmsis_nn_build(assumed, board.cpu, board.name)
        if cmsis.reason:
            say(cmsis.reason)
    targets = ["firmware"] + [f"mlf_model_{plan.c_name}" for plan in plans]
    placed = install_dependencies(
        resolved,
        root,
        cpu=None,
        target_name=targets,
        lock=lock,
        cmsis_nn_flags=cmsis.flags if cmsis else (),
    )
    described = []
    for dep in placed:
        entry: Dict[str, Any] = {
            "short_name": dep.short_name,
            "placed": dep.placed,
            "resolved": dep.resolved,
            "compiled": not dep.skipped,
        }
        if dep.spec.is_tvm_crt:
            entry["note"] = dep.note
        if cmsis is not None and dep.recipe.kind == "cmsis-nn" and not dep.skipped:
            entry["cpu_features"] = cmsis.name
            entry["cpu_features_note"] = cmsis.reason
        described.append(entry)
    return described


def _write_blobs(env: Any, src: Path, plan: ModelPlan) -> List[Dict[str, str]]:
    blobs = []
    template = env.get_template("blob.S.j2")

    def blob(kind: str, what: str, data: bytes, ext: str, terminate: bool = False) -> None:
        data_name = f"{kind}_{plan.c_name}{ext}"
        asm_name = f"{kind}_{plan.c_name}.S"
        (src / data_name).write_bytes(data)
        text = template.render(
            what=what,
            size=len(data),
            data_name=data_name,
            section=f".rodata.mlf_{kind}_{plan.c_name}",
            alignment=64,
            symbol=f"mlf_{kind}_{plan.c_name}"
            if kind != "graph"
            else f"mlf_graph_json_{plan.c_name}",
            terminate=terminate,
        )
        (src / asm_name).write_text(text)
        blobs.append(
            {"asm": f"src/{asm_name}", "data": f"src/{data_name}", "dir": "src", "what": what}
        )

    if plan.params_blob:
        blob("params", f"params of model {plan.name}", plan.params_blob, ".bin")
    if plan.graph_format == "json":
        blob("graph", f"graph.json of model {plan.name}", plan.graph_json, ".json", True)
    if plan.samples_blob:
        blob(
            "samples", f"sample inputs and outputs of model {plan.name}", plan.samples_blob, ".bin"
        )
    return blobs


def _macro(definition: str) -> str:
    return definition.split("=", 1)[0].strip()


def _model_context(plan: ModelPlan) -> Dict[str, Any]:
    symbol = f"mlf_graph_{plan.c_name}"
    library = plan.library
    return {
        "executor": plan.kind.name,
        "registry_c": library.c_text,
        "library": library.library,
        "name": plan.name,
        "c_name": plan.c_name,
        "c_name_literal": c_string(json_raw(plan.name)),
        "entry_point": plan.entry_point,
        "renames": [f"{old}={new}" for old, new in plan.renames.items()],
        "graph_format": plan.graph_format,
        "tables_c": _tables_body(
            render_c(
                plan.tables,
                symbol,
                {sid: f"mlf_params_{plan.c_name} + {at}" for sid, at in plan.params_layout.items()},
                library.func_ptrs,
            ),
            symbol,
        )
        if plan.graph_format == "tables"
        else "",
        "tables_symbol": symbol,
        "parse_bytes": plan.parse_bytes,
        "arena_bytes": plan.arena_bytes,
        "in_place_count": len(plan.in_place),
        "workspace_bytes": plan.workspace.bytes,
        "workspace_how": plan.workspace.how,
        "state_expression": state_bytes_expression(plan.tables),
        "has_params": bool(plan.params_blob),
        "params_in_tables": bool(plan.params_layout),
        "samples": []
        if plan.samples is None
        else [
            {"inputs": ins, "expected": outs}
            for ins, outs in zip(plan.samples.offsets_in, plan.samples.offsets_out)
        ],
        "samples_source": "" if plan.samples is None else plan.samples.source,
        "sources": plan.sources,
        "objects": plan.objects,
        "include_dirs": plan.include_dirs,
    }


def _tables_body(text: str, symbol: str) -> str:
    """render_c's output without its own header lines, the graph made file-local."""
    lines = [
        line
        for line in text.splitlines()
        if not line.startswith("/* Generated") and not line.startswith("#include")
    ]
    body = "\n".join(lines).strip("\n")
    return body.replace(f"const mlf_graph {symbol} = {{", f"static const mlf_graph {symbol} = {{")


def read_project_info(project_dir: Path) -> Dict[str, Any]:
    path = Path(project_dir) / PROJECT_FILE
    try:
        info = parse_json(path.read_text())
    except FileNotFoundError:
        raise GenerateError(
            f"{project_dir} is not a generated project (no {PROJECT_FILE})",
            hint="generate one with `mlf-project generate ARCHIVE DIR --board BOARD`",
        ) from None
    except ValueError as err:
        raise GenerateError(f"{path}: not valid JSON: {err}") from None
    if not isinstance(info, dict) or info.get("generator") != "mlf-project-api":
        raise GenerateError(f"{path} was not written by mlf-project-api")
    return info
