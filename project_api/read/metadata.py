"""metadata.json of every MLF version (1-7), normalised into one record per model.

Shapes TVM wrote (spec mlf.md):
- v1-v6: flat, one model; ``target`` a dict ``{"<device type>": "<target>"}`` up to v5 and a
  list from v6; very early archives call ``executors`` ``runtimes``; ``style`` since v4.
- v7: ``{"version": 7, "modules": {"<mod>": {...per-model keys...}}}`` - except operator-style
  archives (from ``tvm.build``), which stay flat even in v7.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..errors import MetadataError
from .graph import MAX_TENSOR_BYTES as MAX_SIZE_BYTES  # the runtime's 32-bit byte counts

MEMBER = "metadata.json"
MIN_VERSION = 1
MAX_VERSION = 7
# Device type of the host CPU (kDLCPU): the device whose workspace the firmware provides.
HOST_DEVICE = 1
EXECUTORS = ("graph", "aot")
STYLES = ("full-model", "operator")
DEPENDENCY_KEYS = ("short_name", "url", "url_type")
# A model name becomes file names, C identifiers and text in CMakeLists.txt: besides these,
# only non-ASCII letters (and their combining marks) are allowed in it.
NAME_PUNCTUATION = "_-."
NAME_RULE = "ASCII letters, digits, '_', '-', '.' and non-ASCII letters"
# ... and the file names built from it (samples_<name>.bin, <name>_lib0.c.o) stay under 255.
MAX_NAME_BYTES = 200
# Names the main function had in the v5 list form of memory.functions.
_MAIN_NAMES = ("main", "__tvm_main__")


PathFn = Callable[[str], str]  # key -> JSON path of that key in the per-model dict


@dataclass
class ModelMetadata:
    """One model's metadata, normalised; ``raw`` is the per-model dict as written."""

    name: str
    executor: str  # "graph" | "aot" | "operator"
    style: str
    targets: List[str]
    workspace_bytes: int
    external_dependencies: List[dict]
    raw: Dict[str, Any]
    location: str  # JSON path of the per-model dict ("" when flat, "modules.<mod>" in v7)


def parse_metadata(data: Any) -> Tuple[int, List[ModelMetadata]]:
    """Validate metadata.json; return ``(version, [ModelMetadata, ...])``."""
    if not isinstance(data, dict):
        raise MetadataError(MEMBER, "", "top level must be a JSON object")
    version = _parse_version(data)
    if version >= 7 and "modules" in data:
        return version, _parse_modules(data["modules"], version)
    if version >= 7 and data.get("style") != "operator":
        raise MetadataError(
            MEMBER, "modules", "missing (version 7 keeps models under 'modules' unless operator)"
        )
    return version, [_parse_model(data, version, "")]


def _parse_version(data: Dict[str, Any]) -> int:
    if "version" not in data:
        raise MetadataError(MEMBER, "version", "missing")
    version = data["version"]
    if not _is_int(version):
        raise MetadataError(MEMBER, "version", f"must be an integer, got {version!r}")
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise MetadataError(
            MEMBER,
            "version",
            f"unsupported version {version} (this tool reads {MIN_VERSION}..{MAX_VERSION})",
        )
    return int(version)


def _parse_modules(modules: Any, version: int) -> List[ModelMetadata]:
    if not isinstance(modules, dict) or not modules:
        raise MetadataError(MEMBER, "modules", "must be a non-empty object of models")
    models = []
    for key, raw in modules.items():
        _check_name(key, "modules")  # before the key becomes part of a location
        where = f"modules.{key}"
        if not isinstance(raw, dict):
            raise MetadataError(MEMBER, where, "must be an object")
        model = _parse_model(raw, version, where)
        if model.name != key:
            raise MetadataError(
                MEMBER, f"{where}.model_name", f"is {model.name!r} but the module key is {key!r}"
            )
        models.append(model)
    return models


