"""A small microTVM RPC client of our own, written from ../shared/spec/microtvm-rpc.md (no TVM
code): framing (``FF FD``, u32 length, payload, CRC-16/CCITT-FALSE over the escaped bytes),
the session layer (nonces, StartSessionInit/Reply, Terminate, Log, Normal) and MinRPC
(argument sequences, Return/Exception/CopyAck).

It exists for what TVM's host never sends — bad CRCs, stale session ids, garbage between
frames, oversized packets, unknown functions, wrong argument types, unknown codes — so tests
can send those and see that the firmware answers or ignores them and keeps serving. The
byte-level builders are public so a test can damage a packet before sending it.

The link is anything with ``write_all(data)`` and ``read_some(deadline)`` (a
:class:`project_api.transport.link.Link`).
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

ESCAPE, START, NOP = 0xFF, 0xFD, 0xFE

# Session message types (spec 2.1).
START_INIT, START_REPLY, TERMINATE, LOG, NORMAL = 0x00, 0x01, 0x02, 0x03, 0x10
SESSION_VERSION = 0x01

# MinRPC codes (spec 3.1).
SHUTDOWN, INIT_SERVER, CALL_FUNC, RETURN, EXCEPTION = 1, 2, 3, 4, 5
COPY_FROM_REMOTE, COPY_TO_REMOTE, COPY_ACK = 6, 7, 8
GET_GLOBAL_FUNC, FREE_HANDLE, DEV_SET_DEVICE, DEV_GET_ATTR = 9, 10, 11, 12
DEV_ALLOC_DATA, DEV_FREE_DATA, DEV_STREAM_SYNC = 13, 14, 15
DEV_ALLOC_DATA_WITH_SCOPE = 17

# Argument type codes (spec 3.2).
INT, UINT, FLOAT, HANDLE, NULL, DTYPE, DEVICE, TENSOR = 0, 1, 2, 3, 4, 5, 6, 7
MODULE, FUNCTION, STR, BYTES, NDARRAY = 9, 10, 11, 12, 13

CPU = (1, 0)  # DLDevice {kDLCPU, 0}


def crc16(data: bytes, crc: int = 0xFFFF) -> int:
    """CRC-16/CCITT-FALSE: poly 0x1021, init 0xFFFF, no reflection, no final XOR."""
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def escape(data: bytes) -> bytes:
    return data.replace(b"\xff", b"\xff\xff")


def frame(payload: bytes, *, corrupt_crc: bool = False, length: Optional[int] = None) -> bytes:
    """One packet on the wire. ``length`` overrides the length field (a lie); ``corrupt_crc``
    flips the CRC's low bit."""
    size = len(payload) if length is None else length
    body = b"\xff\xfd" + escape(struct.pack("<I", size)) + escape(payload)
    crc = crc16(body) ^ (1 if corrupt_crc else 0)
    return body + escape(struct.pack("<H", crc))


class Unframer:
    """Bytes in, packet payloads out; a bad CRC or a broken escape drops the packet whole."""

    def __init__(self) -> None:
        self.dropped = 0
        self._raw = bytearray()  # the escaped bytes of the packet being read, for the CRC
        self._data = bytearray()
        self._state = "hunt"  # hunt | escape-hunt | body | body-escape
        self._need: Optional[int] = None

    def feed(self, data: bytes) -> List[bytes]:
        packets = []
        for byte in data:
            packet = self._byte(byte)
            if packet is not None:
                packets.append(packet)
        return packets

    def _restart(self) -> None:
        self._raw = bytearray(b"\xff\xfd")
        self._data = bytearray()
        self._need = None
        self._state = "body"

    def _byte(self, byte: int) -> Optional[bytes]:
        if self._state in ("hunt", "escape-hunt"):
            if self._state == "escape-hunt" and byte == START:
                self._restart()
            else:
                self._state = "escape-hunt" if byte == ESCAPE else "hunt"
            return None
        self._raw.append(byte)
        if self._state == "body-escape":
            self._state = "body"
            if byte == START:  # a new packet abandons this one
                self.dropped += 1
                self._restart()
                return None
            if byte == NOP:
                return None
            if byte != ESCAPE:
                self.dropped += 1
                self._state = "hunt"
                return None
            return self._data_byte(byte)
        if byte == ESCAPE:
            self._state = "body-escape"
            return None
        return self._data_byte(byte)

    def _data_byte(self, byte: int) -> Optional[bytes]:
        self._data.append(byte)
        if self._need is None:
            if len(self._data) == 4:
                self._need = struct.unpack("<I", bytes(self._data))[0]
                self._data = bytearray()
                self._covered = len(self._raw)
            return None
        if len(self._data) == self._need:
            self._covered = len(self._raw)
        if len(self._data) < self._need + 2:
            return None
        payload, crc = bytes(self._data[:-2]), struct.unpack("<H", bytes(self._data[-2:]))[0]
        self._state = "hunt"
        if crc16(bytes(self._raw[: self._covered])) != crc:
            self.dropped += 1
            return None
        return payload


