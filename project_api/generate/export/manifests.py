"""The build files that make the export folder every package at once: the root
``CMakeLists.txt`` (add_subdirectory, top-level build + install + find_package, ESP-IDF
component) with ``cmake/<name>-config.cmake``; ``<name>.mk``; the Arduino library
(``library.properties``, an example sketch); PlatformIO's ``library.json``; the Zephyr module
(``zephyr/module.yml``, ``zephyr/CMakeLists.txt``, ``zephyr/Kconfig``); ESP-IDF's
``idf_component.yml``. ``--format`` chooses which; ``src/`` is always written."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, List

from ..plan import generator_version

PackageContext = Dict[str, Any]


def _render(env: Any, template: str, context: PackageContext) -> str:
    return str(env.get_template(template).render(context))


def _cmake(root: Path, env: Any, context: PackageContext) -> List[str]:
    (root / "CMakeLists.txt").write_text(_render(env, "CMakeLists.txt.j2", context))
    (root / "cmake").mkdir(exist_ok=True)
    written = ["CMakeLists.txt"]
    for model in context["models"]:
        path = root / "cmake" / f"{model['name']}-config.cmake"
        path.write_text(_render(env, "config.cmake.j2", {**context, **model}))
        written.append(path.relative_to(root).as_posix())
    return written


def _make(root: Path, env: Any, context: PackageContext) -> List[str]:
    written = []
    for model in context["models"]:
        path = root / f"{model['name']}.mk"
        path.write_text(_render(env, "model.mk.j2", {**context, **model}))
        written.append(path.name)
    return written


def _arduino(root: Path, env: Any, context: PackageContext) -> List[str]:
    (root / "library.properties").write_text(_render(env, "library.properties.j2", context))
    written = ["library.properties"]
    for model in context["models"]:
        sketch = f"{model['name']}_example"
        folder = root / "examples" / sketch
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{sketch}.ino").write_text(_render(env, "example.ino.j2", {**context, **model}))
        written.append(f"examples/{sketch}/{sketch}.ino")
    return written


def _platformio(root: Path, env: Any, context: PackageContext) -> List[str]:
    manifest = {
        "name": context["package"],
        "version": context["version"],
        "description": context["description"],
        "keywords": ["tvm", "tinyml", "machine-learning", "model"],
        # The runtime's licence; the model's terms are whoever trained it.
        "license": "Apache-2.0",
        "frameworks": "*",
        "platforms": "*",
        "headers": [m["header_name"] for m in context["models"]],
        "build": {"srcDir": "src", "includeDir": "src", "libArchive": True},
        "export": {"exclude": ["zephyr", "cmake", "*.mk", "idf_component.yml", "export.json"]},
        "examples": [
            {
                "name": f"{m['name']}_example",
                "base": f"examples/{m['name']}_example",
                "files": [f"{m['name']}_example.ino"],
            }
            for m in context["models"]
        ],
    }
    (root / "library.json").write_text(
        _render(env, "library.json.j2", {**context, "manifest": manifest})
    )
    return ["library.json"]


def _zephyr(root: Path, env: Any, context: PackageContext) -> List[str]:
    folder = root / "zephyr"
    folder.mkdir(exist_ok=True)
    (folder / "module.yml").write_text(_render(env, "module.yml.j2", context))
    (folder / "CMakeLists.txt").write_text(_render(env, "zephyr_CMakeLists.txt.j2", context))
    (folder / "Kconfig").write_text(_render(env, "Kconfig.j2", context))
    return ["zephyr/module.yml", "zephyr/CMakeLists.txt", "zephyr/Kconfig"]


def _espidf(root: Path, env: Any, context: PackageContext) -> List[str]:
    (root / "idf_component.yml").write_text(_render(env, "idf_component.yml.j2", context))
    return ["idf_component.yml"]


# format -> its writer; ESP-IDF's component also needs the root CMakeLists.txt (cmake).
WRITERS: Dict[str, Callable[[Path, Any, PackageContext], List[str]]] = {
    "cmake": _cmake,
    "make": _make,
    "arduino": _arduino,
    "platformio": _platformio,
    "zephyr": _zephyr,
    "espidf": _espidf,
}


def write_manifests(root: Path, env: Any, formats: List[str], context: PackageContext) -> List[str]:
    written: List[str] = []
    wanted = list(formats)
    if "espidf" in wanted and "cmake" not in wanted:
        wanted.insert(0, "cmake")  # idf_component_register lives in the root CMakeLists.txt
    for name in wanted:
        written += WRITERS[name](root, env, context)
    return written


def package_context(
    package: str,
    target: str,
    runtime: List[str],
    models: List[Dict[str, Any]],
) -> PackageContext:
    names = ", ".join(m["name"] for m in models)
    return {
        "package": package,
        "version": generator_version(),
        "generator_version": generator_version(),
        "target": target,
        "runtime_sources": runtime,
        "models": models,
        "description": f"TVM model{'s' if len(models) > 1 else ''} {names} as a C library: "
        "exact arena size, params in flash, no malloc",
    }
