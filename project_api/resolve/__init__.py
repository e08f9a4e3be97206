"""Resolve a model's ``external_dependencies``: fetch them into a cache, pin them in a lock
file, place them in the generated project and compile them into the firmware.

Typical use by the project generator::

    specs = collect_dependencies(
        [m.external_dependencies for m in archive.models],
        overrides=options.get("dependencies", ()),   # dicts or "short_name=…,url=…" strings
        cmsis_path=options.get("cmsis_path"),
        model_names=[m.name for m in archive.models],
    )
    require_cmsis_nn(model.sources, specs)             # generated C calls arm_* kernels?
    policy = TrustPolicy.from_options(options)         # what the user allows the archive
    check_trust(specs, policy, archive_root=archive.root, base_dir=archive_path.parent)
    lock = read_lock(project / LOCK_FILE_NAME) if (project / LOCK_FILE_NAME).exists() else None
    resolved = resolve_dependencies(specs, archive_root=archive.root,
                                    base_dir=archive_path.parent, lock=lock,
                                    offline=options.get("offline", False),
                                    progress=log, notify=warn, policy=policy)
    check_builds(resolved, policy)                     # no archive dependency's own CMake
    cmsis = cmsis_nn_build([(model.name, assumed_features(model.targets))], board.cpu)
    install_dependencies(resolved, project, cpu=board.cpu, target_name="firmware", lock=lock,
                         cmsis_nn_flags=cmsis.flags)
    # CMakeLists.txt: add_executable(firmware …) then include(${CMAKE_CURRENT_LIST_DIR}/deps.cmake)
"""

from __future__ import annotations

from ..cmsis_nn.features import (
    CmsisNnBuild,
    CpuFeatures,
    assumed_features,
    cmsis_nn_build,
    parse_target,
)
from .cache import ENV_CACHE, Cache, CacheEntry, cache_key, default_cache_dir
from .detect import (
    detect_cmsis_nn,
    find_cmsis_nn_uses,
    refuse_cmsis_nn_off_arm,
    require_cmsis_nn,
)
from .extract import safe_extract
from .lock import (
    LOCK_FILE_NAME,
    LockEntry,
    LockFile,
    lock_from,
    read_lock,
    reusable_lock,
    specs_from_lock,
    write_lock,
)
from .place import (
    DEPS_DIR,
    FRAGMENT_NAME,
    install_dependencies,
    place_dependencies,
    tree_digest,
)
from .recipes import BuildPlan, cmake_fragment, cpu_flags, plan_build
from .resolved import ResolvedDependency
from .resolver import TVM_CRT_NOTE, check_dependencies, resolve_dependencies
from .spec import (
    CMSIS_NN,
    CMSIS_NN_DEPENDENCY_FLAG,
    TVM_CRT,
    DependencySpec,
    Recipe,
    cmsis_path_dependency,
    collect_dependencies,
    parse_dependency,
    parse_dependency_string,
)
from .trust import TrustPolicy, Verdict, assess, check_builds, check_trust

__all__ = [
    "CMSIS_NN",
    "CMSIS_NN_DEPENDENCY_FLAG",
    "DEPS_DIR",
    "ENV_CACHE",
    "FRAGMENT_NAME",
    "LOCK_FILE_NAME",
    "TVM_CRT",
    "TVM_CRT_NOTE",
    "BuildPlan",
    "Cache",
    "CacheEntry",
    "CmsisNnBuild",
    "CpuFeatures",
    "DependencySpec",
    "LockEntry",
    "LockFile",
    "Recipe",
    "ResolvedDependency",
    "TrustPolicy",
    "Verdict",
    "assess",
    "assumed_features",
    "cache_key",
    "check_builds",
    "check_dependencies",
    "check_trust",
    "cmsis_nn_build",
    "cmake_fragment",
    "cmsis_path_dependency",
    "collect_dependencies",
    "cpu_flags",
    "default_cache_dir",
    "detect_cmsis_nn",
    "find_cmsis_nn_uses",
    "install_dependencies",
    "lock_from",
    "parse_dependency",
    "parse_dependency_string",
    "parse_target",
    "place_dependencies",
    "plan_build",
    "read_lock",
    "refuse_cmsis_nn_off_arm",
    "require_cmsis_nn",
    "resolve_dependencies",
    "reusable_lock",
    "safe_extract",
    "specs_from_lock",
    "tree_digest",
    "write_lock",
]
