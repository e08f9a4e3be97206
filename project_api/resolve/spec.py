"""What a dependency is: :class:`DependencySpec`, parsed from ``external_dependencies`` entries,
project options and ``--dependency`` strings, and merged across the models of an archive.

An entry of ``external_dependencies`` (pre-RFC, spec mlf.md) is a JSON object::

    {"short_name": "cmsis-nn", "url": "https://github.com/ARM-software/CMSIS-NN.git",
     "url_type": "git", "version_spec": "v4.1.0"}

We accept two optional keys of our own, so a user override can say more than TVM ever wrote:

- ``sha256``: the expected SHA-256 of a ``url`` download (hex). A ``#sha256=<hex>`` suffix on
  the url means the same; giving both with different values is an error.
- ``recipe``: how to build it: a recipe name (``"cmsis-nn"``, ``"generic"``, ``"cmake"``,
  ``"none"``) or an object ``{"kind": ..., "sources": [globs], "include_dirs": [dirs],
  "defines": [...], "targets": [cmake targets]}`` (see :mod:`.recipes`).

Any other key is refused: a misspelt ``sha256`` must not silently switch integrity off.

The CLI form of an entry is ``key=value`` pairs separated by commas, lists inside a value
separated by ``;``: ``short_name=foo,url=https://x/foo.tar.gz,url_type=url,sha256=…,
sources=src/*.c;lib/*.c,include_dirs=include``.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from ..errors import DependencyError
from ..jsontext import parse_json

URL_TYPES = ("git", "url", "path", "mlf_path")
RECIPE_KINDS = ("cmsis-nn", "generic", "cmake", "none")
ENTRY_KEYS = ("short_name", "url", "url_type", "version_spec", "sha256", "recipe")
RECIPE_KEYS = ("kind", "sources", "include_dirs", "defines", "targets")

# The short name becomes a directory (deps/<short_name>) and part of a CMake target name.
_SHORT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

CMSIS_NN = "cmsis-nn"
TVM_CRT = "tvm_standalone_crt"
_CMSIS_NN_ALIASES = ("cmsis-nn", "cmsis_nn", "cmsisnn")

# The fix we print whenever CMSIS-NN is needed and missing (also used by detect.py).
CMSIS_NN_GIT_URL = "https://github.com/ARM-software/CMSIS-NN.git"
CMSIS_NN_VERSION = "v4.1.0"
CMSIS_NN_DEPENDENCY_FLAG = (
    f"--dependency short_name={CMSIS_NN},url={CMSIS_NN_GIT_URL},url_type=git,"
    f"version_spec={CMSIS_NN_VERSION}"
)


def is_cmsis_nn_name(short_name: str) -> bool:
    return short_name.lower() in _CMSIS_NN_ALIASES


@dataclass(frozen=True)
class Recipe:
    """How a dependency is compiled. ``kind`` None means "choose by short_name and layout"."""

    kind: Optional[str] = None
    sources: Tuple[str, ...] = ()
    include_dirs: Tuple[str, ...] = ()
    defines: Tuple[str, ...] = ()
    targets: Tuple[str, ...] = ()

    def is_default(self) -> bool:
        return self == Recipe()

    def to_json(self) -> Union[None, str, Dict[str, Any]]:
        if self.is_default():
            return None
        if not (self.sources or self.include_dirs or self.defines or self.targets):
            return self.kind
        out: Dict[str, Any] = {}
        if self.kind:
            out["kind"] = self.kind
        for name in ("sources", "include_dirs", "defines", "targets"):
            value = getattr(self, name)
            if value:
                out[name] = list(value)
        return out


@dataclass(frozen=True)
class DependencySpec:
    """One external dependency as declared (before anything is fetched).

    ``origin`` says where it came from (``model 'kws' external_dependencies[0]``,
    ``--dependency``, ``option cmsis_path``) for error messages; ``from_archive`` says that
    the archive named it, so :mod:`.trust`'s rule applies. Neither is part of equality.
    """

    short_name: str
    url: str
    url_type: str
    version_spec: str = ""
    sha256: Optional[str] = None
    recipe: Recipe = field(default_factory=Recipe)
    origin: str = field(default="", compare=False)
    from_archive: bool = field(default=False, compare=False)

    @property
    def is_cmsis_nn(self) -> bool:
        return is_cmsis_nn_name(self.short_name)

    @property
    def is_tvm_crt(self) -> bool:
        return self.short_name == TVM_CRT

    def effective_recipe(self) -> Recipe:
        """The recipe with its kind decided: the override's, else by short_name."""
        if self.recipe.kind is not None:
            return self.recipe
        kind = "cmsis-nn" if self.is_cmsis_nn else "none" if self.is_tvm_crt else "generic"
        return Recipe(
            kind=kind,
            sources=self.recipe.sources,
            include_dirs=self.recipe.include_dirs,
            defines=self.recipe.defines,
            targets=self.recipe.targets,
        )

    def describe(self) -> str:
        """One line for messages: ``cmsis-nn (git https://… at v4.1.0, from --dependency)``."""
        where = f" at {self.version_spec}" if self.version_spec else ""
        origin = f", from {self.origin}" if self.origin else ""
        return f"{self.short_name} ({self.url_type} {self.url}{where}{origin})"

    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {
            "short_name": self.short_name,
            "url": self.url,
            "url_type": self.url_type,
            "version_spec": self.version_spec,
        }
        if self.sha256:
            out["sha256"] = self.sha256
        recipe = self.recipe.to_json()
        if recipe is not None:
            out["recipe"] = recipe
        return out


