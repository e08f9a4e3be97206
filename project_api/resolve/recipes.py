"""Build recipes: which files of a dependency are compiled, and the CMake text that does it.

Recipes (``Recipe.kind``, chosen by short_name unless the dependency's ``recipe`` overrides):

- ``cmsis-nn``: CMSIS-NN >= 4 (``Source/*Functions/*.c``, ``Include/``) or the CMSIS 5 tree
  (``CMSIS/NN/Source/*Functions/*.c``, ``CMSIS/NN/Include``, ``CMSIS/Core/Include``,
  ``CMSIS/DSP/Include``; a path pointing at ``CMSIS_5/CMSIS/NN`` is taken from the top).
  CMSIS-NN chooses its DSP and MVE code from the compiler's predefined macros
  (``__ARM_FEATURE_DSP``, ``__ARM_FEATURE_MVE``), which follow ``-mcpu``; so it is compiled
  with the board's CPU flags, minus the features TVM did not assume when it generated the
  calls (``-U__ARM_FEATURE_DSP``…, see :mod:`.features`: TVM sizes the kernels' scratch
  buffers for its target's CPU) unless the adapter (``crt/cmsis_nn/``) serves them. On the
  host (no ``-mcpu``) it builds its portable C. A firmware compiles only the files its calls
  need, and float kernels only where they build (:mod:`..cmsis_nn.sources`).
  Its own sources get ``-include stdint.h``: ``arm_nn_compiler.h`` uses ``uint32_t``
  before including it and only Arm toolchains happen to pull it in first (the public
  headers TVM's code includes are fine; the library's users never see the option).
- ``generic``: the dependency's own ``CMakeLists.txt`` (``add_subdirectory`` and link
  ``recipe.targets``, default: the short_name), else by convention: sources ``src/**/*.c``,
  else ``Source/**/*.c``, else top-level ``*.c``; include dirs ``include/`` or ``Include/``,
  else the top level if it holds headers. An override with ``sources``/``include_dirs`` globs
  replaces the convention; ``defines`` are added as compile definitions.
- ``cmake``: always the dependency's own ``CMakeLists.txt``.
- ``none``: not compiled (TVM's ``tvm_standalone_crt``: we bring our own runtime).

The fragment contract is in :func:`cmake_fragment`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ..cmsis_nn.sources import CmsisNnCompile, float_sources, needed_sources
from ..errors import DependencyError
from .resolved import ResolvedDependency
from .spec import Recipe

_NN_HEADER = "arm_nnfunctions.h"


@dataclass(frozen=True)
class BuildPlan:
    """What to copy into the project and compile, relative to the dependency's root."""

    kind: str  # "sources", "cmake" or "none"
    layout: str  # for humans: "CMSIS-NN >= 4", "CMSIS 5", "own CMakeLists.txt", ...
    copy: Tuple[str, ...] = ()  # files/dirs to place in the project; ("",) = the whole tree
    sources: Tuple[str, ...] = ()
    include_dirs: Tuple[str, ...] = ()
    defines: Tuple[str, ...] = ()
    targets: Tuple[str, ...] = ()
    host_force_includes: Tuple[str, ...] = ()


def _rel_files(root: Path, pattern: str) -> List[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.glob(pattern) if p.is_file())


def _licenses(root: Path) -> Tuple[str, ...]:
    return tuple(
        sorted(
            p.name
            for p in root.iterdir()
            if p.is_file() and re.match(r"(?i)^(license|licence|copying|notice)", p.name)
        )
    )


def cmsis_nn_root(path: Path) -> Path:
    """The top of a CMSIS tree: ``CMSIS_5/CMSIS/NN`` given, ``CMSIS_5`` returned."""
    if (
        path.name == "NN"
        and path.parent.name == "CMSIS"
        and (path / "Include" / _NN_HEADER).is_file()
        and (path.parent / "Core" / "Include").is_dir()
    ):
        return path.parent.parent
    return path


