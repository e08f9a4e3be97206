"""AOT models: how the generated C is entered, and the inputs/outputs it takes.

TVM's AOT executor writes no graph. The model is one C function; what this reader needs to
call it comes from three places, each checked against metadata.json:

- the entry point: ``tvmgen_<mod>_run(struct tvmgen_<mod>_inputs*, struct
  tvmgen_<mod>_outputs*)`` declared in ``codegen/host/include/tvmgen_<mod>.h`` (interface
  ``c``), or ``tvmgen_<mod>___tvm_main__`` in TVM's packed calling convention, reached through
  the system library (interface ``packed``, no header);
- the order of inputs and outputs: the header's structs (``c``), or the ``get_c_metadata``
  tables of the generated C (``packed``); metadata.json sorts its keys, so it has lost it;
- shapes: ``@main``'s signature in ``src/<mod>.relay`` (metadata records byte sizes only),
  else the ``get_c_metadata`` tables (``packed``); flat vectors where neither gives one.

USMP models (``tvmc --enable-usmp``) carry their own pools as static arrays in
``.bss.noinit.tvm``; they are recorded here so the firmware's linker script and the fit check
can place and count them. Pools the user gave TVM (``--workspace-pools``, constant pools) are
instead members of ``struct tvmgen_<mod>_workspace_pools``, which the caller fills: the header
states each one's size (and a constant pool's bytes), and the firmware defines them. With
``tir.usmp.use_workspace_io`` the inputs and outputs live inside those pools too, found with
``tvmgen_<mod>_map_inputs``/``map_outputs``.

For interface ``packed`` the entry point is ``tvmgen_<mod>_run`` in the packed calling
convention: it adds the model's pools to the arguments (USMP) or unpacks them for a
``__tvm_main__`` built with the unpacked API, so it is called rather than ``__tvm_main__``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ..errors import AotError
from .code import SRC_DIR
from .ctext import (
    STRING_BODY,
    c_string_value,
    sanitize,
    search_at_word_start,
    strip_comments,
)
from .graph import MAX_TENSOR_BYTES as MAX_SIZE_BYTES
from .model import TensorSpec
from .relay import apply_relay

INTERFACES = ("c", "packed")
INCLUDE_DIR = "codegen/host/include"
RELAY_DIR = "src"
NOINIT_SECTION = ".bss.noinit"

# Parameters of tvmgen_<mod>_run beyond inputs/outputs/workspace_pools: TVM interface options
# we cannot drive.
_EXTRA_PARAMETERS = {
    "constant_pools": "constant pools passed by the caller",
    "devices": "device contexts (an accelerator such as Ethos-U)",
}
# The parameter lists tvmgen_<mod>_run may have (interface c), by struct name.
_RUN_FORMS = (("inputs", "outputs"), ("inputs", "outputs", "workspace_pools"), ("workspace_pools",))
_STATIC_POOL_RE = re.compile(
    r"__attribute__\s*\(\(\s*section\s*\(\s*\"(\.bss\.noinit[^\"]{0,200})\"\s*\)[^;{]{0,200}?\)\)\s*"
    r"static\s+u?int8_t\s+(\w+)\s*\[\s*(\d+)\s*\]\s*;"
)
_DEFINE_RE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)\b(.*)$", re.MULTILINE)
_INTEGER_RE = re.compile(
    r"(0[xX][0-9A-Fa-f]+|0[0-7]*|[1-9][0-9]*)(?:[uU](?:ll|LL|[lL])?|(?:ll|LL|[lL])[uU]?)?"
)


@dataclass(frozen=True)
class StaticPool:
    """A memory pool the model's C defines itself (USMP): ``static uint8_t name[size]``."""

    name: str
    size: int
    section: str


@dataclass(frozen=True)
class CallerPool:
    """A pool ``tvmgen_<mod>_run`` takes from its caller: a member of ``struct
    tvmgen_<mod>_workspace_pools`` that the firmware defines (a constant pool initialised from
    the header's ``..._CONSTANT_POOL_DATA``)."""

    member: str
    size: int
    constant: bool

    def data_macro(self, prefix: str) -> str:
        return f"{prefix.upper()}_{self.member.upper()}_CONSTANT_POOL_DATA"