def _parse_model(raw: Dict[str, Any], version: int, where: str) -> ModelMetadata:
    def path(key: str) -> str:
        return f"{where}.{key}" if where else key

    name = _require(raw, "model_name", str, path)
    _check_name(name, path("model_name"))
    style = _parse_style(raw, version, path)
    executor = _parse_executor(raw, style, path)
    memory = raw.get("memory", {})
    if not isinstance(memory, (dict, list)):
        raise MetadataError(MEMBER, path("memory"), "must be an object")
    return ModelMetadata(
        name=name,
        executor=executor,
        style=style,
        targets=_parse_targets(raw, path),
        workspace_bytes=_main_workspace(memory, path("memory")),
        external_dependencies=_parse_dependencies(raw, path),
        raw=raw,
        location=where,
    )


def _check_name(name: str, where: str) -> None:
    """A model name names files and C identifiers and is written into CMakeLists.txt."""
    if not name or "/" in name or name in (".", ".."):
        raise MetadataError(MEMBER, where, f"not a usable model name: {name!r}")
    bad = next((char for char in name if not _name_char(char)), None)
    if bad is not None:
        raise MetadataError(
            MEMBER,
            where,
            f"model name {_shown(name)} contains {_describe_char(bad)}; it may hold only "
            f"{NAME_RULE}",
        )
    size = len(name.encode("utf-8"))
    if size > MAX_NAME_BYTES:
        raise MetadataError(
            MEMBER,
            where,
            f"model name {_shown(name)} is {size} bytes long; it may be at most "
            f"{MAX_NAME_BYTES} (file names are built from it)",
        )


def _name_char(char: str) -> bool:
    if char.isascii():
        return char.isalnum() or char in NAME_PUNCTUATION
    return unicodedata.category(char)[0] in "LM"  # letters, combining marks (é as e + ´)


def _describe_char(char: str) -> str:
    kind = unicodedata.category(char)
    if kind == "Cc":
        what = "the control character"
    elif char.isspace():
        what = "the whitespace"
    elif kind[0] == "C":
        what = "the invisible or unassigned character"
    else:
        what = "the character"
    return f"{what} {char!r} (U+{ord(char):04X})"


def _shown(name: str) -> str:
    return repr(name) if len(name) <= 64 else repr(name[:60]) + "..."


def _require(raw: Dict[str, Any], key: str, kind: type, path: PathFn) -> Any:
    if key not in raw:
        raise MetadataError(MEMBER, path(key), "missing")
    if not isinstance(raw[key], kind):
        raise MetadataError(MEMBER, path(key), f"must be a {kind.__name__}, got {raw[key]!r}")
    return raw[key]


def _parse_style(raw: Dict[str, Any], version: int, path: PathFn) -> str:
    if "style" not in raw:
        if version >= 4:
            raise MetadataError(MEMBER, path("style"), "missing (required since version 4)")
        return "full-model"
    style = raw["style"]
    if style not in STYLES:
        raise MetadataError(MEMBER, path("style"), f"must be one of {STYLES}, got {style!r}")
    return str(style)


def _parse_executor(raw: Dict[str, Any], style: str, path: PathFn) -> str:
    key = "executors" if "executors" in raw or "runtimes" not in raw else "runtimes"
    executors = _require(raw, key, list, path)
    if style == "operator":
        return "operator"
    if len(executors) != 1 or executors[0] not in EXECUTORS:
        raise MetadataError(
            MEMBER, path(key), f"a full model needs exactly one of {EXECUTORS}, got {executors!r}"
        )
    return str(executors[0])


def _parse_targets(raw: Dict[str, Any], path: PathFn) -> List[str]:
    target = raw.get("target")
    if isinstance(target, dict):  # v1-v5: {"<device type>": "<target string>"}
        values = [target[key] for key in sorted(target, key=_device_order)]
    elif isinstance(target, list):  # v6+
        values = list(target)
    else:
        raise MetadataError(MEMBER, path("target"), f"must be an object or a list, got {target!r}")
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise MetadataError(MEMBER, f"{path('target')}[{i}]", f"not a string: {value!r}")
    return [value.strip() for value in values]