def _chosen_sources(
    root: Path, sources: List[str], includes: Sequence[str], compile: Optional[CmsisNnCompile]
) -> Tuple[Tuple[str, ...], Tuple[str, ...]]:
    """The sources a firmware compiles (only what it calls, when it says) and the definitions
    that enable the float kernels among them (:mod:`..cmsis_nn.sources`)."""
    if compile is not None and compile.roots is not None:
        sources = needed_sources(root, sources, includes, compile.roots) or sources
    kept, defines = float_sources(sources, bool(compile and compile.fp16))
    return tuple(kept), defines


def _cmsis_nn_plan(root: Path, what: str, compile: Optional[CmsisNnCompile] = None) -> BuildPlan:
    if (root / "Include" / _NN_HEADER).is_file() and (root / "Source").is_dir():
        sources = _rel_files(root, "Source/*/*.c")
        if not sources:
            raise DependencyError(f"{what}: CMSIS-NN at {root} has no Source/*Functions/*.c")
        chosen, defines = _chosen_sources(root, sources, ("Include",), compile)
        return BuildPlan(
            kind="sources",
            layout="CMSIS-NN >= 4",
            copy=("Include", "Source") + _licenses(root),
            sources=chosen,
            include_dirs=("Include",),
            defines=defines,
            host_force_includes=("stdint.h",),
        )
    nn = root / "CMSIS" / "NN"
    if (nn / "Include" / _NN_HEADER).is_file() and (nn / "Source").is_dir():
        sources = _rel_files(root, "CMSIS/NN/Source/*/*.c")
        includes = ["CMSIS/NN/Include", "CMSIS/DSP/Include", "CMSIS/Core/Include"]
        if (root / "CMSIS" / "DSP" / "PrivateInclude").is_dir():
            includes.append("CMSIS/DSP/PrivateInclude")
        missing = [d for d in includes if not (root / d).is_dir()]
        if missing:
            raise DependencyError(
                f"{what}: the CMSIS 5 tree at {root} lacks {', '.join(missing)}",
                hint="CMSIS 5's NN needs CMSIS/Core/Include and CMSIS/DSP/Include beside it",
            )
        chosen, defines = _chosen_sources(root, sources, includes, compile)
        return BuildPlan(
            kind="sources",
            layout="CMSIS 5",
            copy=tuple(["CMSIS/NN/Source"] + includes) + _licenses(root),
            sources=chosen,
            include_dirs=tuple(includes),
            defines=defines,
            host_force_includes=("stdint.h",),
        )
    hint = "point cmsis_path (or the cmsis-nn dependency) at a CMSIS-NN or CMSIS_5 checkout"
    if (root / "HEAD").is_file() and (root / "objects").is_dir():
        hint = (
            "it is a bare git repository: give it as a git dependency, "
            f"--dependency short_name=cmsis-nn,url={root.resolve().as_uri()},url_type=git,"
            "version_spec=v4.1.0"
        )
    raise DependencyError(
        f"{what}: {root} is not a CMSIS-NN tree: neither Include/{_NN_HEADER} + Source/ "
        f"(CMSIS-NN >= 4) nor CMSIS/NN/Include/{_NN_HEADER} (CMSIS 5)",
        hint=hint,
    )