@dataclass(frozen=True)
class AotEntry:
    """How the firmware calls an AOT model."""

    interface: str  # "c" | "packed"
    prefix: str  # "tvmgen_<mod>"
    header_member: Optional[str]
    input_fields: Tuple[str, ...]  # the header's struct members (c), in call order
    output_fields: Tuple[str, ...]
    workspace_bytes: int  # what TVM reports for main (header define, else metadata)
    static_pools: Tuple[StaticPool, ...] = ()
    caller_pools: Tuple[CallerPool, ...] = ()
    io_in_pools: bool = False  # use_workspace_io: inputs/outputs are mapped inside the pools
    packed_run: str = ""  # packed: tvmgen_<mod>_run's parameter list as defined ("": none)
    packed_slots: int = 0  # packed: the arguments its __tvm_main__ reads (pools included)

    @property
    def run_function(self) -> str:
        return f"{self.prefix}_run"

    @property
    def main_function(self) -> str:
        return f"{self.prefix}___tvm_main__"

    @property
    def entry_function(self) -> str:
        """The function the firmware calls."""
        return self.run_function if self.interface == "c" or self.packed_run else self.main_function

    @property
    def usmp(self) -> bool:
        return bool(self.static_pools or self.caller_pools)

    @property
    def pool_ram_bytes(self) -> int:
        """RAM of the model's pools: its own and the workspace pools the firmware gives it."""
        given = sum(pool.size for pool in self.caller_pools if not pool.constant)
        return sum(pool.size for pool in self.static_pools) + given

    @property
    def constant_pool_bytes(self) -> int:
        """Flash of the constant pools the firmware gives the model."""
        return sum(pool.size for pool in self.caller_pools if pool.constant)

    def describe(self) -> Dict[str, object]:
        return {
            "interface": self.interface,
            "entry_point": self.entry_function,
            "header": self.header_member,
            "usmp": self.usmp,
            "static_pools": [
                {"name": p.name, "bytes": p.size, "section": p.section} for p in self.static_pools
            ],
            "caller_pools": [
                {"name": p.member, "bytes": p.size, "constant": p.constant}
                for p in self.caller_pools
            ],
            "io_in_pools": self.io_in_pools,
            "workspace_bytes": self.workspace_bytes,
        }


def read_aot(
    root: Path,
    name: str,
    texts: Mapping[Path, str],
    inputs: Sequence[TensorSpec],
    outputs: Sequence[TensorSpec],
    metadata_workspace: int,
) -> Tuple[AotEntry, List[TensorSpec], List[TensorSpec]]:
    """The entry point of AOT model ``name`` and its inputs/outputs in call order with shapes.

    ``texts`` are the model's C sources by path; ``inputs``/``outputs`` what metadata.json
    records (flat, sorted by name).
    """
    prefix = "tvmgen_" + sanitize(name)
    header_member = f"{INCLUDE_DIR}/{prefix}.h"
    header = root / header_member
    pools = _static_pools(texts.values())
    if header.is_file():
        text = strip_comments(header.read_text(encoding="utf-8", errors="replace"))
        entry, ins, outs = _c_interface(header_member, text, prefix, inputs, outputs, pools)
        mapping = (f"{prefix}_map_inputs", f"{prefix}_map_outputs") if entry.io_in_pools else ()
        for function in (entry.run_function, *mapping):
            _require_definition(texts, function, header_member)
    elif (packed := _packed_run(texts, prefix)) or _defines_packed_main(texts.values(), prefix):
        ins, outs = _packed_order(texts.values(), inputs, outputs)
        run_params, slots = packed or ("", 0)
        entry = AotEntry(
            "packed", prefix, None, (), (), metadata_workspace, pools,
            packed_run=run_params, packed_slots=max(slots, len(ins) + len(outs)),
        )  # fmt: skip
    elif any(re.search(rf"\b{prefix}_run\s*\(\s*struct\b", t) for t in texts.values()):
        raise AotError(
            header_member,
            "",
            f"missing: the model's C defines {prefix}_run(struct {prefix}_inputs*, ...) "
            "and that header declares the structs",
            hint="export the archive again with tvm.micro.export_model_library_format",
        )
    else:
        raise AotError(
            "codegen/host/src",
            "",
            f"no AOT entry point: neither {prefix}_run nor {prefix}___tvm_main__ is defined",
        )
    relay_member = f"{RELAY_DIR}/{name}.relay"
    relay = root / relay_member
    if relay.is_file():
        ins, outs = apply_relay(relay_member, relay.read_text(errors="replace"), ins, outs)
    if entry.interface == "packed":
        outs = _packed_output_shapes(texts.values(), outs)
    return entry, ins, outs


