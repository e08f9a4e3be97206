"""Writing a planned project into a directory: CMakeLists.txt, main.c and each model's C from
template_project/templates/, the model's code, the runtime, the board seam, blobs and
external dependencies."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import shutil
import tarfile
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..board import Board
from ..errors import GenerateError
from ..read import Archive
from ..read.code import is_junk
from ..resolve.cache import default_cache_dir
from ..resources import crt_dir, template_dir
from .cmsis_nn import adapter_ram_items
from .dependencies import DeclaredDependencies, install_project_dependencies
from .plan import (
    MODEL_TAR,
    PROJECT_FILE,
    PROJECT_FORMAT,
    SERVER_FILE,
    ModelPlan,
    Progress,
    generator_version,
    memory_fit,
    shared_arena_bytes,
)
from .project_types import ProjectType, project_type_for, wire_payload
from .registry import defines_system_library
from .tables import (
    c_string,
    json_raw,
    render_c,
    state_bytes_expression,
)

# Line breaks (CMake's and C's, and any other control character) and the end of a C comment.
_COMMENT_BREAKERS = re.compile(r"[\x00-\x1f\x7f]|\*/")

# How the project's CMakeLists.txt builds (or finds a cached) runtime library, and with what
# settings (rendered from template_project/templates/runtime_build.cmake.j2).
_RUNTIME_CACHE_MODULE = "mlf_runtime_cache.cmake"
# Defined for the host's firmware: the runtime measures each operator call's workspace.
WORKSPACE_MARKS_MACRO = "MLF_WORKSPACE_MARKS"
_RUNTIME_BUILD = "mlf_runtime_build.cmake"

# --- writing -------------------------------------------------------------------------------------


def template_environment(folder: str = "templates") -> Any:
    """Jinja2 over ``template_project/<folder>`` (``export``: the exported library's)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_dir() / folder)),
        bytecode_cache=_bytecode_cache(),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["cmake_quote"] = _cmake_quote
    env.filters["comment"] = _comment
    return env


def _bytecode_cache() -> Any:
    """Compiled templates, kept beside the dependency cache: compiling them is most of
    generating a small project (an AutoTVM trial's). jinja2 keys each by its source's
    checksum; a cache that cannot be read or written is only slower."""
    import jinja2

    class QuietCache(jinja2.FileSystemBytecodeCache):
        def load_bytecode(self, bucket: Any) -> None:
            with contextlib.suppress(OSError, ValueError, EOFError):
                super().load_bytecode(bucket)

        def dump_bytecode(self, bucket: Any) -> None:
            with contextlib.suppress(OSError):
                super().dump_bytecode(bucket)

    directory = default_cache_dir() / "templates"
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return QuietCache(str(directory))


def _cmake_quote(text: str) -> str:
    """One CMake quoted argument: a newline, ';' or '#' inside stays part of it."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    return f'"{escaped}"'


def _comment(text: str) -> str:
    """Text for a '#' or '/* */' comment: no line break or comment end can leave it (the
    reader already refuses such model names; this is the second line of defence)."""
    return _COMMENT_BREAKERS.sub("?", text)


def write_project(
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
    declared: DeclaredDependencies,
    previous: Path,
    requested: Mapping[str, Any],
) -> Dict[str, Any]:
    stack = int(opts["stack_bytes"]) if opts["stack_bytes"] is not None else board.stack_bytes
    ptype = project_type_for(project_type, opts)
    fit = memory_fit(plans, board, stack if not board.is_host else 0, project_type, opts)
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
    any_json = ptype.parses_graph_json or any(plan.graph_format == "json" for plan in plans)
    runtime_sources = _copy_runtime(
        root, ptype, "json" if any_json else "tables", bool(opts["profile"])
    )
    seam_sources, seam_dirs = _copy_board(root, board, stack)

    dependencies = install_project_dependencies(
        root, archive, declared, plans, board, opts, say, previous=previous
    )
    adapter_ram = adapter_ram_items(dependencies)  # known once CMSIS-NN's tree is read
    if adapter_ram:
        fit.ram_items.update(adapter_ram)
        fit.check(board.name, what)

    say("rendering the project")
    env = template_environment()
    src = root / "src"
    src.mkdir(parents=True, exist_ok=True)
    blobs: List[Dict[str, str]] = []
    model_contexts = []
    for plan in plans:
        blobs += _write_blobs(env, src, plan)
        model_contexts.append(
            {
                **_model_context(plan),
                "on_device": ptype.keeps_executor(plan),
                # The host's firmware measures each operator call's workspace (RUN reports it).
                "workspace_marks": len(plan.device_tables.ops) if board.is_host else 0,
            }
        )
    own = list(opts["compile_definitions"] or [])
    definitions = [f"{name}={value}" for name, value in board.compile_definitions().items()]
    given = {_macro(o) for o in own}
    definitions += [d for d in ptype.compile_definitions(plans, opts) if _macro(d) not in given]
    definitions += own
    if opts["profile"]:
        definitions.append("MLF_PROFILE=1")
    if board.is_host and WORKSPACE_MARKS_MACRO not in given:
        definitions.append(f"{WORKSPACE_MARKS_MACRO}=1")
    if not any(plan.memory is not None and plan.memory.tables().windows for plan in plans):
        definitions.append("MLF_WINDOWS=0")  # no operator has a window: no lending linked
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
        "runtime_lto": board.runtime_lto(),
        "definitions": definitions,
        "runtime_sources": runtime_sources,
        "seam_sources": seam_sources,
        "seam_include_dirs": seam_dirs,
        "blobs": blobs,
        "dependencies": dependencies,
        "shared_arena_bytes": shared_arena_bytes(plans),
        "sharing_models": sum(1 for plan in plans if plan.shares_arena),
        **ptype.context(plans, board, opts),
    }
    _check_own_definitions(own, set(board.compile_definitions()) | set(context.get("defines", {})))
    runtime_build = env.get_template("runtime_build.cmake.j2").render(context)
    (root / "runtime" / _RUNTIME_BUILD).write_text(runtime_build)
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
        "shared_arena_bytes": shared_arena_bytes(plans),
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
            shutil.copytree(path, target, dirs_exist_ok=True, ignore=_junk_names)
        else:
            shutil.copyfile(path, target)
        return (base / rel).as_posix()

    plan.sources = [place(p) for p in model.sources]
    plan.objects = [place(p) for p in model.objects]
    plan.include_dirs = [place(p) for p in model.include_dirs]
    # Headers beside the sources (TVM writes some models' headers there).
    for source in model.sources:
        for header in source.parent.glob("*.h"):
            if not is_junk(header.name):
                place(header)


def _junk_names(directory: str, names: List[str]) -> List[str]:
    """What macOS adds to a re-tarred archive (``._*``, ``__MACOSX``): not copied."""
    return [name for name in names if is_junk(name)]


# Runtime sources a project does not compile (build time is part of the product): TVM's
# graph-executor API needs TVMPlatformMemoryAllocate, which our firmware has no use for; the
# JSON parser only serves graph_format=json and project types that parse graph JSON sent at
# run time. Of template_project/firmware/ a project compiles what its type names
# (ProjectType.firmware_sources), plus the profile hooks when asked.
NOT_COMPILED = {"mlf_tvm_compat.c"}
_PROFILE_SOURCE = "mlf_profile.c"
JSON_ONLY = {"mlf_graph_json.c", "mlf_json.c"}


def _copy_runtime(root: Path, kind: ProjectType, graph_format: str, profile: bool) -> List[str]:
    crt = crt_dir()
    runtime = root / "runtime"
    shutil.copytree(crt / "include", runtime / "include")
    skip = set(NOT_COMPILED) | (JSON_ONLY if graph_format != "json" else set())
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
    shutil.copyfile(crt / _RUNTIME_CACHE_MODULE, runtime / _RUNTIME_CACHE_MODULE)
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


# Defined by the generated header whatever the options say.
_HEADER_MACROS = {"MLF_NUM_MODELS", "MLF_PROJECT_TYPE", "MLF_PROFILE"}


def _check_own_definitions(own: List[str], generated: set) -> None:
    """compile_definitions may override the project type's defaults (MLF_ERROR_TEXT, ...), not
    what the board or the generated header define: the compiler would see both."""
    for definition in own:
        macro = _macro(definition)
        if macro in generated | _HEADER_MACROS:
            raise GenerateError(
                f"option compile_definitions: {macro} is set by the generator for this board "
                "and project",
                hint="the board's TOML file and the project options set it",
            )


def _model_context(plan: ModelPlan) -> Dict[str, Any]:
    symbol = graph_symbol(plan)
    library = plan.library
    return {
        "executor": plan.kind.name,
        "registry_c": library.c_text,
        "library": library.library,
        "functions_linked": bool(library.func_ptrs),
        "name": plan.name,
        "c_name": plan.c_name,
        "c_name_literal": c_string(json_raw(plan.name)),
        "entry_point": plan.entry_point,
        "has_system_library": defines_system_library(plan.model.sources),
        "renames": [f"{old}={new}" for old, new in plan.renames.items()],
        "graph_format": plan.graph_format,
        "tables_c": tables_c(plan)[0] if plan.graph_format == "tables" else "",
        "tables_symbol": symbol,
        "parse_bytes": plan.parse_bytes,
        "arena_bytes": plan.arena_bytes,
        "in_place_count": len(plan.in_place),
        "workspace_bytes": plan.workspace.bytes,
        "workspace_ram_bytes": plan.separate_workspace_bytes,
        "workspace_how": plan.workspace.how,
        "windows": plan.memory is not None,
        "largest_window": plan.memory.largest_window if plan.memory is not None else 0,
        "needs_workspace": (
            plan.memory.largest_window if plan.memory is not None else plan.workspace.bytes
        )
        > 0,
        "shares_arena": plan.shares_arena,
        "state_expression": state_bytes_expression(plan.device_tables),
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


def graph_symbol(plan: ModelPlan) -> str:
    """The C name of the model's graph (tables format)."""
    return f"mlf_graph_{plan.c_name}"


def tables_c(plan: ModelPlan) -> Tuple[str, str]:
    """The model's graph tables as C for a file that includes them, and the graph's symbol."""
    symbol = graph_symbol(plan)
    text = render_c(
        plan.device_tables,
        symbol,
        {sid: f"mlf_params_{plan.c_name} + {at}" for sid, at in plan.params_layout.items()},
        plan.library.func_ptrs,
        plan.memory.tables() if plan.memory is not None else None,
    )
    return _tables_body(text, symbol), symbol


def _tables_body(text: str, symbol: str) -> str:
    """render_c's output without its own header lines, the graph made file-local."""
    lines = [
        line
        for line in text.splitlines()
        if not line.startswith("/* Generated") and not line.startswith("#include")
    ]
    body = "\n".join(lines).strip("\n")
    return body.replace(f"const mlf_graph {symbol} = {{", f"static const mlf_graph {symbol} = {{")