def _generic_plan(root: Path, recipe: Recipe, what: str) -> BuildPlan:
    if recipe.sources or recipe.include_dirs:
        sources: List[str] = []
        for pattern in recipe.sources:
            found = _rel_files(root, pattern)
            if not found:
                raise DependencyError(f"{what}: recipe sources {pattern!r} match no file in {root}")
            sources += [s for s in found if s not in sources]
        for inc in recipe.include_dirs:
            if not (root / inc).is_dir():
                raise DependencyError(f"{what}: recipe include dir {inc!r} is not in {root}")
        return BuildPlan(
            kind="sources",
            layout="recipe override",
            copy=("",),
            sources=tuple(sources),
            include_dirs=recipe.include_dirs,
            defines=recipe.defines,
        )
    if recipe.kind == "cmake" or (root / "CMakeLists.txt").is_file():
        if not (root / "CMakeLists.txt").is_file():
            raise DependencyError(f"{what}: recipe 'cmake' but {root} has no CMakeLists.txt")
        return BuildPlan(
            kind="cmake",
            layout="own CMakeLists.txt",
            copy=("",),
            defines=recipe.defines,
            targets=recipe.targets,
        )
    found = []
    for pattern in ("src/**/*.c", "Source/**/*.c", "*.c"):
        found = _rel_files(root, pattern)
        if found:
            break
    includes = [d for d in ("include", "Include") if (root / d).is_dir()]
    if not includes and any(root.glob("*.h")):
        includes = ["."]
    if not found and not includes:
        raise DependencyError(
            f"{what}: found nothing to build in {root} (no CMakeLists.txt, no src/*.c, "
            "Source/*.c or *.c, no include/ or headers)",
            hint="give the dependency a recipe: sources=<globs>,include_dirs=<dirs>",
        )
    return BuildPlan(
        kind="sources",
        layout="conventional layout",
        copy=("",),
        sources=tuple(found),
        include_dirs=tuple(includes),
        defines=recipe.defines,
    )


def plan_build(
    root: Path,
    recipe: Recipe,
    what: str = "dependency",
    compile: Optional[CmsisNnCompile] = None,
) -> BuildPlan:
    """The build plan of the dependency whose files are at ``root`` (``compile``: how a
    firmware compiles CMSIS-NN, for the ``cmsis-nn`` recipe)."""
    kind = recipe.kind or "generic"
    if kind == "none":
        return BuildPlan(kind="none", layout="not compiled")
    if not root.is_dir():
        raise DependencyError(f"{what}: {root} is not a directory")
    if kind == "cmsis-nn":
        plan = _cmsis_nn_plan(root, what, compile)
        if recipe.defines:
            plan = BuildPlan(**{**plan.__dict__, "defines": plan.defines + recipe.defines})
        return plan
    return _generic_plan(root, recipe, what)


# --- CPU flags ----------------------------------------------------------------------------

# The FPU of each Cortex-M core that has one, for a CPU description that only says "has FPU".
_DEFAULT_FPU = {
    "cortex-m4": "fpv4-sp-d16",
    "cortex-m7": "fpv5-d16",
    "cortex-m33": "fpv5-sp-d16",
    "cortex-m35p": "fpv5-sp-d16",
    "cortex-m55": "auto",
    "cortex-m85": "auto",
}
_FLAG = re.compile(r"^-[A-Za-z0-9_=+.,:/-]+$")
_HOST_CPUS = ("", "host", "native", "x86_64", "x86-64", "amd64", "aarch64-host")


def _get(cpu: Any, *names: str) -> Any:
    for name in names:
        if isinstance(cpu, dict) and name in cpu:
            return cpu[name]
        if not isinstance(cpu, dict) and getattr(cpu, name, None) is not None:
            return getattr(cpu, name)
    return None


def cpu_flags(cpu: Any) -> List[str]:
    """Compiler flags for a CPU description (an object or dict; ``None`` = the host).

    Reads ``cflags``/``compile_flags`` (a list, used as is) or ``mcpu``, ``fpu`` (a name such
    as ``fpv4-sp-d16``, True for the core's usual FPU, False/None/"none" for none) and
    ``float_abi``. ``dsp``/``mve`` are not turned into flags: ``-mcpu`` (with ``+nodsp``/
    ``+nomve`` suffixes where a board lacks them) already decides, and CMSIS-NN reads it back
    from the compiler's macros.
    """
    if cpu is None:
        return []
    given = _get(cpu, "cflags", "compile_flags")
    if given:
        flags = [str(f) for f in given]
    else:
        mcpu = _get(cpu, "mcpu", "cpu")
        if not mcpu or str(mcpu).lower() in _HOST_CPUS:
            return []
        mcpu = str(mcpu)
        flags = [f"-mcpu={mcpu}", "-mthumb"]
        fpu = _get(cpu, "fpu", "mfpu")
        float_abi = _get(cpu, "float_abi", "mfloat_abi")
        if fpu is True:
            fpu = _DEFAULT_FPU.get(mcpu.split("+")[0])
        if isinstance(fpu, str) and fpu.lower() not in ("", "none", "soft", "false"):
            flags += [f"-mfpu={fpu}", f"-mfloat-abi={float_abi or 'hard'}"]
        elif float_abi:
            flags.append(f"-mfloat-abi={float_abi}")
    for flag in flags:
        if not _FLAG.match(flag):
            raise DependencyError(f"CPU flag {flag!r} is not a plain compiler option")
    return flags


