"""The Project API view of the option table (:mod:`project_api.options`): what
``server_info_query`` advertises, and how each call's options are coerced.

TVM's clients send *every* advertised option to *every* method, and ``tvmc`` sends every value
as a string (``"false"``, ``"2048"``). :func:`coerce_options` keeps only the options that apply
to the method, coerces them with the table's functions as the Project API types them, fills in
defaults, checks choices and required options, and raises
:class:`~project_api.errors.ProjectApiError` with code ``-32602`` naming the option when a value
cannot be understood. Unknown option names are ignored.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
from typing import Any, Dict, Iterator, List, Mapping, NamedTuple, Optional, Sequence

from ..errors import GenerateError, ProjectApiError
from ..options import OPTIONS, Option, coerce, json_type
from ..options import parse_compile_definitions as _parse_compile_definitions

_LOG = logging.getLogger(__name__)

INVALID_PARAMS = -32602
# The longest timeout a call or open_transport takes, a year: longer waits are null's business
# (block); larger numbers overflow time_t.
MAX_TIMEOUT_SEC = 365 * 24 * 3600.0

# The Project API's option types are bool, int and str: the table's other types travel as text.
_WIRE_TYPES = {"definitions": "str", "json": "str"}
# Options the server advertises without a default: TVM's clients send back every advertised
# default, so only an unset value tells "the caller did not choose" from a choice, and
# generate_project then picks by project type (serve/handler.py: the device protocol).
CHOSEN_BY_SERVER = ("device_protocol",)


def invalid_params(message: str) -> ProjectApiError:
    """The error for a parameter or option value that cannot be used (JSON-RPC -32602)."""
    return ProjectApiError(message, code=INVALID_PARAMS)


@contextlib.contextmanager
def _as_invalid_params() -> Iterator[None]:
    try:
        yield
    except GenerateError as err:
        raise invalid_params(str(err)) from None


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

    Asks :func:`project_api.board.list_boards`; if that module is missing or fails, falls
    back to the names of the ``boards/*.toml`` files so the server still starts.
    """
    try:
        boards: Any = importlib.import_module("project_api.board")
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
    """The options the Project API offers, in the order ``server_info_query`` advertises them."""
    return [_advertised(option) for option in OPTIONS.values() if option.offered]


def _advertised(option: Option) -> ProjectOption:
    kind = option.project_api_type
    if option.name == "board":
        choices = board_names()
    else:
        choices = list(option.choices) if option.choices is not None else None
    default = None if option.name in CHOSEN_BY_SERVER else option.project_api_default()
    return ProjectOption(
        name=option.name,
        choices=choices,
        default=default,
        type=_WIRE_TYPES.get(kind, kind),
        required=list(option.required) or None,
        optional=list(option.optional) or None,
        help=option.help,
    )


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
    """One value converted as the Project API types ``option``; None for an empty string
    (unset)."""
    entry = OPTIONS.get(option.name)
    kind = entry.project_api_type if entry is not None else option.type
    with _as_invalid_params():
        return coerce(option.name, kind, value, option.choices)


def parse_compile_definitions(value: Any) -> Optional[List[str]]:
    """:func:`project_api.options.parse_compile_definitions`, failing with -32602."""
    with _as_invalid_params():
        return _parse_compile_definitions(value)
