"""The Project API options this server advertises, and how incoming values are coerced.

TVM's clients send *every* advertised option to *every* method, and ``tvmc`` sends every value
as a string (``"false"``, ``"2048"``). :func:`coerce_options` keeps only the options that apply
to the method, turns strings into the declared type, fills in defaults, checks choices and
required options, and raises :class:`~project_api.errors.ProjectApiError` with code
``-32602`` naming the option when a value cannot be understood. Unknown option names are ignored.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import re
import shlex
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence

from ..errors import ProjectApiError

_LOG = logging.getLogger(__name__)

INVALID_PARAMS = -32602

PROJECT_TYPES = ["host_driven", "standalone"]
GRAPH_FORMATS = ["tables", "json"]

_TRUE = {"true", "1", "yes", "on", "y"}
_FALSE = {"false", "0", "no", "off", "n", ""}
_DEFINE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def invalid_params(message: str) -> ProjectApiError:
    """The error for a parameter or option value that cannot be used (JSON-RPC -32602)."""
    return ProjectApiError(message, code=INVALID_PARAMS)


class ProjectOption(NamedTuple):
    """One advertised option, in the field order of TVM's ``ProjectOption``."""

    name: str
    choices: Optional[List[str]]
    default: Any
    type: str  # "bool" | "str" | "int"
    required: Optional[List[str]]
    optional: Optional[List[str]]
    help: str

    def applies_to(self, method: str) -> bool:
        return method in (self.required or ()) or method in (self.optional or ())

    def is_required_by(self, method: str) -> bool:
        return method in (self.required or ())

    def to_json(self) -> Dict[str, Any]:
        return self._asdict()


def board_names() -> Optional[List[str]]:
    """The board names for the ``board`` option's choices, or None when they can't be known.

    Asks :func:`project_api.boards.list_boards`; if that module is missing or fails, falls
    back to the names of the ``boards/*.toml`` files so the server still starts.
    """
    try:
        boards: Any = importlib.import_module("project_api.boards")
        names = [b if isinstance(b, str) else str(b.name) for b in boards.list_boards()]
        if names:
            return sorted(names)
    except Exception as err:  # noqa: BLE001 - a broken board file must not kill the server
        if not (isinstance(err, ImportError) and getattr(err, "name", "").endswith("boards")):
            _LOG.warning("listing boards failed (%s); using boards/*.toml names", err)
    try:
        from ..resources import boards_dir

        stems = sorted(p.stem for p in boards_dir().glob("*.toml"))
    except OSError:
        stems = []
    return stems or None


def project_options() -> List[ProjectOption]:
    """The option table, in the order ``server_info_query`` advertises it."""
    gen = ["generate_project"]
    transport = ["flash", "open_transport"]

    def opt(
        name: str,
        type_: str,
        default: Any,
        help_: str,
        *,
        required: Optional[List[str]] = None,
        optional: Optional[List[str]] = None,
        choices: Optional[List[str]] = None,
    ) -> ProjectOption:
        return ProjectOption(name, choices, default, type_, required, optional, help_)

    return [
        # TVM's standard options.
        opt(
            "verbose",
            "bool",
            False,
            "Show the full output of CMake and the compiler while generating and building.",
            optional=["generate_project", "build"],
        ),
        opt(
            "project_type",
            "str",
            None,
            "Type of project: host_driven (the firmware waits for commands over the link: set "
            "input, run, get output) or standalone (it runs the archive's sample inputs once, "
            "prints the results and exits).",
            required=gen,
            choices=list(PROJECT_TYPES),
        ),
        opt(
            "board",
            "str",
            None,
            "Board to generate for (see `mlf-project boards`): host runs natively, qemu-* "
            "under qemu-system-arm, others on real hardware.",
            required=gen,
            choices=board_names(),
        ),
        opt(
            "cmsis_path",
            "str",
            os.environ.get("CMSIS_PATH") or None,
            "CMSIS directory (with CMSIS-NN) for models that call arm_nn* kernels; default "
            "$CMSIS_PATH.",
            optional=gen,
        ),
        opt(
            "compile_definitions",
            "str",
            None,
            "Extra preprocessor definitions for the project: a list, or one string of several "
            "such as '-DX=1 Y \"Z=a b\"' (NAME or NAME=VALUE, -D optional).",
            optional=gen,
        ),
        opt(
            "extra_files_tar",
            "str",
            None,
            "A tar archive unpacked into the generated project directory.",
            optional=gen,
        ),
        opt(
            "warning_as_error",
            "bool",
            False,
            "Compile the project's own sources with -Werror.",
            optional=gen,
        ),
        # Ours.
        opt(
            "serial_port",
            "str",
            None,
            "Serial port of a real board (e.g. /dev/serial/by-id/...); default: found by the "
            "board's USB IDs or serial_number.",
            optional=transport,
        ),
        opt(
            "serial_number",
            "str",
            None,
            "USB serial number of the board to use when several are connected.",
            optional=transport,
        ),
        opt(
            "workspace_size_bytes",
            "int",
            None,
            "Workspace pool size in bytes; default: computed from the archive's metadata.",
            optional=gen,
        ),
        opt(
            "qemu_icount",
            "bool",
            False,
            "Run QEMU with -icount shift=0,align=off,sleep=off so instruction counts are "
            "deterministic (QEMU boards only).",
            optional=["generate_project", "flash", "open_transport"],
        ),
        opt(
            "model",
            "str",
            None,
            "Which model of a multi-model archive to build; '*' links all of them into one "
            "firmware. Default: the archive's only model.",
            optional=gen,
        ),
        opt(
            "graph_format",
            "str",
            "tables",
            "How the graph is embedded in the firmware: tables (pre-compiled C tables) or json "
            "(the graph.json text, parsed on the device).",
            optional=gen,
            choices=list(GRAPH_FORMATS),
        ),
        opt(
            "cache_dir",
            "str",
            None,
            "Cache directory for external dependencies; default: the user cache directory.",
            optional=gen,
        ),
        opt(
            "offline",
            "bool",
            False,
            "Resolve external dependencies from the cache only; never touch the network.",
            optional=gen,
        ),
        opt(
            "dependencies",
            "str",
            None,
            "Extra or overriding external dependencies, as a JSON string (same shape as "
            "metadata.json's external_dependencies).",
            optional=gen,
        ),
        opt(
            "build_dir",
            "str",
            None,
            "Build directory, relative to the project directory; default: build.",
            optional=["build", "flash", "open_transport"],
        ),
        opt(
            "timeout_sec",
            "int",
            None,
            "Seconds to wait for the firmware to start and answer; default depends on the "
            "board (host 10, QEMU 30, real boards 10).",
            optional=transport,
        ),
    ]


