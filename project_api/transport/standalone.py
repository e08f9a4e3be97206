"""Reading what a ``standalone`` firmware prints (template_project/firmware/mlf_standalone.h).

    report = parse_standalone(text)
    report.status                     # "pass", "mismatch", "error" or "incomplete"
    report.outputs_of(model=0, sample=0)   # {"output0": ndarray, ...} (outputs printed in full)

Lines that are not standalone records (a board's own boot messages) are ignored.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

from ..errors import ProtocolError
from ..read.dtypes import UnknownDTypeError, parse_dtype
from .reasons import explain

# Of a firmware's line, what an error message quotes.
SHOWN_CHARS = 200
# Fields whose value runs to the end of the line (it may contain spaces).
_TAIL_FIELDS = ("name", "message")


@dataclass
class StandaloneOutput:
    model: int
    sample: int
    index: int
    dtype: str
    shape: Tuple[int, ...]
    nbytes: int
    crc32: int
    argmax: Optional[int]
    check: str  # "pass", "fail" or "none"
    data: Optional[bytes] = None

    def array(self) -> Optional[np.ndarray]:
        """The output as an array, when it was printed in full and numpy has its dtype."""
        if self.data is None:
            return None
        try:
            dtype = parse_dtype(self.dtype).to_numpy()
        except UnknownDTypeError:
            return np.frombuffer(self.data, dtype=np.uint8)
        return np.frombuffer(self.data, dtype=np.dtype(dtype).newbyteorder("<")).reshape(self.shape)


@dataclass
class StandaloneRun:
    model: int
    sample: int
    status: int
    ticks: int
    tick_hz: int
    workspace_bytes: int

    @property
    def device_seconds(self) -> float:
        return self.ticks / self.tick_hz if self.tick_hz else float("nan")


@dataclass
class StandaloneError:
    model: int
    sample: Optional[int]
    code: int
    node: Optional[int]
    message: str


@dataclass
class StandaloneReport:
    version: int = 0
    board: str = ""
    models: Dict[int, str] = field(default_factory=dict)
    runs: List[StandaloneRun] = field(default_factory=list)
    outputs: List[StandaloneOutput] = field(default_factory=list)
    errors: List[StandaloneError] = field(default_factory=list)
    status: str = "incomplete"  # until the result line is seen
    mismatches: int = 0

    def outputs_of(self, model: int = 0, sample: int = 0) -> Dict[str, np.ndarray]:
        result: Dict[str, np.ndarray] = {}
        for out in self.outputs:
            if out.model == model and out.sample == sample:
                array = out.array()
                if array is not None:
                    result[f"output{out.index}"] = array
        return result


def _fields(rest: str) -> Dict[str, str]:
    fields: Dict[str, str] = {}
    text = rest.strip()
    while text:
        key, sep, value = text.partition("=")
        if not sep or " " in key:
            raise ValueError(f"not a key=value field: {text!r}")
        if key in _TAIL_FIELDS:
            fields[key] = value
            break
        value, _, text = value.partition(" ")
        fields[key] = value
        text = text.strip()
    return fields


def _shown(text: str) -> str:
    """At most :data:`SHOWN_CHARS` of a firmware's text in a message."""
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def _fits(dtype: str, shape: Tuple[int, ...], nbytes: int) -> bool:
    """Whether ``nbytes`` are what ``shape`` of ``dtype`` holds (an unknown dtype: any)."""
    try:
        itemsize = parse_dtype(dtype).itemsize
    except UnknownDTypeError:
        return True
    count = 1
    for dim in shape:
        count *= dim
    return count * itemsize == nbytes


def _shape(text: str) -> Tuple[int, ...]:
    return () if text == "scalar" else tuple(int(d) for d in text.split("x"))


def parse_standalone(text: str) -> StandaloneReport:
    """Parses a standalone firmware's console text. Raises ProtocolError when there is no
    standalone header or a record is malformed (or printed data disagrees with its CRC)."""
    report = StandaloneReport()
    seen_header = False
    pieces: Dict[Tuple[int, int, int], Dict[int, bytes]] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip("\r\n\x00 ")
        record, _, rest = line.partition(" ")
        try:
            if record == "mlf-standalone":
                version, _, tail = rest.partition(" ")
                report.version = int(version)
                report.board = _fields(tail).get("board", "")
                seen_header = True
            elif not seen_header:
                continue
            elif record == "model":
                f = _fields(rest)
                report.models[int(f["index"])] = f.get("name", "")
            elif record == "run":
                f = _fields(rest)
                report.runs.append(
                    StandaloneRun(
                        int(f["model"]),
                        int(f["sample"]),
                        int(f["status"]),
                        int(f["ticks"]),
                        int(f["tick_hz"]),
                        int(f["workspace"]),
                    )
                )
            elif record == "output":
                f = _fields(rest)
                report.outputs.append(
                    StandaloneOutput(
                        model=int(f["model"]),
                        sample=int(f["sample"]),
                        index=int(f["index"]),
                        dtype=f["dtype"],
                        shape=_shape(f["shape"]),
                        nbytes=int(f["nbytes"]),
                        crc32=int(f["crc32"], 16),
                        argmax=int(f["argmax"]) if "argmax" in f else None,
                        check=f["check"],
                    )
                )
            elif record == "data":
                f = _fields(rest)
                key = (int(f["model"]), int(f["sample"]), int(f["index"]))
                pieces.setdefault(key, {})[int(f["offset"])] = bytes.fromhex(f["hex"])
            elif record == "error":
                f = _fields(rest)
                report.errors.append(
                    StandaloneError(
                        int(f["model"]),
                        int(f["sample"]) if "sample" in f else None,
                        int(f["code"]),
                        int(f["node"]) if "node" in f else None,
                        explain(f.get("message", "")),
                    )
                )
            elif record == "result":
                f = _fields(rest)
                report.status = f["status"]
                report.mismatches = int(f["mismatches"])
        except (KeyError, ValueError) as exc:
            raise ProtocolError(
                f"standalone output line {number} is malformed ({_shown(str(exc))}): "
                f"{_shown(line)!r}"
            ) from exc
    if not seen_header:
        raise ProtocolError("no 'mlf-standalone' header in the firmware's output")
    for out in report.outputs:
        parts = pieces.get((out.model, out.sample, out.index))
        if not parts:
            continue
        data = b"".join(parts[k] for k in sorted(parts))
        if (
            len(data) != out.nbytes
            or zlib.crc32(data) != out.crc32
            or not _fits(out.dtype, out.shape, out.nbytes)
        ):
            raise ProtocolError(
                f"printed data of model {out.model} sample {out.sample} output {out.index} "
                f"does not match its size/CRC or shape (lost characters on the console?)"
            )
        out.data = data
    return report
