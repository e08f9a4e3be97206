"""Recognise TVM ``export_library`` artifacts and list the modules serialized inside them.

``export_library`` packs every module that is not compiled host code into the
``__tvm_dev_mblob`` symbol (seed module_serialization.rst; TVM's PackImportsToC / LLVM and
ProcessModuleBlob)::

    u64 nbytes                                   (the rest of the symbol)
    u64 count
    count x { string type_key, payload }         string = u64 length + bytes
      "_lib"         no payload: the compiled (DSO) code of the library itself
      "_import_tree" vector<u64> row_ptr, vector<u64> child_indices   (CSR; always last)
      anything else  the module's own SaveToBinary bytes

Without ``_import_tree`` (old artifacts) every listed module is an import of the library.
Payloads are module specific: ``GraphExecutorFactory`` is decoded (graph JSON, params, name);
for other type keys the next type key is found by scanning for a known key, so the listing of
exotic artifacts is best effort (marked in the module's ``detail``).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..jsontext import parse_json
from .elf import ELF_MAGIC, ElfFile, ElfFormatError

MBLOB_SYMBOL = "__tvm_dev_mblob"
LIB_KEY = "_lib"
IMPORT_TREE_KEY = "_import_tree"
GRAPH_FACTORY_KEYS = ("GraphExecutorFactory", "GraphRuntimeFactory")
# Type keys TVM modules serialize under; used to resynchronise after an undecoded payload.
KNOWN_TYPE_KEYS = (
    LIB_KEY,
    IMPORT_TREE_KEY,
    *GRAPH_FACTORY_KEYS,
    "cuda",
    "opencl",
    "rocm",
    "metal",
    "vulkan",
    "hexagon",
    "sdaccel",
    "aocl",
    "metadata",
    "const_loader",
    "json",
)
# Symbols that only TVM-generated host code defines.
TVM_SYMBOL_PREFIXES = ("__tvm_", "tvmgen_", "TVMSystemLibEntryPoint")
_TENSOR_MAGIC = 0xDD5E40F096B4A13F
# The array's initializer holds no brace (one that did not close would make each mention of
# the symbol a scan to the end).
_C_ARRAY_RE = re.compile(MBLOB_SYMBOL + r"\s*\[\s*\w*\s*\]\s*=\s*\{([^{}]*)\}", re.S)


class MblobError(ValueError):
    """The module blob is truncated or inconsistent."""


@dataclass
class SerializedModule:
    index: int
    type_key: str
    imports: List[int] = field(default_factory=list)
    detail: str = ""

    @property
    def label(self) -> str:
        return "library (compiled host code)" if self.type_key == LIB_KEY else self.type_key

    def to_dict(self) -> Dict[str, Any]:
        return {
            "index": self.index,
            "type_key": self.type_key,
            "imports": list(self.imports),
            "detail": self.detail,
        }


@dataclass
class ArtifactReport:
    """What an export_library artifact holds: ``kind`` (e.g. "64-bit ELF shared object")."""

    kind: str
    modules: List[SerializedModule]

    def tree(self) -> str:
        return render_tree(self.modules)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def u64(self) -> int:
        if self.pos + 8 > len(self.data):
            raise MblobError(f"truncated at byte {self.pos}")
        value = int(struct.unpack_from("<Q", self.data, self.pos)[0])
        self.pos += 8
        return value

    def take(self, size: int) -> bytes:
        if size > len(self.data) - self.pos:
            raise MblobError(f"truncated at byte {self.pos}: {size} bytes needed")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def string(self) -> str:
        return self.take(self.u64()).decode("utf-8", "replace")

    def u64_vector(self) -> List[int]:
        count = self.u64()
        if count > (len(self.data) - self.pos) // 8:
            raise MblobError(f"vector of {count} items at byte {self.pos} exceeds the blob")
        return [self.u64() for _ in range(count)]

    def skip_tensor(self) -> None:
        if self.u64() != _TENSOR_MAGIC:
            raise MblobError(f"bad tensor magic before byte {self.pos}")
        self.take(8 + 8)  # reserved word, device
        ndim = struct.unpack("<i", self.take(4))[0]
        self.take(4 + 8 * max(ndim, 0))  # dtype, shape
        self.take(struct.unpack("<q", self.take(8))[0])


def parse_mblob(symbol: bytes) -> List[SerializedModule]:
    """Decode the bytes of the ``__tvm_dev_mblob`` symbol into modules with their imports."""
    header = _Reader(symbol)
    nbytes = header.u64()
    reader = _Reader(header.take(nbytes))
    count = reader.u64()
    modules: List[SerializedModule] = []
    row_ptr: List[int] = []
    children: List[int] = []
    for _ in range(count):
        if reader.pos >= len(reader.data):
            raise MblobError(f"{count} entries announced, blob ends after {len(modules)}")
        key = reader.string()
        if key == IMPORT_TREE_KEY:
            row_ptr, children = reader.u64_vector(), reader.u64_vector()
            continue
        module = SerializedModule(len(modules), key)
        modules.append(module)
        _read_payload(reader, module)
    return _link_imports(modules, row_ptr, children)


def _read_payload(reader: _Reader, module: SerializedModule) -> None:
    if module.type_key == LIB_KEY:
        return
    if module.type_key in GRAPH_FACTORY_KEYS:
        module.detail = _read_graph_factory(reader)
        return
    start = reader.pos
    reader.pos = _next_type_key(reader.data, start)
    module.detail = f"{reader.pos - start}-byte payload, not decoded"


def _read_graph_factory(reader: _Reader) -> str:
    graph_text = reader.string()
    count = reader.u64()
    names = [reader.string() for _ in range(reader.u64())]
    for _ in range(count):
        reader.skip_tensor()
    module_name = reader.string()
    try:
        nodes = len(parse_json(graph_text).get("nodes", []))
    except (ValueError, AttributeError):
        nodes = -1
    return f"module {module_name!r}: graph of {nodes} nodes, {len(names)} params"


def _next_type_key(data: bytes, start: int) -> int:
    """Offset of the next length-prefixed known type key after ``start`` (else the end)."""
    best = len(data)
    for key in KNOWN_TYPE_KEYS:
        encoded = key.encode()
        found = data.find(struct.pack("<Q", len(encoded)) + encoded, start)
        if 0 <= found < best:
            best = found
    return best


def _link_imports(
    modules: List[SerializedModule], row_ptr: List[int], children: List[int]
) -> List[SerializedModule]:
    if not row_ptr:
        # Old layout: the library itself is the root and imports every listed module.
        root = SerializedModule(0, LIB_KEY, [m.index + 1 for m in modules])
        for module in modules:
            module.index += 1
        return [root, *modules]
    if len(row_ptr) != len(modules) + 1 or row_ptr[-1] != len(children):
        raise MblobError(f"import tree of {len(row_ptr) - 1} rows for {len(modules)} modules")
    for module in modules:
        start, end = row_ptr[module.index], row_ptr[module.index + 1]
        if not 0 <= start <= end <= len(children):
            raise MblobError(f"import tree row {module.index} is out of range")
        module.imports = [c for c in children[start:end] if c < len(modules)]
    return modules


def render_tree(modules: List[SerializedModule]) -> str:
    """``GraphExecutorFactory -> [library (compiled host code) -> [cuda]]``."""
    if not modules:
        return "(no modules)"

    def render(index: int, seen: Tuple[int, ...]) -> str:
        module = modules[index]
        if index in seen or not module.imports:
            return module.label
        inner = ", ".join(render(child, (*seen, index)) for child in module.imports)
        return f"{module.label} -> [{inner}]"

    return render(0, ())


def mblob_from_c_source(text: str) -> Optional[bytes]:
    """The bytes of a ``__tvm_dev_mblob`` array in a devc.c written by PackImportsToC."""
    match = _C_ARRAY_RE.search(text)
    if match is None:
        return None
    return bytes(int(token, 16) & 0xFF for token in re.findall(r"0x([0-9a-fA-F]+)", match[1]))


def inspect_artifact(data: bytes) -> Optional[ArtifactReport]:
    """Recognise a TVM export_library file (ELF .so/.o or devc.c); None if it is not one."""
    if data[:4] == ELF_MAGIC:
        return _inspect_elf(data)
    if MBLOB_SYMBOL.encode() in data[: 1 << 26]:
        blob = mblob_from_c_source(data.decode("latin-1"))
        if blob is not None:
            return ArtifactReport("C source (devc.c)", _parse_or_note(blob))
    return None


def _inspect_elf(data: bytes) -> Optional[ArtifactReport]:
    try:
        elf = ElfFile(data)
        found = elf.find_symbols(MBLOB_SYMBOL)
        for symbol in found.values():
            blob = elf.symbol_bytes(symbol)
            if blob is not None:
                return ArtifactReport(elf.kind, _parse_or_note(blob))
        if any(name.startswith(TVM_SYMBOL_PREFIXES) for name in elf.symbol_names()):
            return ArtifactReport(elf.kind, [SerializedModule(0, LIB_KEY)])
    except (ElfFormatError, struct.error) as err:
        return ArtifactReport(f"ELF file ({err})", []) if MBLOB_SYMBOL.encode() in data else None
    return None


def _parse_or_note(blob: bytes) -> List[SerializedModule]:
    try:
        return parse_mblob(blob)
    except MblobError as err:
        return [SerializedModule(0, "?", detail=f"unreadable module blob: {err}")]