def options_by_name(table: Optional[Sequence[ProjectOption]] = None) -> Dict[str, ProjectOption]:
    return {o.name: o for o in (table if table is not None else project_options())}


def coerce_options(
    method: str,
    raw: Optional[Mapping[str, Any]],
    table: Optional[Sequence[ProjectOption]] = None,
) -> Dict[str, Any]:
    """Every option that applies to ``method``: the given value coerced to its declared type,
    else its default. ``None`` means unset. Unknown and inapplicable options are dropped."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise invalid_params(f"{method}: options must be an object, got {json_type(raw)}")
    result: Dict[str, Any] = {}
    for option in table if table is not None else project_options():
        if not option.applies_to(method):
            continue
        value = raw.get(option.name)
        value = coerce_value(option, value) if value is not None else None
        if value is None:
            value = option.default
        if value is None and option.is_required_by(method):
            hint = f" (one of: {', '.join(option.choices)})" if option.choices else ""
            raise invalid_params(f"{method}: option {option.name} is required{hint}")
        result[option.name] = value
    return result


def coerce_value(option: ProjectOption, value: Any) -> Any:
    """One value converted to ``option``'s type; None for an empty string (unset)."""
    if option.name == "compile_definitions":
        return parse_compile_definitions(value)
    if option.name == "dependencies":
        return _parse_dependencies(value)
    if option.type == "bool":
        return _to_bool(option.name, value)
    if option.type == "int":
        return _to_int(option.name, value)
    text = _to_str(option.name, value)
    if text is not None and option.choices is not None and text not in option.choices:
        raise invalid_params(
            f"option {option.name}: {text!r} is not one of: {', '.join(option.choices)}"
        )
    return text


def parse_compile_definitions(value: Any) -> Optional[List[str]]:
    """``-DX=1 Y "Z=a b"`` (a string) or ``["-DX=1", "Z=a b"]`` (a list) to
    ``["X=1", "Y", "Z=a b"]``; None for an empty value."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            tokens = shlex.split(value)
        except ValueError as err:
            raise invalid_params(
                f"option compile_definitions: cannot split {value!r}: {err}"
            ) from None
    elif isinstance(value, (list, tuple)):
        tokens = []
        for item in value:
            if not isinstance(item, str):
                raise invalid_params(
                    f"option compile_definitions: want strings, got {json_type(item)} {item!r}"
                )
            tokens.append(item.strip())
    else:
        raise invalid_params(
            f"option compile_definitions: want a string or a list, got {json_type(value)}"
        )
    definitions: List[str] = []
    pending_flag = False
    for token in tokens:
        if not token:
            continue
        if token == "-D":
            pending_flag = True
            continue
        if token.startswith("-D"):
            token = token[2:]
        elif token.startswith("-"):
            raise invalid_params(
                f"option compile_definitions: {token!r} is not a definition (only -D flags)"
            )
        pending_flag = False
        name, sep, rest = token.partition("=")
        if not _DEFINE_NAME.match(name):
            raise invalid_params(
                f"option compile_definitions: {token!r} is not NAME or NAME=VALUE "
                "(NAME: letters, digits, _)"
            )
        definitions.append(name + sep + rest)
    if pending_flag:
        raise invalid_params("option compile_definitions: -D at the end without a definition")
    return definitions or None


def _parse_dependencies(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        return value
    if not isinstance(value, str):
        raise invalid_params(f"option dependencies: want a JSON string, got {json_type(value)}")
    if not value.strip():
        return None
    try:
        parsed = json.loads(value)
    except ValueError as err:
        raise invalid_params(f"option dependencies: not valid JSON: {err}") from None
    if not isinstance(parsed, (dict, list)):
        raise invalid_params(
            f"option dependencies: want a JSON object or array, got {json_type(parsed)}"
        )
    return parsed


def _to_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
    raise invalid_params(
        f"option {name}: want a boolean (true/false, 1/0, yes/no), got {json_type(value)} {value!r}"
    )


def _to_int(name: str, value: Any) -> Optional[int]:
    if isinstance(value, bool):
        raise invalid_params(f"option {name}: want an integer, got boolean {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        text = value.strip().replace("_", "")
        if not text:
            return None
        for base in (10, 0):
            try:
                return int(text, base)
            except ValueError:
                pass
    raise invalid_params(f"option {name}: want an integer, got {json_type(value)} {value!r}")


def _to_str(name: str, value: Any) -> Optional[str]:
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise invalid_params(f"option {name}: want a string, got {json_type(value)} {value!r}")


def json_type(value: Any) -> str:
    """The JSON name of a value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__