# --- MinRPC values ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Arg:
    """A value with an explicit type code (for handles, modules, dtypes, lies)."""

    code: int
    value: Any = None


@dataclass(frozen=True)
class Tensor:
    data: int
    shape: Tuple[int, ...]
    dtype: Tuple[int, int, int] = (0, 8, 1)  # int8
    device: Tuple[int, int] = CPU
    byte_offset: int = 0


def dtype_bytes(dtype: Tuple[int, int, int]) -> bytes:
    return struct.pack("<BBH", *dtype)


def tensor_fields(t: Tensor) -> bytes:
    return (
        struct.pack("<Q", t.data)
        + struct.pack("<ii", *t.device)
        + struct.pack("<i", len(t.shape))
        + dtype_bytes(t.dtype)
        + b"".join(struct.pack("<q", d) for d in t.shape)
        + struct.pack("<Q", t.byte_offset)
    )


def encode_value(arg: Any) -> Tuple[int, bytes]:
    if isinstance(arg, Arg):
        code, value = arg.code, arg.value
    elif isinstance(arg, int):  # bool is an int
        code, value = INT, int(arg)
    elif isinstance(arg, float):
        code, value = FLOAT, arg
    elif isinstance(arg, str):
        code, value = STR, arg
    elif isinstance(arg, (bytes, bytearray)):
        code, value = BYTES, bytes(arg)
    elif isinstance(arg, Tensor):
        code, value = TENSOR, arg
    elif arg is None:
        code, value = NULL, None
    else:
        raise TypeError(f"cannot send {arg!r}")
    if code in (INT, UINT):
        return code, struct.pack("<q", value)
    if code == FLOAT:
        return code, struct.pack("<d", value)
    if code in (HANDLE, MODULE, FUNCTION):
        return code, struct.pack("<Q", value)
    if code == NULL:
        return code, b""
    if code == DTYPE:
        return code, dtype_bytes(value) + b"\0" * 4
    if code == DEVICE:
        return code, struct.pack("<ii", *value)
    if code == TENSOR:
        return code, tensor_fields(value)
    if code == STR:
        text = value.encode("utf-8") if isinstance(value, str) else value
        return code, struct.pack("<Q", len(text)) + text
    if code == BYTES:
        return code, struct.pack("<Q", len(value)) + value
    raw = value if isinstance(value, bytes) else b""  # any other code: bytes as given
    return code, raw


def encode_args(args: Sequence[Any]) -> bytes:
    encoded = [encode_value(a) for a in args]
    return (
        struct.pack("<i", len(encoded))
        + b"".join(struct.pack("<i", code) for code, _ in encoded)
        + b"".join(value for _, value in encoded)
    )


def decode_args(body: bytes) -> List[Tuple[int, Any]]:
    (count,) = struct.unpack_from("<i", body, 0)
    codes = struct.unpack_from(f"<{count}i", body, 4)
    at = 4 + 4 * count
    values: List[Tuple[int, Any]] = []
    for code in codes:
        if code in (INT, UINT):
            (value,) = struct.unpack_from("<q", body, at)
            at += 8
        elif code == FLOAT:
            (value,) = struct.unpack_from("<d", body, at)
            at += 8
        elif code in (HANDLE, MODULE, FUNCTION):
            (value,) = struct.unpack_from("<Q", body, at)
            at += 8
        elif code == NULL:
            value = None
        elif code in (STR, BYTES):
            (size,) = struct.unpack_from("<Q", body, at)
            value = body[at + 8 : at + 8 + size]
            value = value.decode("utf-8", "replace") if code == STR else value
            at += 8 + size
        elif code == TENSOR:
            data, dev_type, dev_id, ndim = struct.unpack_from("<QiiI", body, at)
            at += 20 + 4
            shape = struct.unpack_from(f"<{ndim}q", body, at)
            at += 8 * ndim + 8
            value = (data, shape, (dev_type, dev_id))
        else:
            raise ValueError(f"unknown type code {code} in a reply")
        values.append((code, value))
    if at != len(body):
        raise ValueError(f"reply has {len(body) - at} bytes after its values")
    return values


def rpc_packet(code: int, body: bytes) -> bytes:
    return struct.pack("<Qi", 4 + len(body), code) + body


class RemoteError(Exception):
    """The device answered Exception (code 5)."""


@dataclass
class Reply:
    code: int
    body: bytes

    def values(self) -> List[Tuple[int, Any]]:
        if self.code == EXCEPTION:
            raise RemoteError(decode_args(self.body)[0][1])
        if self.code != RETURN:
            raise ValueError(f"reply code {self.code}, not Return")
        return decode_args(self.body)


# --- the session ------------------------------------------------------------------------------