# --- parsing --------------------------------------------------------------------------------


def _fail(origin: str, problem: str, hint: Optional[str] = None) -> DependencyError:
    return DependencyError(f"{origin}: {problem}" if origin else problem, hint=hint)


def _string(raw: Mapping[str, Any], key: str, origin: str, *, required: bool) -> str:
    if key not in raw or raw[key] is None:
        if required:
            raise _fail(origin, f"'{key}' is missing")
        return ""
    value = raw[key]
    if not isinstance(value, str):
        raise _fail(origin, f"'{key}' must be a string, got {type(value).__name__}")
    if _CONTROL.search(value):
        raise _fail(origin, f"'{key}' contains control characters: {value!r}")
    return value


def _string_list(value: Any, what: str, origin: str) -> Tuple[str, ...]:
    if isinstance(value, str):
        value = [v for v in value.split(";") if v]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise _fail(origin, f"recipe '{what}' must be a list of strings")
    for item in value:
        if _CONTROL.search(item) or not item.strip():
            raise _fail(origin, f"recipe '{what}' has an empty or control-character entry")
    return tuple(value)


def _relative_pattern(item: str, what: str, origin: str) -> None:
    """Recipe paths are relative to the dependency's directory and must stay inside it."""
    parts = item.replace("\\", "/").split("/")
    if item.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", item) or ".." in parts:
        raise _fail(origin, f"recipe '{what}' entry {item!r} must be a path inside the dependency")