# --- CMake --------------------------------------------------------------------------------


def _quote(text: str) -> str:
    """A CMake quoted argument holding ``text`` literally."""
    escaped = "".join("\\" + ch if ch in '\\"$;' else ch for ch in text)
    escaped = escaped.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return f'"{escaped}"'


def cmake_target_name(short_name: str, taken: Sequence[str] = ()) -> str:
    base = "mlf_dep_" + re.sub(r"[^A-Za-z0-9_]", "_", short_name)
    name, index = base, 2
    while name in taken:
        name, index = f"{base}_{index}", index + 1
    return name


def _location(root: Path, fragment_dir: Path) -> str:
    """``${CMAKE_CURRENT_LIST_DIR}/<rel>`` when inside the fragment's directory, else absolute."""
    root_abs = root.resolve()
    base = fragment_dir.resolve()
    try:
        rel = root_abs.relative_to(base).as_posix()
    except ValueError:
        return root_abs.as_posix()
    return "${CMAKE_CURRENT_LIST_DIR}" + ("" if rel == "." else "/" + rel)


def _join(location: str, rel: str) -> str:
    rel = rel.strip("/")
    return location if rel in ("", ".") else f"{location}/{rel}"


def _loc_quote(location: str, rel: str) -> str:
    # The ${CMAKE_CURRENT_LIST_DIR} prefix must stay expandable; everything else is literal.
    prefix = "${CMAKE_CURRENT_LIST_DIR}"
    full = _join(location, rel)
    if full.startswith(prefix):
        return '"' + prefix + _quote(full[len(prefix) :])[1:]
    return _quote(full)


def dependency_root(dep: ResolvedDependency, project_dir: Path) -> Optional[Path]:
    """Where the dependency's files are for the build: its placed copy, else its path."""
    if dep.placed:
        return project_dir / dep.placed
    return dep.path