def _device_order(key: str) -> tuple:
    return (0, int(key), "") if str(key).isdigit() else (1, 0, str(key))


def _parse_dependencies(raw: Dict[str, Any], path: PathFn) -> List[dict]:
    deps = raw.get("external_dependencies", [])
    if not isinstance(deps, list):
        raise MetadataError(MEMBER, path("external_dependencies"), "must be a list")
    for i, dep in enumerate(deps):
        where = f"{path('external_dependencies')}[{i}]"
        if not isinstance(dep, dict):
            raise MetadataError(MEMBER, where, "must be an object")
        for key in DEPENDENCY_KEYS:
            if not isinstance(dep.get(key), str):
                raise MetadataError(MEMBER, f"{where}.{key}", "missing or not a string")
        if "version_spec" in dep and not isinstance(dep["version_spec"], str):
            raise MetadataError(MEMBER, f"{where}.version_spec", "must be a string")
    return list(deps)


def _main_workspace(memory: Any, where: str) -> int:
    """workspace_size_bytes of ``main`` for the host device (0 when not recorded)."""
    functions = memory.get("functions") if isinstance(memory, dict) else None
    if isinstance(functions, dict):  # v6/v7: {"main": [{"device", "workspace_size_bytes"...}]}
        entries, entries_at = functions.get("main", []), f"{where}.functions.main"
    elif isinstance(functions, list):  # v5: [{"function_name", "workspace": [...]}]
        entries, entries_at = _v5_main_entries(functions), f"{where}.functions"
    else:
        return 0
    if not isinstance(entries, list):
        raise MetadataError(MEMBER, entries_at, "must be a list")
    for i, entry in enumerate(entries):
        if isinstance(entry, dict) and entry.get("device", HOST_DEVICE) == HOST_DEVICE:
            size = entry.get("workspace_size_bytes", 0)
            where_size = f"{entries_at}[{i}].workspace_size_bytes"
            if not _is_int(size) or size < 0:
                raise MetadataError(MEMBER, where_size, f"not a byte count: {size!r}")
            if size > MAX_SIZE_BYTES:
                raise MetadataError(
                    MEMBER,
                    where_size,
                    f"{size:,} bytes; the runtime holds sizes in 32 bits (at most "
                    f"{MAX_SIZE_BYTES:,})",
                )
            return int(size)
    return 0


def _v5_main_entries(functions: List[Any]) -> List[Any]:
    for function in functions:
        if isinstance(function, dict) and function.get("function_name") in _MAIN_NAMES:
            return list(function.get("workspace", []))
    return []


def main_io(raw: Dict[str, Any], key: str) -> Optional[Dict[str, dict]]:
    """``memory.functions.main[host].inputs`` / ``outputs`` (TVM >= 0.10), else None."""
    memory = raw.get("memory")
    functions = memory.get("functions") if isinstance(memory, dict) else None
    entries = functions.get("main") if isinstance(functions, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("device", HOST_DEVICE) == HOST_DEVICE:
            value = entry.get(key)
            return value if isinstance(value, dict) else None
    return None


def operator_function_names(raw: Dict[str, Any], style: str) -> List[str]:
    """Function names recorded in ``memory`` (used when there is no graph to read them from)."""
    memory = raw.get("memory")
    if style == "operator" and isinstance(memory, dict):
        return [str(name) for name in memory if name not in ("sids", "functions")]
    functions = memory.get("functions") if isinstance(memory, dict) else None
    listed = functions.get("operator_functions") if isinstance(functions, dict) else functions
    names = []
    for entry in listed if isinstance(listed, list) else []:
        name = entry.get("function_name") if isinstance(entry, dict) else None
        if isinstance(name, str) and name not in _MAIN_NAMES:
            names.append(name)
    return names


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