def _require_definition(texts: Mapping[Path, str], function: str, header_member: str) -> None:
    pattern = re.compile(rf"\b{function}\s*\([^;{{()]*\)\s*\{{")
    if not any(pattern.search(text) for text in texts.values()):
        raise AotError(
            "codegen/host/src",
            "",
            f"{function}, declared in {header_member}, is defined in none of the sources",
        )


# --- interface c: the header -------------------------------------------------------------


def _c_interface(
    member: str,
    text: str,
    prefix: str,
    inputs: Sequence[TensorSpec],
    outputs: Sequence[TensorSpec],
    pools: Tuple[StaticPool, ...],
) -> Tuple[AotEntry, List[TensorSpec], List[TensorSpec]]:
    form = _run_form(member, text, prefix)
    in_fields = _struct_fields(member, text, f"{prefix}_inputs")
    out_fields = _struct_fields(member, text, f"{prefix}_outputs")
    defines = _defines(text)
    caller_pools = _caller_pools(member, defines, prefix, text) if "workspace_pools" in form else ()
    io_in_pools = "inputs" not in form
    if io_in_pools:
        for kind in ("inputs", "outputs"):
            if not re.search(rf"\bstruct\s+{prefix}_{kind}\s+{prefix}_map_{kind}\s*\(", text):
                raise AotError(
                    member,
                    f"{prefix}_run",
                    f"takes only the workspace pools but {prefix}_map_{kind} is not declared",
                )
    ins = _match_fields(member, defines, prefix, "inputs", in_fields, inputs)
    outs = _match_fields(member, defines, prefix, "outputs", out_fields, outputs)
    macro = f"{prefix.upper()}_WORKSPACE_SIZE"
    workspace = _define(member, defines, macro)
    if workspace is None:
        raise AotError(member, macro, "missing")
    if workspace > MAX_SIZE_BYTES:
        raise AotError(
            member,
            macro,
            f"is {workspace:,} bytes; the runtime holds sizes in 32 bits (at most "
            f"{MAX_SIZE_BYTES:,})",
        )
    entry = AotEntry(
        "c", prefix, member, tuple(in_fields), tuple(out_fields), workspace, pools,
        caller_pools=caller_pools, io_in_pools=io_in_pools,
    )  # fmt: skip
    return entry, ins, outs


def _run_form(member: str, text: str, prefix: str) -> Tuple[str, ...]:
    """The structs ``tvmgen_<mod>_run`` takes, in order: one of ``_RUN_FORMS``."""
    match = search_at_word_start(re.compile(rf"{prefix}_run\s*\(([^()]*)\)\s*;"), text)
    if match is None:
        raise AotError(member, f"{prefix}_run", "no declaration of the entry point")
    types = [re.sub(r"\s+", "", part).split("*")[0] for part in match.group(1).split(",")]
    kinds = tuple(t.replace(f"struct{prefix}_", "", 1) for t in types)
    if kinds in _RUN_FORMS:
        return kinds
    for kind in kinds:
        if kind not in ("inputs", "outputs", "workspace_pools"):
            what = _EXTRA_PARAMETERS.get(kind, f"an unknown parameter {kind!r}")
            raise AotError(
                member,
                f"{prefix}_run",
                f"also takes {what}; only the inputs, outputs and workspace_pools structs "
                "are supported",
                hint="build with the interface options interface-api=c, unpacked-api=1 and no "
                "devices (accelerators)",
            )
    raise AotError(
        member,
        f"{prefix}_run",
        f"takes ({match.group(1).strip()}); expected struct {prefix}_inputs* and "
        f"struct {prefix}_outputs* (then struct {prefix}_workspace_pools*), or only "
        f"struct {prefix}_workspace_pools*",
    )