def cmake_fragment(
    resolved: Sequence[ResolvedDependency],
    *,
    project_dir: Path,
    cpu: Any = None,
    target_name: Union[str, Sequence[str]] = "firmware",
    fragment_dir: Optional[Path] = None,
    cmsis_nn_flags: Sequence[str] = (),
    cmsis_nn: Optional[CmsisNnCompile] = None,
) -> str:
    """CMake text that compiles the dependencies and links them to the firmware target(s).

    Contract with the CMakeLists.txt that ``include()``\\ s it (from ``fragment_dir``, default
    ``project_dir``; all paths are relative to ``${CMAKE_CURRENT_LIST_DIR}`` when the files
    are under it):

    - the target(s) ``target_name`` (a name or a list: e.g. the firmware and a model object
      library) exist before the include; each gets ``target_link_libraries(<t> PRIVATE …)``
      of every dependency library, which carries the include dirs (``PUBLIC``/``INTERFACE``);
    - ``MLF_DEPS_CPU_FLAGS`` (a list) is used for the dependency sources if the includer set
      it; otherwise the fragment sets it from ``cpu`` (:func:`cpu_flags`). Pass ``cpu=None``
      when the toolchain file already puts the CPU flags in ``CMAKE_C_FLAGS``;
    - ``MLF_DEPS_OPT_FLAGS`` (default ``-O2``) is the optimisation of dependency sources
      (placed after the build type's flags, so it wins; CMSIS-NN's MVE code needs -O1+);
    - it defines one library ``mlf_dep_<short_name>`` per compiled dependency (static, or
      INTERFACE for header-only), compiled with ``-w`` (third-party code: no warnings, so the
      project's ``-Werror`` never trips on it), and sets ``MLF_DEPENDENCY_TARGETS`` to their
      list (dependencies with their own CMakeLists.txt contribute their targets);
    - ``cmsis_nn_flags`` (e.g. ``-U__ARM_FEATURE_DSP``, from :func:`.features.cmsis_nn_build`)
      are PUBLIC compile options of a CMSIS-NN library: the library and the code calling it
      see the CPU features TVM generated the code for, not more;
    - ``cmsis_nn`` (:class:`..cmsis_nn.sources.CmsisNnCompile`): a CMSIS-NN library compiles
      only the files the firmware's calls need (float16 kernels only where the CPU has MVE-F),
      and the adapter's C files are compiled into it: the library's users (the models' code)
      call its ``mlf_cmsis_nn_*`` functions instead of the kernels TVM named (INTERFACE
      definitions ``arm_X=mlf_cmsis_nn_X``);
    - no ``cmake_minimum_required``/``project`` inside; C language must be enabled.
    """
    fragment_base = fragment_dir or project_dir
    targets = [target_name] if isinstance(target_name, str) else list(target_name)
    if not targets:
        raise DependencyError("cmake_fragment: no target to link the dependencies to")
    flags = cpu_flags(cpu)
    for flag in cmsis_nn_flags:
        if not _FLAG.match(flag):
            raise DependencyError(f"CMSIS-NN flag {flag!r} is not a plain compiler option")
    lines: List[str] = [
        "# Generated by mlf-project-api: the model's external dependencies.",
        "# Pinned in dependencies.lock.json; do not edit (regenerate the project instead).",
        "if(NOT DEFINED MLF_DEPS_CPU_FLAGS)",
        "  set(MLF_DEPS_CPU_FLAGS " + (" ".join(_quote(f) for f in flags) or '""') + ")",
        "endif()",
        "# Optimised even in unoptimised builds: CMSIS-NN's MVE inline assembly needs -O1+.",
        "if(NOT DEFINED MLF_DEPS_OPT_FLAGS)",
        "  set(MLF_DEPS_OPT_FLAGS -O2)",
        "endif()",
        'set(MLF_DEPENDENCY_TARGETS "")',
    ]
    for target in targets:
        lines += [
            f"if(NOT TARGET {target})",
            f'  message(FATAL_ERROR "deps.cmake: define target {target} before including it")',
            "endif()",
        ]
    taken: List[str] = []
    for dep in resolved:
        if dep.skipped:
            why = "TVM's runtime; the project has its own" if dep.spec.is_tvm_crt else "recipe none"
            lines += ["", f"# {dep.short_name}: not compiled ({why})"]
            continue
        root = dependency_root(dep, project_dir)
        if root is None:
            raise DependencyError(f"{dep.short_name}: has no directory to build from")
        plan = plan_build(root, dep.recipe, dep.short_name, cmsis_nn)
        location = _location(root, fragment_base)
        pin = f" @ {dep.resolved[:12]}" if dep.resolved else ""
        version = f" {dep.spec.version_spec}" if dep.spec.version_spec else ""
        lines += [
            "",
            f"# {dep.short_name}: {dep.spec.url_type}{version}{pin}, {plan.layout}",
        ]
        if plan.kind == "cmake":
            binary = '"${CMAKE_BINARY_DIR}/mlf_deps/' + dep.short_name + '"'
            lines.append(f"{_OWN_CMAKE}{_loc_quote(location, '')} {binary} EXCLUDE_FROM_ALL)")
            for name in plan.targets or (dep.short_name,):
                lines += [
                    f"if(NOT TARGET {name})",
                    f'  message(FATAL_ERROR "dependency {dep.short_name}: its CMakeLists.txt '
                    f'defines no target {name}; give its recipe targets=<names>")',
                    "endif()",
                ]
                if plan.defines:
                    lines.append(
                        f"target_compile_definitions({name} INTERFACE "
                        + " ".join(_quote(d) for d in plan.defines)
                        + ")"
                    )
                for target in targets:
                    lines.append(f"target_link_libraries({target} PRIVATE {name})")
                lines.append(f"list(APPEND MLF_DEPENDENCY_TARGETS {name})")
            continue
        lib = cmake_target_name(dep.short_name, taken)
        taken.append(lib)
        includes = " ".join(_loc_quote(location, inc) for inc in plan.include_dirs)
        if plan.sources:
            lines.append(f"add_library({lib} STATIC")
            lines += [f"  {_loc_quote(location, src)}" for src in plan.sources]
            lines.append(")")
            if includes:
                lines.append(f"target_include_directories({lib} SYSTEM PUBLIC {includes})")
            lines.append(
                f"target_compile_options({lib} PRIVATE "
                "${MLF_DEPS_CPU_FLAGS} ${MLF_DEPS_OPT_FLAGS} -w)"
            )
            scope = "PUBLIC"
        else:
            lines.append(f"add_library({lib} INTERFACE)")
            if includes:
                lines.append(f"target_include_directories({lib} SYSTEM INTERFACE {includes})")
            scope = "INTERFACE"
        if plan.defines:
            lines.append(
                f"target_compile_definitions({lib} {scope} "
                + " ".join(_quote(d) for d in plan.defines)
                + ")"
            )
        if plan.host_force_includes:
            forced = " ".join(
                '"$<$<COMPILE_LANGUAGE:C>:SHELL:-include ' + h + '>"'
                for h in plan.host_force_includes
            )
            lines += [
                "# Off-Arm compilers need stdint.h before arm_nn_compiler.h (harmless on Arm).",
                "# PRIVATE: forced into the firmware's files it would defeat their feature macros.",
                'if(NOT CMAKE_C_COMPILER_ID STREQUAL "MSVC")',
                f"  target_compile_options({lib} PRIVATE {forced})",
                "endif()",
            ]
        if cmsis_nn_flags and dep.recipe.kind == "cmsis-nn" and plan.sources:
            lines += [
                "# The CPU features TVM generated the calls for (it sized the scratch buffers",
                "# for them); the board's compiler would otherwise select code that needs more.",
                f"target_compile_options({lib} PUBLIC "
                + " ".join(_quote(f) for f in cmsis_nn_flags)
                + ")",
            ]
        if cmsis_nn is not None and dep.recipe.kind == "cmsis-nn" and plan.sources:
            lines += cmsis_nn.fragment_lines(lib)
        for target in targets:
            lines.append(f"target_link_libraries({target} PRIVATE {lib})")
        lines.append(f"list(APPEND MLF_DEPENDENCY_TARGETS {lib})")
    return "\n".join(lines) + "\n"


def describe_plans(
    resolved: Sequence[ResolvedDependency], project_dir: Path
) -> Dict[str, BuildPlan]:
    """The build plan of every compiled dependency, by short_name (for reports)."""
    plans: Dict[str, BuildPlan] = {}
    for dep in resolved:
        root = dependency_root(dep, project_dir)
        if dep.skipped or root is None:
            continue
        plans[dep.short_name] = plan_build(root, dep.recipe, dep.short_name)
    return plans


# How a CMake fragment runs a dependency's own CMakeLists.txt.
_OWN_CMAKE = "add_subdirectory("


def runs_own_cmake(fragment: str) -> bool:
    """Whether a ``deps.cmake`` this module wrote runs a dependency's own CMake code."""
    return any(line.lstrip().startswith(_OWN_CMAKE) for line in fragment.splitlines())
