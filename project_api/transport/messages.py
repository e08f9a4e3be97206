"""Message payloads of the device protocol (docs/protocol.md), as in mlf_device.h.

Requests are built by the ``*_request`` functions (payload bytes); replies are parsed by
the ``decode`` class methods, which raise :class:`ProtocolError` for a payload that does not
have the documented layout. Everything is little-endian.
"""

from __future__ import annotations

import enum
import json
import struct
from dataclasses import dataclass
from typing import List, Optional, Tuple

from ..errors import ProtocolError
from .frames import Buffer
from .reasons import STATUS_NAMES, runtime_text, word

MAGIC = b"MLFP"
PROTOCOL_VERSION = 1
REPLY = 0x80
NO_NODE = 0xFFFFFFFF


class MsgType(enum.IntEnum):
    HELLO = 0x01
    DESCRIBE = 0x02
    SET_INPUT = 0x03
    RUN = 0x04
    GET_OUTPUT = 0x05
    EXIT = 0x06
    PROFILE = 0x07
    ERROR = 0xFF


class ErrorCode(enum.IntEnum):
    """Protocol error codes (ERROR replies); codes 1..0xFF are the runtime's mlf_status."""

    BAD_CRC = 0x100
    TOO_LONG = 0x101
    UNKNOWN_TYPE = 0x102
    BAD_PAYLOAD = 0x103
    BAD_MODEL = 0x104
    BAD_INDEX = 0x105
    OUT_OF_RANGE = 0x106
    UNSUPPORTED = 0x107
    ARENA_TAKEN = 0x108


_PROTOCOL_NAMES = {
    ErrorCode.BAD_CRC: "bad CRC",
    ErrorCode.TOO_LONG: "payload too long",
    ErrorCode.UNKNOWN_TYPE: "unknown request type",
    ErrorCode.BAD_PAYLOAD: "bad payload",
    ErrorCode.BAD_MODEL: "no such model",
    ErrorCode.BAD_INDEX: "no such tensor",
    ErrorCode.OUT_OF_RANGE: "out of range",
    ErrorCode.UNSUPPORTED: "unsupported",
    ErrorCode.ARENA_TAKEN: "arena taken",
}


def error_name(code: int) -> str:
    if code in STATUS_NAMES:
        return STATUS_NAMES[code]
    if code in _PROTOCOL_NAMES:
        return _PROTOCOL_NAMES[ErrorCode(code)]
    return f"error 0x{code:x}"


def type_name(type_: int) -> str:
    try:
        return MsgType(type_ & ~REPLY if type_ != MsgType.ERROR else type_).name
    except ValueError:
        return f"type 0x{type_:02x}"