def _caller_pools(
    member: str, defines: Mapping[str, str], prefix: str, text: str
) -> Tuple[CallerPool, ...]:
    """The members of ``struct <prefix>_workspace_pools`` with the sizes the header states."""
    pools = []
    for field in _struct_fields(member, text, f"{prefix}_workspace_pools"):
        named = f"{prefix.upper()}_{field.upper()}"
        workspace = _define(member, defines, f"{named}_WORKSPACE_POOL_SIZE")
        constant = _define(member, defines, f"{named}_CONSTANT_POOL_SIZE")
        if (workspace is None) == (constant is None):
            raise AotError(
                member,
                f"pool {field}",
                f"needs exactly one of {named}_WORKSPACE_POOL_SIZE and {named}_CONSTANT_POOL_SIZE",
            )
        size = constant if constant is not None else workspace
        assert size is not None  # exactly one of them was stated
        pool = CallerPool(field, size, constant is not None)
        if pool.constant and pool.data_macro(prefix) not in defines:
            raise AotError(member, pool.data_macro(prefix), "missing: the constant pool's bytes")
        if pool.size > MAX_SIZE_BYTES:
            raise AotError(
                member,
                f"pool {field}",
                f"is {pool.size:,} bytes; the runtime holds sizes in 32 bits",
            )
        pools.append(pool)
    return tuple(pools)


def _struct_fields(member: str, text: str, struct: str) -> List[str]:
    match = re.search(rf"\bstruct\s+{struct}\s*\{{([^{{}}]*)\}}", text)
    if match is None:
        raise AotError(member, f"struct {struct}", "missing")
    body = match.group(1)
    fields = re.findall(r"void\s*\*\s*(\w+)\s*;", body)
    declared = [part for part in body.split(";") if part.strip()]
    if len(fields) != len(declared):
        raise AotError(member, f"struct {struct}", "members must all be void* tensor pointers")
    return fields


def _defines(text: str) -> Dict[str, str]:
    """What each ``#define NAME rest`` of ``text`` defines (the first, where one is defined
    twice): read once, so that a header of many fields is not searched once per field."""
    found: Dict[str, str] = {}
    for match in _DEFINE_RE.finditer(text):
        found.setdefault(match.group(1), match.group(2))
    return found


def _define(member: str, defines: Mapping[str, str], macro: str) -> Optional[int]:
    """The value of ``#define <macro> N`` (None when there is none): a decimal, hex or octal
    integer constant, with or without a suffix (``u``, ``UL``...) and parentheses."""
    if macro not in defines:
        return None
    written = defines[macro].split("//", 1)[0].strip()
    value = written
    while value.startswith("(") and value.endswith(")"):
        value = value[1:-1].strip()
    number = _INTEGER_RE.fullmatch(value)
    if number is None:
        raise AotError(member, macro, f"cannot read the value of {macro}: {written or 'nothing'}")
    digits = number.group(1)
    if digits[:2].lower() == "0x":
        return int(digits, 16)
    return int(digits, 8) if len(digits) > 1 and digits[0] == "0" else int(digits)


def _match_fields(
    member: str,
    defines: Mapping[str, str],
    prefix: str,
    key: str,
    fields: List[str],
    specs: Sequence[TensorSpec],
) -> List[TensorSpec]:
    """metadata's specs in the header's order; names and sizes must agree."""
    by_c_name = {sanitize(spec.name): spec for spec in specs}
    listed = ", ".join(spec.name for spec in specs) or "none"
    if len(fields) != len(specs) or set(fields) != set(by_c_name):
        raise AotError(
            member,
            f"struct {prefix}_{key}",
            f"has {', '.join(fields) or 'no members'} but metadata.json lists {key}: {listed}",
        )
    ordered = [by_c_name[field] for field in fields]
    for field, spec in zip(fields, ordered):
        macro = f"{prefix.upper()}_{field.upper()}_SIZE"
        size = _define(member, defines, macro)
        if size is not None and size != spec.nbytes:
            raise AotError(
                member,
                macro,
                f"is {size} bytes but metadata.json says {spec.nbytes} for {spec.name}",
            )
    return ordered


# --- interface packed ----------------------------------------------------------------------


def _defines_packed_main(texts: Iterable[str], prefix: str) -> bool:
    pattern = re.compile(
        rf"\b{prefix}___tvm_main__\s*\(\s*(?:TVMValue\s*\*|void\s*\*\s*args\b)[^;{{()]*\)\s*\{{"
    )
    return any(pattern.search(text) for text in texts)


