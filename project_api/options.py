"""Every option a project is generated, built and run with: one table, one coercion.

:data:`OPTIONS` serves every front end. Python callers and the CLI's ``-o KEY=VALUE`` go
through :func:`normalize_options` (every generator option typed, defaults filled in, unknown
names refused). TVM's Project API (:mod:`project_api.serve.options`) advertises the options
that name Project API methods and coerces each call's options with :func:`coerce`, typed as
the Project API declares them. Values may arrive as strings (the CLI, ``tvmc``); one that
cannot be understood raises :class:`~project_api.errors.GenerateError` naming the option.

Standard library only: the Project API server imports this when it starts.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from .errors import GenerateError

GRAPH_FORMATS = ("tables", "json")
PROJECT_TYPES = ("host_driven", "standalone")

# Option types: how a value is coerced (see coerce()).
TYPES = ("bool", "int", "float", "str", "definitions", "dependencies", "json")

_GENERATE = ("generate_project",)
_TRANSPORT = ("flash", "open_transport")
_SAME: Any = object()  # Option.api_default: the Project API uses the generator's default

_TRUE = {"true", "1", "yes", "on", "y"}
_FALSE = {"false", "0", "no", "off", "n", ""}
_DEFINE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class Option:
    """One option.

    ``type`` is one of :data:`TYPES`; ``required``/``optional`` name the Project API methods
    it applies to (none: the Project API does not offer it). Where the Project API differs
    from the generator, ``api_type`` is how it types the value and ``api_default`` (a value,
    or a function called when the table is advertised) what it fills in. ``generator`` is
    False for what generate_project takes as arguments (board, project_type, ...): the
    generator accepts those names among its options and drops them.
    """

    name: str
    type: str
    default: Any
    help: str
    choices: Optional[Tuple[str, ...]] = None
    required: Tuple[str, ...] = ()
    optional: Tuple[str, ...] = ()
    api_type: Optional[str] = None
    api_default: Any = _SAME
    generator: bool = True

    @property
    def offered(self) -> bool:
        """Whether the Project API offers the option."""
        return bool(self.required or self.optional)

    @property
    def project_api_type(self) -> str:
        return self.api_type or self.type

    def project_api_default(self) -> Any:
        if self.api_default is _SAME:
            return self.default
        return self.api_default() if callable(self.api_default) else self.api_default


def _environment(name: str) -> Callable[[], Optional[str]]:
    return lambda: os.environ.get(name) or None


def _table(*options: Option) -> Dict[str, Option]:
    return {option.name: option for option in options}


# In the order server_info_query advertises them: TVM's standard options, then ours; the
# options only the generator knows come last. The board option's choices are the installed
# boards, filled in when the table is advertised.
OPTIONS: Dict[str, Option] = _table(
    Option(
        "verbose",
        "bool",
        False,
        "Show the full output of CMake and the compiler while generating and building.",
        optional=("generate_project", "build"),
    ),
    Option(
        "project_type",
        "str",
        None,
        "Type of project: host_driven (the firmware waits for commands over the link: set "
        "input, run, get output) or standalone (it runs the archive's sample inputs once, "
        "prints the results and exits).",
        choices=PROJECT_TYPES,
        required=_GENERATE,
        generator=False,
    ),
    Option(
        "board",
        "str",
        None,
        "Board to generate for (see `mlf-project boards`): host runs natively, qemu-* "
        "under qemu-system-arm, others on real hardware.",
        required=_GENERATE,
        generator=False,
    ),
    Option(
        "cmsis_path",
        "str",
        None,
        "CMSIS directory (with CMSIS-NN) for models that call arm_nn* kernels; default "
        "$CMSIS_PATH.",
        optional=_GENERATE,
        # The generator reads $CMSIS_PATH itself, and only when the model calls CMSIS-NN.
        api_default=_environment("CMSIS_PATH"),
    ),
    Option(
        "compile_definitions",
        "definitions",
        None,
        "Extra preprocessor definitions for the project: a list, or one string of several "
        "such as '-DX=1 Y \"Z=a b\"' (NAME or NAME=VALUE, -D optional).",
        optional=_GENERATE,
    ),
    Option(
        "extra_files_tar",
        "str",
        None,
        "A tar archive unpacked into the generated project directory.",
        optional=_GENERATE,
        generator=False,
    ),
    Option(
        "warning_as_error",
        "bool",
        True,
        "Compile the project's own sources with -Werror.",
        optional=_GENERATE,
        api_default=False,  # TVM's default for its standard option
    ),
    Option(
        "serial_port",
        "str",
        None,
        "Serial port of a real board (e.g. /dev/serial/by-id/...); default: found by the "
        "board's USB IDs or serial_number.",
        optional=_TRANSPORT,
    ),
    Option(
        "serial_number",
        "str",
        None,
        "USB serial number of the board to use when several are connected.",
        optional=_TRANSPORT,
    ),
    Option(
        "workspace_size_bytes",
        "int",
        None,
        "Workspace pool size in bytes; default: computed from the archive's metadata.",
        optional=_GENERATE,
    ),
    Option(
        "qemu_icount",
        "bool",
        False,
        "Run QEMU with -icount shift=0,align=off,sleep=off so instruction counts are "
        "deterministic (QEMU boards only).",
        optional=("generate_project", "flash", "open_transport"),
    ),
    Option(
        "model",
        "str",
        None,
        "Which model of a multi-model archive to build; '*' links all of them into one "
        "firmware. Default: the archive's only model.",
        optional=_GENERATE,
        generator=False,
    ),
    Option(
        "graph_format",
        "str",
        "tables",
        "How the graph is embedded in the firmware: tables (pre-compiled C tables) or json "
        "(the graph.json text, parsed on the device).",
        choices=GRAPH_FORMATS,
        optional=_GENERATE,
    ),
    Option(
        "cache_dir",
        "str",
        None,
        "Cache directory for external dependencies; default: the user cache directory.",
        optional=_GENERATE,
    ),
    Option(
        "offline",
        "bool",
        False,
        "Resolve external dependencies from the cache only; never touch the network.",
        optional=_GENERATE,
    ),
    Option(
        "dependencies",
        "dependencies",
        None,
        "Extra or overriding external dependencies, as a JSON string (same shape as "
        "metadata.json's external_dependencies).",
        optional=_GENERATE,
        # The generator also takes the --dependency form (short_name=...,url=...) and lists.
        api_type="json",
    ),
    Option(
        "build_dir",
        "str",
        "build",
        "Build directory, relative to the project directory; default: build.",
        optional=("build", "flash", "open_transport"),
        api_default=None,  # unset: the project's own build directory
    ),
    Option(
        "timeout_sec",
        "float",
        None,
        "Seconds to wait for the firmware to start and answer; default depends on the "
        "board (host 10, QEMU 30, real boards 10).",
        optional=_TRANSPORT,
        api_type="int",  # TVM's option types have no float
    ),
    Option(
        "lock_file",
        "str",
        None,
        "A dependencies.lock.json to regenerate the dependencies from.",
    ),
    Option(
        "refresh_dependencies",
        "bool",
        False,
        "Fetch git/url dependencies again (moving branches) instead of reusing the cache "
        "and the project's own lock file.",
    ),
    Option(
        "sample_inputs",
        "str",
        None,
        "Standalone projects: an .npz of sample inputs (and expected outputs).",
    ),
    Option(
        "stack_bytes",
        "int",
        None,
        "Main stack of Cortex-M boards in bytes; default: the board's.",
    ),
    Option(
        "cmake",
        "str",
        None,
        "The cmake executable; default: a system cmake >= 3.20.",
    ),
    Option(
        "profile",
        "bool",
        False,
        "host_driven projects: record the time and workspace of every call of the model's "
        "functions (its C compiled with -finstrument-functions) for `mlf-project profile`. "
        "Off: the firmware holds none of it.",
        # Not advertised over the Project API: TVM's client cannot read the records.
    ),
)


def normalize_options(raw: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """Every generator option with its value typed (defaults filled in)."""
    given = dict(raw or {})
    unknown = sorted(k for k in given if k not in OPTIONS)
    if unknown:
        known = sorted(name for name, option in OPTIONS.items() if option.generator)
        raise GenerateError(
            f"unknown option {unknown[0]!r}", hint="known options: " + ", ".join(known)
        )
    result: Dict[str, Any] = {}
    for option in OPTIONS.values():
        if option.generator:
            value = coerce(option.name, option.type, given.get(option.name), option.choices)
            result[option.name] = option.default if value is None else value
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


def coerce(name: str, type_: str, value: Any, choices: Optional[Sequence[str]] = None) -> Any:
    """``value`` of option ``name`` as a ``type_`` (one of :data:`TYPES`); None when it is
    unset (None or a blank string)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if type_ == "bool":
        return _to_bool(name, value)
    if type_ == "int":
        return _to_int(name, value)
    if type_ == "float":
        return _to_float(name, value)
    if type_ == "definitions":
        return parse_compile_definitions(value)
    if type_ == "dependencies":
        return _dependencies(value)
    if type_ == "json":
        return _json(name, value)
    if type_ != "str":
        raise AssertionError(type_)
    text = _to_str(name, value)
    if choices is not None and text not in choices:
        raise GenerateError(f"option {name}: {text!r} is not one of: {', '.join(choices)}")
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
            raise GenerateError(
                f"option compile_definitions: cannot split {value!r}: {err}"
            ) from None
    elif isinstance(value, (list, tuple)):
        tokens = []
        for item in value:
            if not isinstance(item, str):
                raise GenerateError(
                    f"option compile_definitions: want strings, got {json_type(item)} {item!r}"
                )
            tokens.append(item.strip())
    else:
        raise GenerateError(
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
            raise GenerateError(
                f"option compile_definitions: {token!r} is not a definition (only -D flags)"
            )
        pending_flag = False
        name, sep, rest = token.partition("=")
        if not _DEFINE_NAME.match(name):
            raise GenerateError(
                f"option compile_definitions: {token!r} is not NAME or NAME=VALUE "
                "(NAME: letters, digits, _)"
            )
        definitions.append(name + sep + rest)
    if pending_flag:
        raise GenerateError("option compile_definitions: -D at the end without a definition")
    return definitions or None


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
    return _dependencies(_json("dependencies", text))


def _json(name: str, value: Any) -> Any:
    """A JSON object or array: given as one, or as its text."""
    if isinstance(value, (dict, list)):
        return value
    if not isinstance(value, str):
        raise GenerateError(f"option {name}: want a JSON string, got {json_type(value)}")
    try:
        parsed = json.loads(value)
    except ValueError as err:
        raise GenerateError(f"option {name}: not valid JSON: {err}") from None
    if not isinstance(parsed, (dict, list)):
        raise GenerateError(f"option {name}: want a JSON object or array, got {json_type(parsed)}")
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
    raise GenerateError(
        f"option {name}: want a boolean (true/false, 1/0, yes/no), got {json_type(value)} {value!r}"
    )


def _to_int(name: str, value: Any) -> int:
    if isinstance(value, bool):
        raise GenerateError(f"option {name}: want an integer, got boolean {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        text = value.strip().replace("_", "")
        for base in (10, 0):
            try:
                return int(text, base)
            except ValueError:
                pass
    raise GenerateError(f"option {name}: want an integer, got {json_type(value)} {value!r}")


def _to_float(name: str, value: Any) -> float:
    if not isinstance(value, bool) and isinstance(value, (int, float, str)):
        try:
            return float(value)
        except ValueError:
            pass
    raise GenerateError(f"option {name}: want a number, got {json_type(value)} {value!r}")


def _to_str(name: str, value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise GenerateError(f"option {name}: want a string, got {json_type(value)} {value!r}")


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