def decode_name(raw: bytes) -> str:
    """A name as sent by the device: the raw contents of a JSON string (escapes as written
    in graph.json). Undecodable text comes back with replacement characters."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("utf-8", "replace")
    if "\\" not in text:
        return text
    try:
        value = json.loads('"' + text + '"')
    except ValueError:
        return text
    return value if isinstance(value, str) else text


# ---- requests ---------------------------------------------------------------------------


def hello_request() -> bytes:
    return b""


def describe_request(model: int, first: int = 0) -> bytes:
    return struct.pack("<HH", model, first)


def set_input_request(model: int, index: int, offset: int, data: Buffer) -> bytes:
    return struct.pack("<HHI", model, index, offset) + bytes(data)


SET_INPUT_HEADER_BYTES = 8


def run_request(model: int) -> bytes:
    return struct.pack("<H", model)


def get_output_request(model: int, index: int, offset: int, max_length: int) -> bytes:
    return struct.pack("<HHII", model, index, offset, max_length)


def exit_request(status: int) -> bytes:
    return struct.pack("<i", status)


def profile_request(first: int) -> bytes:
    return struct.pack("<I", first)


# ---- replies ----------------------------------------------------------------------------


class _Reader:
    def __init__(self, payload: bytes, what: str) -> None:
        self.payload = payload
        self.pos = 0
        self.what = what

    def take(self, fmt: str) -> Tuple:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.payload):
            raise ProtocolError(
                f"{self.what} reply too short: {len(self.payload)} bytes, needed more than "
                f"{self.pos + size - 1}"
            )
        values = struct.unpack_from(fmt, self.payload, self.pos)
        self.pos += size
        return values

    def bytes(self, n: int) -> bytes:
        if self.pos + n > len(self.payload):
            raise ProtocolError(f"{self.what} reply too short: {len(self.payload)} bytes")
        data = self.payload[self.pos : self.pos + n]
        self.pos += n
        return data


@dataclass(frozen=True)
class HelloReply:
    version: int
    num_models: int
    max_payload: int
    tick_hz: int
    board: str
    project_type: str

    @classmethod
    def decode(cls, payload: bytes) -> HelloReply:
        r = _Reader(payload, "HELLO")
        (magic,) = r.take("<4s")
        if magic != MAGIC:
            raise ProtocolError(f"HELLO reply has magic {magic!r}, expected {MAGIC!r}")
        version, num_models, max_payload, tick_hz = r.take("<HHIQ")
        (board_len,) = r.take("<B")
        board = r.bytes(board_len).decode("utf-8", "replace")
        (type_len,) = r.take("<B")
        project_type = r.bytes(type_len).decode("utf-8", "replace")
        return cls(version, num_models, max_payload, tick_hz, board, project_type)


@dataclass(frozen=True)
class TensorEntry:
    raw_name: bytes
    code: int
    bits: int
    lanes: int
    shape: Tuple[int, ...]
    nbytes: int


@dataclass(frozen=True)
class DescribeReply:
    """A page of a model's description. ``status`` is non-zero (an mlf_status) for a model
    whose initialisation failed: then there are no tensors and ``error`` says why."""

    model: int
    status: int
    num_inputs: int
    num_outputs: int
    first: int
    raw_name: bytes
    entries: List[TensorEntry]
    error: str = ""

    @classmethod
    def decode(cls, payload: bytes) -> DescribeReply:
        r = _Reader(payload, "DESCRIBE")
        model, status, num_inputs, num_outputs, first, count, name_len = r.take("<HHHHHHH")
        raw_name = r.bytes(name_len)
        if status != 0:
            error = runtime_text(payload[r.pos :].decode("utf-8", "replace"))
            return cls(model, status, 0, 0, 0, raw_name, [], error)
        entries: List[TensorEntry] = []
        for _ in range(count):
            (entry_name_len,) = r.take("<H")
            entry_name = r.bytes(entry_name_len)
            code, bits, lanes, ndim = r.take("<BBHB")
            shape = r.take(f"<{ndim}q") if ndim else ()
            (nbytes,) = r.take("<I")
            entries.append(TensorEntry(entry_name, code, bits, lanes, tuple(shape), nbytes))
        if first + count > num_inputs + num_outputs:
            raise ProtocolError(
                f"DESCRIBE reply lists tensors {first}..{first + count - 1} of a model with "
                f"{num_inputs + num_outputs}"
            )
        return cls(model, status, num_inputs, num_outputs, first, raw_name, entries)


@dataclass(frozen=True)
class RunReply:
    status: int
    ticks: int
    tick_hz: int
    workspace_bytes: int
    stack_bytes_used: Optional[int] = None  # None: not measured (host) or an older firmware
    # Each operator call's workspace figure, in the tables' order (firmware that measures
    # them: the host's); None when the reply has none.
    workspace_marks: Optional[Tuple[int, ...]] = None

    @classmethod
    def decode(cls, payload: bytes) -> RunReply:
        if len(payload) == 24:  # firmware from before the stack field
            return cls(*_Reader(payload, "RUN").take("<IQQI"))
        r = _Reader(payload, "RUN")
        status, ticks, tick_hz, workspace, stack = r.take("<IQQII")
        marks: Optional[Tuple[int, ...]] = None
        if len(payload) > r.pos:
            (count,) = r.take("<I")
            marks = tuple(r.take(f"<{count}I")) if count else ()
            if r.pos != len(payload):
                raise ProtocolError(f"RUN reply has {len(payload) - r.pos} bytes too many")
        stack_used = None if stack == 0xFFFFFFFF else stack
        return cls(status, ticks, tick_hz, workspace, stack_used, marks)


@dataclass(frozen=True)
class ProfileRecord:
    """One recorded call of a model function (mlf_profile.h)."""

    function: int  # its address as the firmware ran
    enter_ticks: int
    exit_ticks: int
    workspace_bytes: int
    depth: int

    @property
    def ticks(self) -> int:
        return max(0, self.exit_ticks - self.enter_ticks)


@dataclass(frozen=True)
class ProfileReply:
    count: int  # records held on the device
    dropped: int  # calls not recorded (the device's table was full)
    anchor: int  # the address of mlf_profile_start as the firmware ran
    first: int
    records: Tuple[ProfileRecord, ...]

    @classmethod
    def decode(cls, payload: bytes) -> ProfileReply:
        r = _Reader(payload, "PROFILE")
        count, dropped, anchor, first, n = r.take("<IIQII")
        if first + n > count:
            raise ProtocolError(f"PROFILE reply holds records {first}..{first + n - 1} of {count}")
        records = tuple(ProfileRecord(*r.take("<QQQII")) for _ in range(n))
        if r.pos != len(payload):
            raise ProtocolError(f"PROFILE reply has {len(payload) - r.pos} bytes too many")
        return cls(count, dropped, anchor, first, records)


@dataclass(frozen=True)
class ErrorReply:
    code: int
    request: int
    node: int
    message: str

    @classmethod
    def decode(cls, payload: bytes) -> ErrorReply:
        r = _Reader(payload, "ERROR")
        code, request, _reserved, node = r.take("<HBBI")
        message = word(code, request, payload[r.pos :].decode("utf-8", "replace"))
        return cls(code, request, node, message)

    def describe(self) -> str:
        text = f"{error_name(self.code)} (code {self.code}"
        if self.node != NO_NODE:
            text += f", graph node {self.node}"
        text += ")"
        if self.message:
            text += f": {self.message}"
        return text
