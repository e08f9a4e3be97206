"""A host_driven device written in Python, for tests and for trying the transport without a
compiler: it speaks the device protocol (docs/protocol.md) like mlf_device.c does, over a
pseudo-terminal, with models that are numpy functions.

    model = EmulatedModel("double", [("x", (4,), "float32")], [((4,), "float32")],
                          lambda xs: [xs[0] * 2])
    with DeviceEmulator([model]).serve_on_pty() as port:
        with Session(port) as session:
            session.run({"x": np.ones(4, np.float32)})

``faults`` makes it misbehave on purpose (corrupt, drop or delay replies, die mid-run).
"""

from __future__ import annotations

import os
import select
import struct
import threading
import time
import tty
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Type

import numpy as np

from ..read.dtypes import parse_dtype
from . import messages as msg
from .frames import BadFrame, FrameDecoder, encode_frame
from .link import open_serial

TensorDecl = Tuple[str, Tuple[int, ...], str]  # name, shape, dtype
OutputDecl = Tuple[Tuple[int, ...], str]


@dataclass
class EmulatedModel:
    """``fn`` maps the input arrays (in order) to the output arrays (in order). A model with
    ``init_error = (mlf_status, text)`` behaves like one whose initialisation failed."""

    name: str
    inputs: Sequence[TensorDecl]
    outputs: Sequence[OutputDecl]
    fn: Callable[[List[np.ndarray]], Sequence[np.ndarray]]
    init_error: Optional[Tuple[int, str]] = None
    raw_input_names: Optional[Sequence[bytes]] = None  # as sent (JSON string contents)


@dataclass
class Faults:
    """Ways to misbehave. Counters count down as they are used."""

    corrupt_replies: int = 0  # flip a CRC bit in the next N replies
    drop_replies: int = 0  # swallow the next N replies
    garbage_before_replies: bytes = b""  # written before every reply
    hang_on_run: bool = False  # never answer RUN
    die_on_run: bool = False  # close the link on RUN (like a crash)
    run_error: Optional[Tuple[int, int, str]] = None  # (code, node, message) for RUN
    reply_delay: float = 0.0  # seconds before every reply
    restart_on_run: bool = False  # answer RUN with a fresh boot HELLO (a reset)
    boot_noise: bytes = b""  # written before the boot HELLO (a boot log)
    truncate_replies: int = 0  # send only the first half of the next N replies
    cut_frame_before_replies: int = 0  # a frame start cut short right before the next N replies


@dataclass
class _State:
    inputs: List[bytearray]
    outputs: List[bytes]


def _nbytes(shape: Sequence[int], dtype: str) -> int:
    return int(np.prod(shape, dtype=np.int64)) * parse_dtype(dtype).itemsize