def parse_recipe(raw: Any, origin: str = "") -> Recipe:
    """A recipe from a name or an object (see the module docstring)."""
    if raw is None:
        return Recipe()
    if isinstance(raw, str):
        raw = {"kind": raw}
    if not isinstance(raw, Mapping):
        raise _fail(origin, f"'recipe' must be a name or an object, got {type(raw).__name__}")
    unknown = sorted(set(raw) - set(RECIPE_KEYS))
    if unknown:
        raise _fail(
            origin,
            f"unknown recipe key(s) {', '.join(unknown)}",
            hint=f"known: {', '.join(RECIPE_KEYS)}",
        )
    kind = raw.get("kind")
    if kind is not None and kind not in RECIPE_KINDS:
        raise _fail(origin, f"unknown recipe kind {kind!r} (known: {', '.join(RECIPE_KINDS)})")
    lists: Dict[str, Tuple[str, ...]] = {}
    for name in ("sources", "include_dirs", "defines", "targets"):
        lists[name] = _string_list(raw[name], name, origin) if name in raw else ()
    for name in ("sources", "include_dirs"):
        for item in lists[name]:
            _relative_pattern(item, name, origin)
    for item in lists["defines"]:
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*(=[^\s\"'$;]*)?$", item):
            raise _fail(origin, f"recipe define {item!r} is not NAME or NAME=VALUE")
    for item in lists["targets"]:
        if not re.match(r"^[A-Za-z0-9_.+:-]+$", item):
            raise _fail(origin, f"recipe target {item!r} is not a CMake target name")
    if (lists["sources"] or lists["include_dirs"]) and kind is None:
        kind = "generic"
    if lists["targets"] and kind is None:
        kind = "cmake"
    return Recipe(kind=kind, **lists)


def parse_dependency(raw: Any, origin: str = "") -> DependencySpec:
    """A :class:`DependencySpec` from one raw ``external_dependencies`` entry (or an override).

    Raises :class:`DependencyError` naming ``origin`` and the offending key.
    """
    if isinstance(raw, DependencySpec):
        return raw
    if not isinstance(raw, Mapping):
        raise _fail(origin, f"a dependency must be a JSON object, got {type(raw).__name__}")
    unknown = sorted(str(k) for k in raw if k not in ENTRY_KEYS)
    if unknown:
        raise _fail(
            origin,
            f"unknown key(s) {', '.join(unknown)}",
            hint=f"a dependency has only {', '.join(ENTRY_KEYS)}",
        )
    short_name = _string(raw, "short_name", origin, required=True)
    if not _SHORT_NAME.match(short_name):
        raise _fail(
            origin,
            f"'short_name' {short_name!r} must be 1-64 of letters, digits, '.', '_', '+', '-' "
            "starting with a letter or digit",
        )
    where = f"{origin} ({short_name})" if origin else short_name
    url_type = _string(raw, "url_type", where, required=True)
    if url_type not in URL_TYPES:
        raise _fail(where, f"'url_type' {url_type!r} is not one of {', '.join(URL_TYPES)}")
    url = _string(raw, "url", where, required=True)
    if not url.strip():
        raise _fail(where, "'url' is empty")
    version_spec = _string(raw, "version_spec", where, required=False).strip()
    if url_type == "git" and not version_spec:
        raise _fail(
            where,
            "'version_spec' is required for a git dependency (a tag, branch or commit)",
        )
    sha256 = _string(raw, "sha256", where, required=False).strip() or None
    if "#sha256=" in url:
        url, _, from_url = url.partition("#sha256=")
        if sha256 and sha256.lower() != from_url.lower():
            raise _fail(where, f"'sha256' {sha256} disagrees with the url's #sha256={from_url}")
        sha256 = from_url
    if sha256 is not None:
        if not _SHA256.match(sha256):
            raise _fail(where, f"'sha256' {sha256!r} is not 64 hexadecimal digits")
        if url_type != "url":
            raise _fail(where, f"'sha256' applies to url_type 'url' only, not {url_type!r}")
        sha256 = sha256.lower()
    if url_type == "git":
        check_git_url(url, where)
        check_git_ref(version_spec, where)
    elif url.lstrip().startswith("-"):
        raise _fail(where, f"'url' {url!r} starts with '-'")
    recipe = parse_recipe(raw.get("recipe"), where)
    return DependencySpec(
        short_name=short_name,
        url=url,
        url_type=url_type,
        version_spec=version_spec,
        sha256=sha256,
        recipe=recipe,
        origin=origin,
    )


# --- hostile input -----------------------------------------------------------------------

# Remote-helper syntax "<transport>::<address>" (ext::, fd::, …) can run commands.
_TRANSPORT_SYNTAX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9+.-]*::")
_URL_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
GIT_SCHEMES = ("https", "http", "ssh", "git", "file", "git+ssh", "ssh+git")
# What git may speak at all (GIT_ALLOW_PROTOCOL); everything else, ext and fd first, is off.
GIT_ALLOWED_PROTOCOLS = "file:git:http:https:ssh"