def _packed_run(texts: Mapping[Path, str], prefix: str) -> Optional[Tuple[str, int]]:
    """``tvmgen_<mod>_run`` in the packed calling convention: its parameter list as written and
    how many arguments it hands ``__tvm_main__`` (``TVMValue tensors[N]``; 0 when it unpacks
    them itself). TVM leaves the slots of pools the caller should give unfilled: refused."""
    pattern = re.compile(
        rf"\bint32_t\s+{prefix}_run\s*\(((?:TVMValue|void)\s*\*\s*args\s*,[^;{{()]*)\)\s*\{{"
    )
    for path, text in texts.items():
        match = pattern.search(text)
        if match is None:
            continue
        end = text.find("return", match.end())
        body = text[match.end() : end if end >= 0 else match.end() + 4096]
        declared = re.search(r"\bTVMValue\s+tensors\s*\[\s*(\d+)\s*\]", body)
        slots = int(declared.group(1)) if declared else 0
        filled = set(re.findall(r"\btensors\s*\[\s*(\d+)\s*\]\s*=", body))
        if len(filled) < slots:
            raise AotError(
                f"{SRC_DIR}/{path.name}",
                f"{prefix}_run",
                f"hands __tvm_main__ {slots} arguments but sets only {len(filled)}: the model "
                "takes workspace pools from its caller, which TVM's packed interface never "
                "passes",
                hint="build with interface-api=c and unpacked-api=1 to give the pools",
            )
        return " ".join(match.group(1).split()), slots
    return None


def _c_metadata_names(texts: Iterable[str], key: str) -> List[Tuple[str, Tuple[int, ...]]]:
    """Names and shapes of the ``kTvmgenMetadata_<key>`` table (packed interface)."""
    for text in texts:
        table = _table_body(text, rf"kTvmgenMetadata_{key}\[\d+\]\s*=\s*\{{")
        if table is None:
            continue
        # Every shape table, found in one pass (not one search of the text per name).
        shapes: Dict[str, str] = {}
        pattern = rf"kTvmgenMetadata_{key}_(\d+)_shape\[\d+\]\s*=\s*\{{([^{{}}]*)\}}"
        for shape in re.finditer(pattern, text):
            shapes.setdefault(shape.group(1), shape.group(2))
        found = []
        pattern = rf'"({STRING_BODY})"\s*/\*\s*name\s*\*/'
        for index, body in enumerate(re.findall(pattern, table)):
            name = c_string_value(body)
            dims = re.findall(r"(-?\d+)L", shapes.get(str(index), ""))
            found.append((name, tuple(int(d) for d in dims)))
        return found
    return []


def _table_body(text: str, opening: str) -> Optional[str]:
    """What lies between ``opening`` and the next line that is ``};``."""
    start = re.search(opening, text)
    if start is None:
        return None
    end = text.find("\n};", start.end())
    return None if end < 0 else text[start.end() : end]


def _packed_order(
    texts: Iterable[str], inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec]
) -> Tuple[List[TensorSpec], List[TensorSpec]]:
    tables = _c_metadata_names(texts, "inputs")
    if sorted(name for name, _ in tables) == sorted(spec.name for spec in inputs):
        by_name = {spec.name: spec for spec in inputs}
        ordered = [by_name[name] for name, _ in tables]
        # a flat input (no Relay signature that names it) takes the table's shape
        return [
            _reshaped(spec, shape) if len(spec.shape) == 1 else spec
            for spec, (_, shape) in zip(ordered, tables)
        ], list(outputs)
    return list(inputs), list(outputs)


def _packed_output_shapes(texts: Iterable[str], outputs: List[TensorSpec]) -> List[TensorSpec]:
    tables = _c_metadata_names(texts, "outputs")
    if len(tables) != len(outputs):
        return outputs
    return [
        _reshaped(spec, shape) if len(spec.shape) == 1 else spec
        for spec, (_, shape) in zip(outputs, tables)
    ]


def _reshaped(spec: TensorSpec, shape: Tuple[int, ...]) -> TensorSpec:
    if shape and math.prod(shape) == math.prod(spec.shape):
        return TensorSpec(spec.name, shape, spec.dtype)
    return spec


# --- USMP pools ----------------------------------------------------------------------------


def _static_pools(texts: Iterable[str]) -> Tuple[StaticPool, ...]:
    pools = []
    for text in texts:
        for section, name, size in _STATIC_POOL_RE.findall(text):
            pools.append(StaticPool(name, int(size), section))
    return tuple(pools)
