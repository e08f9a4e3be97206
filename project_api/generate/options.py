"""The options a project is generated, built and run with.

Names follow the Project API options (``project_api/serve/options.py``) so that TVM's client,
the CLI's ``--option KEY=VALUE`` and Python callers say the same thing; a few more exist only
here (``sample_inputs``, ``stack_bytes``). Values may arrive as strings (the CLI, tvmc):
:func:`normalize_options` turns them into their types and rejects unknown names.
"""

from __future__ import annotations

import json
import shlex
from typing import Any, Dict, List, Mapping, Optional

from ..errors import GenerateError

GRAPH_FORMATS = ("tables", "json")
PROJECT_TYPES = ("host_driven", "standalone")

# name -> (type, default, help)
OPTIONS: Dict[str, tuple] = {
    "graph_format": ("choice", "tables", "tables (const C, default) or json (parsed on device)"),
    "workspace_size_bytes": ("int", None, "operator workspace pool (default: estimated)"),
    "compile_definitions": ("defs", None, "extra -D definitions: 'X=1 Y' or a list"),
    "warning_as_error": ("bool", True, "compile our own C with -Werror"),
    "verbose": ("bool", False, "show CMake and compiler output while building"),
    "cmsis_path": ("str", None, "CMSIS-NN (or CMSIS_5) checkout for arm_* kernels"),
    "cache_dir": ("str", None, "cache directory for external dependencies"),
    "offline": ("bool", False, "resolve dependencies from the cache only"),
    "dependencies": (
        "deps",
        None,
        "extra or overriding external dependencies: JSON (an object or a list) or the "
        "--dependency form short_name=...,url=...,url_type=...,version_spec=...",
    ),
    "lock_file": ("str", None, "a dependencies.lock.json to regenerate the dependencies from"),
    "refresh_dependencies": (
        "bool",
        False,
        "fetch git/url dependencies again (moving branches) instead of reusing the cache "
        "and the project's own lock file",
    ),
    "sample_inputs": ("str", None, "standalone: .npz of sample inputs (and expected outputs)"),
    "stack_bytes": ("int", None, "main stack of Cortex-M boards (default: the board's)"),
    "qemu_icount": ("bool", False, "QEMU boards: -icount shift=0 (exact instruction counts)"),
    "build_dir": ("str", "build", "build directory, relative to the project"),
    "timeout_sec": ("float", None, "seconds to wait for the firmware to start and answer"),
    "serial_port": ("str", None, "real boards: the console's serial port"),
    "serial_number": ("str", None, "real boards: USB serial number of the probe"),
    "cmake": ("str", None, "the cmake executable (default: a system cmake >= 3.20)"),
}

# Passed by TVM's client to every method; meaningless for generation, accepted and dropped.
_IGNORED = ("project_type", "board", "model", "extra_files_tar")

_TRUE = {"true", "1", "yes", "on", "y"}
_FALSE = {"false", "0", "no", "off", "n", ""}


def normalize_options(raw: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """Every known option with its value typed (defaults filled in)."""
    given = dict(raw or {})
    unknown = sorted(k for k in given if k not in OPTIONS and k not in _IGNORED)
    if unknown:
        raise GenerateError(
            f"unknown option {unknown[0]!r}",
            hint="known options: " + ", ".join(sorted(OPTIONS)),
        )
    result: Dict[str, Any] = {}
    for name, (kind, default, _) in OPTIONS.items():
        value = given.get(name)
        if value is None or (isinstance(value, str) and not value.strip() and kind != "str"):
            result[name] = default
            continue
        result[name] = _coerce(name, kind, value)
    if result["graph_format"] not in GRAPH_FORMATS:
        raise GenerateError(
            f"option graph_format: {result['graph_format']!r} is not one of "
            + ", ".join(GRAPH_FORMATS)
        )
    for name in ("workspace_size_bytes", "stack_bytes"):
        if result[name] is not None and result[name] < 0:
            raise GenerateError(f"option {name}: must be >= 0, got {result[name]}")
    if result["timeout_sec"] is not None and result["timeout_sec"] <= 0:
        raise GenerateError(f"option timeout_sec: must be > 0, got {result['timeout_sec']}")
    return result


def parse_option_assignments(items: Optional[List[str]]) -> Dict[str, str]:
    """``["KEY=VALUE", ...]`` (the CLI's ``--option``) to a dict."""
    options: Dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise GenerateError(f"--option {item!r}: expected KEY=VALUE")
        options[key] = value
    return options


def _coerce(name: str, kind: str, value: Any) -> Any:
    if kind == "str" or kind == "choice":
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise GenerateError(f"option {name}: want a string, got {value!r}")
        return str(value) if str(value).strip() else None
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise GenerateError(f"option {name}: want true or false, got {value!r}")
    if kind in ("int", "float"):
        if isinstance(value, bool):
            raise GenerateError(f"option {name}: want a number, got {value!r}")
        try:
            if kind == "int":
                if isinstance(value, float) and value.is_integer():
                    return int(value)
                if isinstance(value, str):
                    return int(value.strip().replace("_", ""), 0)
                return int(value)
            return float(value)
        except (TypeError, ValueError):
            raise GenerateError(f"option {name}: want a number, got {value!r}") from None
    if kind == "defs":
        return _definitions(value)
    if kind == "deps":
        return _dependencies(value)
    if kind == "json":
        if isinstance(value, (list, dict)):
            return value
        try:
            return json.loads(str(value))
        except ValueError as err:
            raise GenerateError(f"option {name}: not valid JSON: {err}") from None
    raise AssertionError(kind)


def _dependencies(value: Any) -> List[Any]:
    """A list of dependency overrides: objects, or strings in the --dependency form (parsed
    later by the resolver, which names the offending one)."""
    if isinstance(value, dict):
        return [value]
    if isinstance(value, (list, tuple)):
        items: List[Any] = []
        for item in value:
            if isinstance(item, str) and item.strip().startswith("["):
                items += _dependencies(item)
            elif isinstance(item, (str, dict)):
                items.append(item)
            else:
                raise GenerateError(
                    f"option dependencies: want objects or strings, got {item!r}",
                    hint="e.g. short_name=foo,url=https://host/foo.git,url_type=git,"
                    "version_spec=v1.0",
                )
        return items
    if not isinstance(value, str):
        raise GenerateError(f"option dependencies: want JSON or a string, got {value!r}")
    text = value.strip()
    if not text.startswith(("[", "{")):
        return [text]  # the --dependency form
    try:
        parsed = json.loads(text)
    except ValueError as err:
        raise GenerateError(f"option dependencies: not valid JSON: {err}") from None
    if not isinstance(parsed, (list, dict)):
        raise GenerateError("option dependencies: want a JSON object or list")
    return _dependencies(parsed)


def _definitions(value: Any) -> List[str]:
    if isinstance(value, str):
        try:
            tokens = shlex.split(value)
        except ValueError as err:
            raise GenerateError(f"option compile_definitions: {err}") from None
    elif isinstance(value, (list, tuple)):
        tokens = [str(v) for v in value]
    else:
        raise GenerateError(f"option compile_definitions: want a string or list, got {value!r}")
    out: List[str] = []
    pending = False
    for token in tokens:
        token = token.strip()
        if not token:
            continue
        if token == "-D":
            pending = True
            continue
        if token.startswith("-D"):
            token = token[2:]
        pending = False
        name = token.partition("=")[0]
        if not name.isidentifier():
            raise GenerateError(f"option compile_definitions: {token!r} is not NAME or NAME=VALUE")
        out.append(token)
    if pending:
        raise GenerateError("option compile_definitions: -D at the end without a definition")
    return out