def check_git_url(url: str, origin: str = "") -> None:
    """Refuse git URLs that could be read as options or that run commands.

    Allowed: ``https://``, ``http://``, ``ssh://``, ``git://``, ``file://``, scp-like
    ``user@host:path`` and local paths. Refused: a leading ``-`` (``--upload-pack=…``),
    ``<transport>::<address>`` (``ext::sh -c …``), other schemes, whitespace in a URL.
    """
    if url.startswith("-"):
        raise _fail(origin, f"git url {url!r} starts with '-' (it would be read as an option)")
    if _TRANSPORT_SYNTAX.match(url):
        raise _fail(
            origin,
            f"git url {url!r} uses the '<transport>::' syntax, which can run commands; refused",
        )
    scheme = _URL_SCHEME.match(url)
    if scheme and scheme.group(1).lower() not in GIT_SCHEMES:
        raise _fail(
            origin,
            f"git url scheme {scheme.group(1)!r} is not allowed (use {', '.join(GIT_SCHEMES)})",
        )
    if scheme and any(ch.isspace() for ch in url):
        raise _fail(origin, f"git url {url!r} contains whitespace")


def check_git_ref(ref: str, origin: str = "") -> None:
    """Refuse a version_spec that git could read as an option or that is not a valid ref."""
    if ref.startswith("-"):
        raise _fail(origin, f"version_spec {ref!r} starts with '-' (it would be read as an option)")
    bad = re.search(r"[\s~^:?*\[\\]|\.\.|@\{|//|^/|/$|\.lock$|^\.|/\.", ref)
    if bad or ref in ("@", ""):
        raise _fail(origin, f"version_spec {ref!r} is not a valid git tag, branch or commit")


_CLI_KEYS = ENTRY_KEYS + ("kind", "sources", "include_dirs", "defines", "targets")
_CLI_SPLIT = re.compile(r",(?=\s*[A-Za-z_][A-Za-z0-9_]*\s*=)")


def parse_dependency_string(text: str, origin: str = "--dependency") -> DependencySpec:
    """A :class:`DependencySpec` from the CLI form ``short_name=…,url=…,url_type=…,…``.

    Only a comma followed by ``word=`` separates fields, so a url may contain commas.
    A JSON object (text starting with ``{``) is accepted too.
    """
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            raw_json = parse_json(stripped)
        except json.JSONDecodeError as err:
            raise _fail(origin, f"not valid JSON: {err}") from None
        return parse_dependency(raw_json, origin)
    raw: Dict[str, Any] = {}
    recipe: Dict[str, Any] = {}
    for part in _CLI_SPLIT.split(stripped):
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq:
            raise _fail(
                origin,
                f"{part!r} is not key=value",
                hint="write e.g. " + CMSIS_NN_DEPENDENCY_FLAG.split(" ", 1)[1],
            )
        if key not in _CLI_KEYS:
            raise _fail(origin, f"unknown key {key!r}", hint=f"known: {', '.join(_CLI_KEYS)}")
        if key == "recipe":
            key = "kind"
        target = recipe if key in RECIPE_KEYS else raw
        if key in target:
            raise _fail(origin, f"key {key!r} given twice")
        target[key] = value.strip()
    if recipe:
        raw["recipe"] = recipe
    return parse_dependency(raw, origin)


def cmsis_path_dependency(path: str, origin: str = "option cmsis_path") -> DependencySpec:
    """TVM's ``cmsis_path`` option as a path dependency named cmsis-nn.

    The directory may be a CMSIS-NN checkout or a CMSIS_5 checkout: the cmsis-nn recipe
    recognises both layouts.
    """
    if not isinstance(path, str) or not path.strip():
        raise _fail(origin, "must be a directory path")
    return parse_dependency(
        {"short_name": CMSIS_NN, "url": path.strip(), "url_type": "path", "version_spec": ""},
        origin,
    )