@dataclass
class DeviceEmulator:
    models: Sequence[EmulatedModel]
    board: str = "emulator"
    project_type: str = "host_driven"
    max_payload: int = 4096
    tick_hz: int = 1_000_000
    announce: bool = True
    faults: Faults = field(default_factory=Faults)
    exit_status: Optional[int] = None
    requests: List[int] = field(default_factory=list)  # types received, for tests
    # Like mlf_device_config.idle_reset_ms: a silence this long before bytes arrive settles
    # the bytes held (FrameDecoder.idle()). As on the C device, it is noticed only when the
    # next bytes arrive. 0 = never.
    idle_reset: float = 0.2

    def __post_init__(self) -> None:
        self._decoder = FrameDecoder(self.max_payload)
        self._state: List[_State] = []
        for model in self.models:
            ins = [bytearray(_nbytes(shape, dt)) for _, shape, dt in model.inputs]
            outs = [bytes(_nbytes(shape, dt)) for shape, dt in model.outputs]
            self._state.append(_State(ins, outs))
        self._closed = False

    # ---- protocol ---------------------------------------------------------------------

    def boot(self) -> bytes:
        """What the device writes when it starts."""
        return self.faults.boot_noise + (self._hello(0) if self.announce else b"")

    def handle(self, data: bytes, *, after_silence: bool = False) -> bytes:
        """Bytes received → bytes to send back (stops answering after EXIT or a crash).
        ``after_silence``: the line was idle for ``idle_reset`` before ``data`` came."""
        out = bytearray()
        events = self._decoder.idle() if after_silence else []
        for event in events + self._decoder.feed(data):
            if self.exit_status is not None or self._closed:
                break
            if event.type & msg.REPLY:
                continue
            if isinstance(event, BadFrame):
                # As mlf_device.c: a frame cut short is a damaged request, to be resent.
                too_long = event.reason == "too_long"
                code = msg.ErrorCode.TOO_LONG if too_long else msg.ErrorCode.BAD_CRC
                out += self._reply(self._error(event.seq, event.type, code, "rejected frame"))
                continue
            self.requests.append(event.type)
            out += self._reply(self._dispatch(event.type, event.seq, event.payload))
        return bytes(out)

    def _reply(self, frame: bytes) -> bytes:
        f = self.faults
        if not frame:
            return b""
        if f.reply_delay:
            time.sleep(f.reply_delay)
        if f.drop_replies > 0:
            f.drop_replies -= 1
            return b""
        if f.corrupt_replies > 0:
            f.corrupt_replies -= 1
            frame = frame[:-1] + bytes([frame[-1] ^ 0x01])
        if f.truncate_replies > 0:
            f.truncate_replies -= 1
            frame = frame[: len(frame) // 2]
        if f.cut_frame_before_replies > 0:
            f.cut_frame_before_replies -= 1
            # A GET_OUTPUT reply header claiming 3000 bytes, of which only 5 come: the real
            # reply is taken for its payload until the host notices the silence.
            frame = encode_frame(msg.MsgType.GET_OUTPUT | msg.REPLY, 0x77, bytes(3000))[:11] + frame
        return f.garbage_before_replies + frame

    def _hello(self, seq: int) -> bytes:
        board = self.board.encode()[:255]
        ptype = self.project_type.encode()[:255]
        payload = (
            msg.MAGIC
            + struct.pack("<HHIQ", 1, len(self.models), self.max_payload, self.tick_hz)
            + bytes([len(board)])
            + board
            + bytes([len(ptype)])
            + ptype
        )
        return encode_frame(msg.MsgType.HELLO | msg.REPLY, seq, payload)

    def _error(
        self, seq: int, request: int, code: int, text: str, node: int = msg.NO_NODE
    ) -> bytes:
        payload = struct.pack("<HBBI", code, request, 0, node) + text.encode()[:120]
        return encode_frame(msg.MsgType.ERROR, seq, payload)

    def _model(self, seq: int, request: int, payload: bytes) -> Tuple[Optional[int], bytes]:
        index = struct.unpack_from("<H", payload)[0]
        if index >= len(self.models):
            return None, self._error(seq, request, msg.ErrorCode.BAD_MODEL, f"no model {index}")
        model = self.models[index]
        if model.init_error is not None:
            code, text = model.init_error
            return None, self._error(seq, request, code, "model init failed: " + text)
        return index, b""

    def _dispatch(self, type_: int, seq: int, payload: bytes) -> bytes:
        T = msg.MsgType
        sizes: Dict[int, Callable[[int], bool]] = {
            T.HELLO: lambda n: True,
            T.DESCRIBE: lambda n: n == 4,
            T.SET_INPUT: lambda n: n >= 8,
            T.RUN: lambda n: n == 2,
            T.GET_OUTPUT: lambda n: n == 12,
            T.EXIT: lambda n: n == 4,
        }
        if type_ not in sizes:
            return self._error(seq, type_, msg.ErrorCode.UNKNOWN_TYPE, "unknown request type")
        if not sizes[type_](len(payload)):
            return self._error(seq, type_, msg.ErrorCode.BAD_PAYLOAD, "bad payload size")
        if type_ == T.HELLO:
            return self._hello(seq)
        if type_ == T.EXIT:
            self.exit_status = struct.unpack("<i", payload)[0]
            return encode_frame(T.EXIT | msg.REPLY, seq)
        if type_ == T.DESCRIBE:
            index = struct.unpack_from("<H", payload)[0]
            if index < len(self.models) and self.models[index].init_error is not None:
                model = self.models[index]
                code, text = model.init_error
                name = model.name.encode()
                body = struct.pack("<HHHHHHH", index, code, 0, 0, 0, 0, len(name)) + name
                return encode_frame(T.DESCRIBE | msg.REPLY, seq, body + text.encode())
        index, error = self._model(seq, type_, payload)
        if index is None:
            return error
        model, state = self.models[index], self._state[index]
        if type_ == T.DESCRIBE:
            return self._describe(seq, index, struct.unpack_from("<H", payload, 2)[0])
        if type_ == T.SET_INPUT:
            _, which, offset = struct.unpack_from("<HHI", payload)
            data = payload[8:]
            if which >= len(state.inputs):
                return self._error(seq, type_, msg.ErrorCode.BAD_INDEX, f"no input {which}")
            if offset + len(data) > len(state.inputs[which]):
                return self._error(seq, type_, msg.ErrorCode.OUT_OF_RANGE, "beyond the tensor")
            state.inputs[which][offset : offset + len(data)] = data
            return encode_frame(T.SET_INPUT | msg.REPLY, seq)
        if type_ == T.RUN:
            return self._run(seq, model, state)
        _, which, offset, max_length = struct.unpack("<HHII", payload)
        if which >= len(state.outputs):
            return self._error(seq, type_, msg.ErrorCode.BAD_INDEX, f"no output {which}")
        if offset > len(state.outputs[which]):
            return self._error(seq, type_, msg.ErrorCode.OUT_OF_RANGE, "beyond the tensor")
        count = min(max_length, len(state.outputs[which]) - offset, 0xFFFF)
        return encode_frame(
            T.GET_OUTPUT | msg.REPLY, seq, state.outputs[which][offset : offset + count]
        )

    def _run(self, seq: int, model: EmulatedModel, state: _State) -> bytes:
        f = self.faults
        if f.hang_on_run:
            return b""
        if f.die_on_run:
            self._closed = True
            return b""
        if f.restart_on_run:
            return self._hello(0)
        if f.run_error is not None:
            code, node, text = f.run_error
            return self._error(seq, msg.MsgType.RUN, code, text, node)
        arrays = [
            np.frombuffer(bytes(buf), dtype=parse_dtype(dt).to_numpy()).reshape(shape)
            for buf, (_, shape, dt) in zip(state.inputs, model.inputs)
        ]
        start = time.perf_counter()
        results = model.fn(arrays)
        ticks = int((time.perf_counter() - start) * self.tick_hz)
        state.outputs = [
            np.ascontiguousarray(r, dtype=parse_dtype(dt).to_numpy()).reshape(shape).tobytes()
            for r, (shape, dt) in zip(results, model.outputs)
        ]
        payload = struct.pack("<IQQII", 0, ticks, self.tick_hz, 0, 0xFFFFFFFF)
        return encode_frame(msg.MsgType.RUN | msg.REPLY, seq, payload)

    def _describe(self, seq: int, index: int, first: int) -> bytes:
        model = self.models[index]
        entries = []
        raw_names = model.raw_input_names or [n.encode() for n, _, _ in model.inputs]
        for raw, (_, shape, dt) in zip(raw_names, model.inputs):
            entries.append((raw, shape, dt))
        entries += [(b"", shape, dt) for shape, dt in model.outputs]
        if first > len(entries):
            return self._error(seq, msg.MsgType.DESCRIBE, msg.ErrorCode.OUT_OF_RANGE, "first")
        name = model.name.encode()
        body = bytearray()
        count = 0
        for raw, shape, dt in entries[first:]:
            d = parse_dtype(dt)
            entry = struct.pack("<H", len(raw)) + raw
            entry += struct.pack("<BBHB", d.code, d.bits, d.lanes, len(shape))
            entry += struct.pack(f"<{len(shape)}q", *shape) + struct.pack("<I", _nbytes(shape, dt))
            if 14 + len(name) + len(body) + len(entry) > 0xFFFF:
                break
            body += entry
            count += 1
        head = struct.pack(
            "<HHHHHHH", index, 0, len(model.inputs), len(model.outputs), first, count, len(name)
        )
        return encode_frame(msg.MsgType.DESCRIBE | msg.REPLY, seq, head + name + bytes(body))

    # ---- I/O ----------------------------------------------------------------------------

    def serve_fd(self, fd: int, stop: Optional[threading.Event] = None) -> None:
        """Answers on ``fd`` until EXIT, a crash fault, EOF/EIO, or ``stop``."""
        _write_all(fd, self.boot())
        listening_since = time.monotonic()
        while self.exit_status is None and not self._closed:
            if stop is not None and stop.is_set():
                return
            ready, _, _ = select.select([fd], [], [], 0.05)
            if not ready:
                continue
            try:
                data = os.read(fd, 65536)
            except OSError:
                return
            if not data:
                return
            silent = time.monotonic() - listening_since
            reply = self.handle(data, after_silence=0 < self.idle_reset < silent)
            if reply and not _write_all(fd, reply):
                return
            listening_since = time.monotonic()

    def serve_on_pty(self) -> EmulatorPort:
        """Serves on a new pty in a thread; returns the host end, opened with pyserial."""
        return EmulatorPort(self)


def _write_all(fd: int, data: bytes) -> bool:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except OSError:
            return False
        view = view[n:]
    return True


class EmulatorPort:
    """A ``serial.Serial`` on the slave side of a pty whose master the emulator serves.
    Closing it (or leaving the ``with`` block) stops the emulator thread."""

    def __init__(self, emulator: DeviceEmulator) -> None:
        master, slave = os.openpty()
        tty.setraw(slave)
        self.emulator = emulator
        self._master = master
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="device-emulator", daemon=True)
        self.port: Any = open_serial(os.ttyname(slave))
        os.close(slave)
        self._thread.start()

    def _serve(self) -> None:
        try:
            self.emulator.serve_fd(self._master, self._stop)
        finally:
            os.close(self._master)  # the host now sees the link close, as with a dead process

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.port.close()

    def __enter__(self) -> Any:
        return self.port

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()