class UtvmClient:
    """A microTVM host: ``start()`` the session, then requests one at a time."""

    def __init__(self, link: Any, *, timeout: float = 10.0) -> None:
        self.link = link
        self.timeout = timeout
        self.unframer = Unframer()
        self.nonce = 0x40
        self.session_id = b"\0\0"
        self.logs: List[str] = []
        self.stray: List[bytes] = []  # packets that were neither a log nor what we waited for
        self._pending: List[bytes] = []

    # -- wire --
    def send_raw(self, data: bytes) -> None:
        self.link.write_all(data)

    def send_message(self, kind: int, body: bytes, *, session: Optional[bytes] = None) -> None:
        header = (self.session_id if session is None else session) + bytes([kind])
        self.send_raw(frame(header + body))

    def next_packet(self, deadline: float) -> bytes:
        while not self._pending:
            if time.monotonic() > deadline:
                raise TimeoutError("no packet from the device in time")
            self._pending += self.unframer.feed(self.link.read_some(deadline))
        return self._pending.pop(0)

    # -- session --
    def start(self, nonce: Optional[int] = None) -> int:
        """Terminate + StartSessionInit with a new nonce; returns the device's nonce."""
        self.nonce = nonce if nonce is not None else (self.nonce % 250) + 1
        self.send_raw(b"\xfe" + frame(b"\0\0" + bytes([TERMINATE])))
        self.send_raw(frame(bytes([self.nonce, 0, START_INIT, SESSION_VERSION])))
        deadline = time.monotonic() + self.timeout
        while True:
            packet = self.next_packet(deadline)
            if packet[2:3] == bytes([START_REPLY]) and packet[0] == self.nonce and packet[1]:
                if packet[3:] != bytes([SESSION_VERSION]):
                    raise ValueError(f"start reply with version {packet[3:].hex()}")
                self.session_id = packet[:2]
                return packet[1]
            self._note(packet)

    def _note(self, packet: bytes) -> None:
        if len(packet) >= 3 and packet[2] == LOG:
            self.logs.append(packet[3:].decode("utf-8", "replace"))
        else:
            self.stray.append(packet)

    def request(self, code: int, body: bytes) -> Reply:
        self.send_message(NORMAL, rpc_packet(code, body))
        return self.reply()

    def reply(self) -> Reply:
        """The next Normal message of our session, as one MinRPC reply."""
        deadline = time.monotonic() + self.timeout
        while True:
            packet = self.next_packet(deadline)
            if len(packet) >= 3 and packet[2] == NORMAL and packet[:2] == self.session_id:
                size, code = struct.unpack_from("<Qi", packet, 3)
                body = packet[15:]
                if size != 4 + len(body):
                    raise ValueError(f"reply length field {size}, message holds {4 + len(body)}")
                return Reply(code, body)
            self._note(packet)

    # -- calls --
    def get_global(self, name: str) -> int:
        return int(self.request(GET_GLOBAL_FUNC, encode_args([name])).values()[0][1])

    def call(self, handle: int, *args: Any) -> List[Tuple[int, Any]]:
        body = struct.pack("<Q", handle) + encode_args(args)
        return self.request(CALL_FUNC, body).values()

    def free(self, handle: int, kind: int) -> None:
        self.request(FREE_HANDLE, encode_args([Arg(HANDLE, handle), kind])).values()

    def system_lib(self) -> int:
        lookup = self.get_global("runtime.SystemLib")
        values = self.call(lookup)
        self.free(lookup, FUNCTION)
        assert values[0] == (INT, MODULE), values
        return int(values[1][1])

    def module_function(self, module: int, name: str) -> int:
        """0 when the module has no such function."""
        getter = self.get_global("tvm.rpc.server.ModuleGetFunction")
        values = self.call(getter, Arg(MODULE, module), name, 1)
        return 0 if values[0] == (INT, NULL) else int(values[1][1])

    def alloc(self, nbytes: int, alignment: int = 64) -> int:
        args = [Arg(DEVICE, CPU), nbytes, alignment, Arg(DTYPE, (2, 32, 1))]
        return int(self.request(DEV_ALLOC_DATA, encode_args(args)).values()[0][1])

    def free_data(self, pointer: int) -> None:
        args = [Arg(DEVICE, CPU), Arg(HANDLE, pointer)]
        self.request(DEV_FREE_DATA, encode_args(args)).values()

    def copy_to(self, tensor: Tensor, data: bytes) -> None:
        body = tensor_fields(tensor)[:-8] + struct.pack("<QQ", tensor.byte_offset, len(data))
        self.request(COPY_TO_REMOTE, body + data).values()

    def copy_from(self, tensor: Tensor, nbytes: int) -> bytes:
        body = tensor_fields(tensor)[:-8] + struct.pack("<QQ", tensor.byte_offset, nbytes)
        reply = self.request(COPY_FROM_REMOTE, body)
        if reply.code == EXCEPTION:
            reply.values()
        if reply.code != COPY_ACK:
            raise ValueError(f"CopyFromRemote answered code {reply.code}")
        return reply.body