# --- merging ----------------------------------------------------------------------------


Override = Union[DependencySpec, Mapping[str, Any], str]


def _conflict(first: DependencySpec, second: DependencySpec) -> DependencyError:
    differing = [
        name
        for name in ("url", "url_type", "version_spec", "sha256", "recipe")
        if getattr(first, name) != getattr(second, name)
    ]
    return DependencyError(
        f"dependency '{first.short_name}' is declared twice with different "
        f"{', '.join(differing)}: {first.describe()} and {second.describe()}",
        hint="entries with the same short_name must agree in every field; override it with "
        f"--dependency short_name={first.short_name},... to choose one",
    )


def _merge_into(merged: Dict[str, DependencySpec], spec: DependencySpec) -> None:
    known = merged.get(spec.short_name)
    if known is None:
        merged[spec.short_name] = spec
    elif known != spec:
        raise _conflict(known, spec)


def collect_dependencies(
    models_deps: Iterable[Optional[Sequence[Any]]],
    overrides: Iterable[Override] = (),
    *,
    cmsis_path: Optional[str] = None,
    model_names: Optional[Sequence[str]] = None,
) -> List[DependencySpec]:
    """Merge the ``external_dependencies`` of every model, then apply the user's overrides.

    ``models_deps`` holds one list of raw entries per model (``None`` for a model without the
    key); ``model_names`` (same order) names them in messages. Exact duplicates are merged;
    the same short_name with different fields is a :class:`DependencyError` naming both.

    ``overrides`` (project options / ``--dependency`` flags: dicts, CLI strings or specs) and
    ``cmsis_path`` replace archive entries with the same short_name and add new ones; two
    overrides of the same short_name must agree too. Order: archive order, then new overrides.
    """
    merged: Dict[str, DependencySpec] = {}
    for index, deps in enumerate(models_deps):
        if deps is None:
            continue
        name = model_names[index] if model_names and index < len(model_names) else None
        owner = f"model '{name}'" if name else f"model #{index}"
        if not isinstance(deps, (list, tuple)):
            raise DependencyError(
                f"{owner}: external_dependencies must be a list, got {type(deps).__name__}"
            )
        for position, raw in enumerate(deps):
            origin = f"{owner} external_dependencies[{position}]"
            spec = dataclasses.replace(parse_dependency(raw, origin), from_archive=True)
            _merge_into(merged, spec)

    user: Dict[str, DependencySpec] = {}
    for position, item in enumerate(overrides):
        if isinstance(item, str):
            spec = parse_dependency_string(item, f"--dependency #{position + 1}")
        else:
            spec = parse_dependency(item, f"dependency override #{position + 1}")
        _merge_into(user, spec)
    if cmsis_path is not None and cmsis_path != "":
        cmsis = cmsis_path_dependency(cmsis_path)
        for name, other in user.items():
            if is_cmsis_nn_name(name) and other != cmsis:
                raise DependencyError(
                    f"CMSIS-NN is given twice: {cmsis.describe()} and {other.describe()}",
                    hint="give either the cmsis_path option or a cmsis-nn --dependency",
                )
        user.setdefault(CMSIS_NN, cmsis)

    result = [user.get(name, spec) for name, spec in merged.items()]
    result += [spec for name, spec in user.items() if name not in merged]
    # CMSIS-NN under an alias name in the archive and cmsis_path: the user's word wins.
    cmsis_specs = [spec for spec in result if spec.is_cmsis_nn]
    if len(cmsis_specs) > 1:
        chosen = [spec for spec in cmsis_specs if spec.short_name in user]
        if chosen:
            result = [spec for spec in result if not spec.is_cmsis_nn or spec in chosen[:1]]
        else:
            raise _conflict(cmsis_specs[0], cmsis_specs[1])
    return result
