"""Option values as their declared type: one coercion for every front end.

:func:`coerce` turns a raw value (from Python, the CLI's ``-o KEY=VALUE``, ``tvmc``, the Project
API) into the type an option declares in :data:`project_api.options.OPTIONS`; a value that
cannot be understood raises :class:`~project_api.errors.GenerateError` naming the option.

Standard library only: the Project API server imports this when it starts.
"""

from __future__ import annotations

import re
import shlex
from typing import Any, List, Optional, Sequence

from .errors import GenerateError
from .jsontext import parse_json

# Option types: how a value is coerced (see coerce()).
TYPES = ("bool", "int", "float", "str", "definitions", "dependencies", "json")

_TRUE = {"true", "1", "yes", "on", "y"}
# What an environment switch (``MLF_PROJECT_SANDBOX``, ``MLF_PROJECT_RUNTIME_CACHE``) says to
# turn its feature off with; anything else keeps it on.
OFF_WORDS = frozenset({"0", "off", "no", "false", "none"})
_FALSE = {"false", "0", "no", "off", "n", ""}
_DEFINE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


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


# CMake splits lists at ';' even inside quotes; '$' reaches the build tool unescaped.
_UNSAFE_IN_DEFINITION = set(";$")


def _define_name(definition: str) -> str:
    return definition.partition("=")[0]


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
        bad = next((c for c in rest if c in _UNSAFE_IN_DEFINITION or ord(c) < 0x20), None)
        if bad is not None:
            raise GenerateError(
                f"option compile_definitions: {token!r} holds {bad!r}, which CMake or the build "
                "tool would take as syntax",
                hint="values may not hold ; $ or control characters",
            )
        if any(_define_name(d) == name for d in definitions):
            raise GenerateError(f"option compile_definitions: {name} defined twice")
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
        parsed = parse_json(value)
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
