"""A conversation with a host_driven firmware over the device protocol (docs/protocol.md).

    with Session(port, timeout=10.0) as session:      # connects: HELLO, DESCRIBE
        outputs = session.run({"input_1": array})     # {"output0": ndarray, ...}
        print(session.last_stats.device_seconds)

``port`` is an open ``serial.Serial`` (or a :class:`~project_api.transport.link.Link`).
Every wait has a deadline; failures are distinct: :class:`TransportTimeoutError` (no
answer in time), :class:`TransportClosedError` (the device or its link went away),
:class:`ProtocolError` (bytes that do not follow the protocol), :class:`DeviceError`
(the device answered with an error code; ``code`` and ``node`` tell which).

Damaged traffic is recovered where it can be (docs/protocol.md 1.1 and 3): a reply hidden
behind garbage or a truncated frame is found after IDLE_RESET_SECONDS of silence; a request
hidden the same way on the device is found when the wake-up byte sent while waiting reaches
it after a silence; a damaged or cut-short reply makes the request be sent again.
"""

from __future__ import annotations

import collections
import contextlib
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import (
    Any,
    Deque,
    Dict,
    List,
    Mapping,
    Optional,
    Sequence,
    Set,
    Tuple,
    Type,
    Union,
)

import numpy as np

from ..errors import (
    DeviceError,
    InputError,
    ProtocolError,
    TransportClosedError,
    TransportError,
    TransportTimeoutError,
)
from . import messages as msg
from .frames import MAX_PAYLOAD, BadFrame, Frame, FrameDecoder, encode_frame
from .link import Link
from .tensors import (
    DeviceInfo,
    ModelInfo,
    ModelRef,
    RunStats,
    TensorSpec,
    spec_of,
    tensor_bytes,
    tensor_from_bytes,
)

# Silence after which a half-received frame counts as cut short and the bytes after its
# marker are scanned again (devices never pause inside a frame; FrameDecoder.idle()).
IDLE_RESET_SECONDS = 0.5
# While a reply is awaited, one 0x00 byte is sent after this much time and again after twice
# as long each time: the device looks at silences only when a byte arrives, so this is what
# lets it find a request hidden behind a truncated frame or garbage (docs/protocol.md 3).
WAKE_UP_SECONDS = IDLE_RESET_SECONDS
WAKE_UP_BYTE = b"\x00"


@dataclass
class _Counters:
    stale_frames: int = 0
    bad_frames: int = 0
    retries: int = 0
    hello_requests: int = 0
    wake_ups: int = 0
    notes: List[str] = field(default_factory=list)


class Session:
    """The host end of the device protocol.

    ``timeout`` bounds every request's wait for its reply (and ``connect``'s wait for the
    device to answer); ``run_timeout`` (default: ``timeout``) bounds RUN. ``runner``, when
    given, is stopped by :meth:`close` and asked why the link died in error messages.
    ``chunk_size`` caps the data bytes per SET_INPUT/GET_OUTPUT frame (default: as much as
    the device accepts).
    """

    def __init__(
        self,
        link: Any,
        *,
        timeout: float = 10.0,
        run_timeout: Optional[float] = None,
        ticks_to_instructions: Optional[float] = None,
        hello_interval: float = 0.1,
        retries: int = 2,
        chunk_size: Optional[int] = None,
        runner: Any = None,
    ) -> None:
        self.timeout = float(timeout)
        self.run_timeout = float(run_timeout) if run_timeout is not None else self.timeout
        self.ticks_to_instructions = ticks_to_instructions
        self.hello_interval = hello_interval
        self.retries = retries
        self.chunk_size = chunk_size
        self.runner = runner
        if isinstance(link, Link):
            self.link = link
        else:
            why = self._why_closed if runner is not None else None
            try:
                self.link = Link(link, write_timeout=max(self.timeout, 1.0), on_closed=why)
            except TransportError:
                if runner is not None:  # the session owns the runner from here on
                    runner.stop()
                raise
        if self.link.on_closed is None and runner is not None:
            self.link.on_closed = self._why_closed
        self.last_stats: Optional[RunStats] = None
        self.counters = _Counters()
        self._decoder = FrameDecoder(MAX_PAYLOAD)
        self._events: Deque[Union[Frame, BadFrame]] = collections.deque()
        self._seq = 0
        self._last_rx = time.monotonic()
        self._wake_up_at = float("inf")
        self._wake_up_interval = WAKE_UP_SECONDS
        self._info: Optional[DeviceInfo] = None
        self._ended: Optional[str] = None

    # ---- life cycle -------------------------------------------------------------------

    def __enter__(self) -> Session:
        if self._info is None:
            try:
                self.connect()
            except BaseException:
                self.close()
                raise
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()

    def connect(self) -> DeviceInfo:
        """Waits for the device to identify itself (its boot HELLO, or the answer to one of
        the HELLO requests sent every ``hello_interval`` seconds, backing off to 1 s), then
        describes every model. Raises TransportTimeoutError when nothing answers."""
        # Boot logs may hold marker bytes with a wild length: until the device identified
        # itself, a complete frame after an incomplete one wins (see FrameDecoder.lookahead).
        self._decoder.lookahead = True
        try:
            hello = self._wait_hello(time.monotonic() + self.timeout)
        finally:
            self._decoder.lookahead = False
        if hello.version != msg.PROTOCOL_VERSION:
            raise ProtocolError(
                f"the device speaks protocol version {hello.version}; this host speaks "
                f"version {msg.PROTOCOL_VERSION}",
                hint="rebuild the firmware with this mlf-project-api",
            )
        if not 16 <= hello.max_payload <= MAX_PAYLOAD:
            raise ProtocolError(f"the device announces an unusable max payload {hello.max_payload}")
        models = tuple(self._describe(i) for i in range(hello.num_models))
        self._info = DeviceInfo(
            hello.version,
            hello.board,
            hello.project_type,
            hello.max_payload,
            hello.tick_hz,
            models,
        )
        return self._info

    def exit(self, status: int = 0) -> None:
        """Asks the firmware to end with ``status``. It answers first, but a process that
        ends at once may take its answer with it (a pty drops unread bytes), so the link
        closing counts as done too."""
        if self._ended is not None:
            raise TransportClosedError(self._ended)
        with contextlib.suppress(TransportClosedError):
            self._request(msg.MsgType.EXIT, msg.exit_request(status))
        self._ended = f"the session ended (EXIT {status} was sent)"

    def close(self) -> None:
        """Closes the link and stops the runner, if any. Idempotent."""
        if self._ended is None:
            self._ended = "the session is closed"
        self.link.close()
        if self.runner is not None:
            self.runner.stop()

    # ---- what the device said ----------------------------------------------------------

    @property
    def info(self) -> DeviceInfo:
        if self._info is None:
            raise TransportError("not connected: call connect() first")
        return self._info

    @property
    def models(self) -> Tuple[ModelInfo, ...]:
        return self.info.models

    def model(self, which: ModelRef = 0) -> ModelInfo:
        models = self.models
        if isinstance(which, str):
            for model in models:
                if model.name == which:
                    return model
            names = ", ".join(repr(m.name) for m in models)
            raise InputError(f"the device has no model {which!r} (models: {names})")
        if not 0 <= which < len(models):
            raise InputError(f"the device has {len(models)} models, no model {which}")
        return models[which]

    def _usable(self, which: ModelRef) -> ModelInfo:
        info = self.model(which)
        if info.error:
            raise DeviceError(
                f"model {info.name!r} failed to initialise on the device: {info.error}",
                code=info.error_code,
            )
        return info

    # ---- inference ---------------------------------------------------------------------

    def run(
        self,
        inputs: Union[Mapping[str, Any], Sequence[Any]],
        *,
        model: ModelRef = 0,
    ) -> Dict[str, np.ndarray]:
        """Sets every input, runs, and reads every output (keys ``output0``..``N-1``).
        ``inputs`` maps input names to arrays, or lists them in input order. Shapes and
        dtypes are checked before anything is sent."""
        info = self._usable(model)
        arrays = self._bind_inputs(info, inputs)
        for index, data in enumerate(arrays):
            self._send_input(info, index, data)
        self.invoke(model=info.index)
        return {
            f"output{i}": self.get_output(i, model=info.index) for i in range(len(info.outputs))
        }

    def set_input(self, which: ModelRef, value: Any, *, model: ModelRef = 0) -> None:
        """Sends one input (by index or name)."""
        info = self._usable(model)
        index = info.input_index(which)
        self._send_input(info, index, tensor_bytes(info.inputs[index], value, info.name))

    def invoke(self, *, model: ModelRef = 0) -> RunStats:
        """Runs the model on the inputs already sent; returns (and keeps) its timing."""
        info = self._usable(model)
        started = time.monotonic()
        payload = self._request(
            msg.MsgType.RUN, msg.run_request(info.index), timeout=self.run_timeout
        )
        reply = msg.RunReply.decode(payload)
        self.last_stats = RunStats(
            ticks=reply.ticks,
            tick_hz=reply.tick_hz,
            workspace_bytes=reply.workspace_bytes,
            host_seconds=time.monotonic() - started,
            ticks_to_instructions=self.ticks_to_instructions,
            stack_bytes_used=reply.stack_bytes_used,
        )
        return self.last_stats

    def profile(self) -> Tuple[List[msg.ProfileRecord], int, int]:
        """The model calls recorded during the last run (firmware built with the ``profile``
        option): (records in call order, calls dropped, anchor address)."""
        records: List[msg.ProfileRecord] = []
        while True:
            try:
                payload = self._request(msg.MsgType.PROFILE, msg.profile_request(len(records)))
            except DeviceError as err:
                if err.code == msg.ErrorCode.UNKNOWN_TYPE:
                    raise DeviceError(
                        "this firmware records no profile",
                        hint="generate the project with -o profile=true (mlf-project profile does)",
                        code=err.code,
                    ) from err
                raise
            reply = msg.ProfileReply.decode(payload)
            if reply.first != len(records):
                raise ProtocolError(f"PROFILE reply starts at {reply.first}, not {len(records)}")
            records.extend(reply.records)
            if len(records) >= reply.count or not reply.records:
                return records, reply.dropped, reply.anchor

    def get_output(self, index: int, *, model: ModelRef = 0) -> np.ndarray:
        """Reads output ``index`` of the last run, as an array of its shape and dtype (raw
        uint8 bytes for dtypes numpy lacks)."""
        info = self._usable(model)
        if not 0 <= index < len(info.outputs):
            raise InputError(f"model {info.name!r} has {len(info.outputs)} outputs, no {index}")
        spec = info.outputs[index]
        chunk = self._chunk(0)
        data = bytearray()
        while len(data) < spec.nbytes:
            piece = self._request(
                msg.MsgType.GET_OUTPUT,
                msg.get_output_request(info.index, index, len(data), chunk),
            )
            if not piece:
                raise ProtocolError(
                    f"GET_OUTPUT of output{index} returned no data at offset {len(data)} "
                    f"of {spec.nbytes}"
                )
            data += piece
        if len(data) != spec.nbytes:
            raise ProtocolError(f"output{index}: got {len(data)} bytes, expected {spec.nbytes}")
        return tensor_from_bytes(spec, data)

    # ---- internals: inputs ---------------------------------------------------------------

    def _bind_inputs(
        self, info: ModelInfo, inputs: Union[Mapping[str, Any], Sequence[Any]]
    ) -> List[bytes]:
        specs = info.inputs
        if isinstance(inputs, Mapping):
            unknown = [k for k in inputs if k not in {s.name for s in specs}]
            if unknown:
                names = ", ".join(repr(s.name) for s in specs) or "none"
                raise InputError(
                    f"model {info.name!r} has no input {unknown[0]!r} (inputs: {names})"
                )
            missing = [s.name for s in specs if s.name not in inputs]
            if missing:
                raise InputError(
                    f"model {info.name!r}: no value for input "
                    + ", ".join(repr(m) for m in missing)
                )
            values = [inputs[s.name] for s in specs]
        elif isinstance(inputs, np.ndarray) or not isinstance(inputs, Sequence):
            raise InputError(
                "inputs must map input names to arrays or list one array per input, "
                f"got {type(inputs).__name__}"
            )
        else:
            if len(inputs) != len(specs):
                raise InputError(
                    f"model {info.name!r} takes {len(specs)} inputs, {len(inputs)} given"
                )
            values = list(inputs)
        return [tensor_bytes(spec, value, info.name) for spec, value in zip(specs, values)]

    def _chunk(self, header: int) -> int:
        room = self.info.max_payload - header
        if self.chunk_size is not None:
            room = min(room, self.chunk_size)
        return max(1, room)

    def _send_input(self, info: ModelInfo, index: int, data: bytes) -> None:
        chunk = self._chunk(msg.SET_INPUT_HEADER_BYTES)
        view = memoryview(data)
        offset = 0
        while True:
            piece = view[offset : offset + chunk]
            self._request(
                msg.MsgType.SET_INPUT, msg.set_input_request(info.index, index, offset, piece)
            )
            offset += len(piece)
            if offset >= len(data):
                break

    # ---- internals: requests -------------------------------------------------------------

    def _next_seq(self) -> int:
        # 0 is what the device's unsolicited boot HELLO carries; requests never use it.
        self._seq = self._seq % 255 + 1
        return self._seq

    def _why_closed(self) -> str:
        runner = self.runner
        if runner is None:
            return ""
        status = None
        for _ in range(20):  # the process may take a moment to be seen as ended
            status = runner.exit_status
            if status is not None:
                break
            time.sleep(0.025)
        parts = []
        if status is not None:
            parts.append(_describe_status(status))
        log = (runner.log or "").strip()
        if log:
            tail = log[-600:]
            parts.append("its log ends with: " + tail.replace("\n", " | "))
        return "; ".join(parts)

    def _next_event(self, deadline: float, what: str) -> Union[Frame, BadFrame]:
        """The next frame event, settling a half-received frame after IDLE_RESET_SECONDS of
        silence and sending the wake-up bytes that are due meanwhile."""
        while not self._events:
            if time.monotonic() >= deadline:
                # Also when bytes keep coming: a device babbling non-frames must not hold us.
                raise TransportTimeoutError(f"timed out waiting for {what}")
            wake = deadline
            if self._decoder.pending_bytes:
                wake = min(wake, self._last_rx + IDLE_RESET_SECONDS)
            wake = min(wake, self._wake_up_at)
            try:
                data = self.link.read_some(wake, what=what)
            except TransportTimeoutError:
                now = time.monotonic()
                if self._decoder.pending_bytes and (
                    now >= self._last_rx + IDLE_RESET_SECONDS or now >= deadline
                ):
                    # The device never pauses inside a frame: a frame start held is whole by
                    # now or was cut short; what follows its marker may be the reply.
                    self._events.extend(self._decoder.idle())
                    continue
                if now >= deadline:
                    raise
                if now >= self._wake_up_at:
                    self._wake_up()
                continue
            if self._decoder.pending_bytes and self.link.waited > IDLE_RESET_SECONDS:
                self._events.extend(self._decoder.idle())
            self._last_rx = time.monotonic()
            self._events.extend(self._decoder.feed(data))
        return self._events.popleft()

    def _wake_up(self) -> None:
        self.counters.wake_ups += 1
        self.link.write_all(WAKE_UP_BYTE, what="a wake-up byte")
        self._wake_up_interval *= 2
        self._wake_up_at = time.monotonic() + self._wake_up_interval

    def _send(self, type_: int, seq: int, payload: bytes, what: str) -> None:
        self.link.write_all(encode_frame(type_, seq, payload), what=what)

    def _request(self, type_: int, payload: bytes, *, timeout: Optional[float] = None) -> bytes:
        if self._ended is not None:
            raise TransportClosedError(self._ended)
        name = msg.type_name(type_)
        what = f"the reply to {name}"
        limit = self.timeout if timeout is None else timeout
        attempts = 0
        seq = self._next_seq()
        # Every attempt is the same idempotent request: a reply to any of them answers it.
        sent = {seq}
        self._send(type_, seq, payload, name)
        deadline = time.monotonic() + limit
        self._arm_wake_up()
        try:
            while True:
                try:
                    event = self._next_event(deadline, what)
                except TransportTimeoutError as exc:
                    raise TransportTimeoutError(
                        f"no reply to {name} within {limit:g} s{self._pending_note()}",
                        hint="the device may have hung or be busy; a larger timeout helps slow "
                        "runs",
                    ) from exc
                retry = False
                if isinstance(event, BadFrame):
                    self.counters.bad_frames += 1
                    if any(_answers(e, type_, sent) for e in self._events):
                        continue  # the reply came right behind the damaged frame
                    if attempts >= self.retries:
                        raise ProtocolError(
                            f"corrupt frame from the device while waiting for {what} "
                            f"({_BAD_FRAME_REASONS.get(event.reason, event.reason)}, "
                            f"type 0x{event.type:02x}, seq {event.seq}, length {event.length})"
                        )
                    retry = True
                elif event.type & msg.REPLY == 0:
                    continue  # our own request echoed back; devices never send requests
                elif event.seq not in sent:
                    if event.type == msg.MsgType.HELLO | msg.REPLY and event.seq == 0:
                        raise ProtocolError(
                            f"the device restarted while waiting for {what} (it announced "
                            "itself again)",
                            hint="look for a crash or watchdog reset on the device",
                        )
                    self.counters.stale_frames += 1
                    continue
                elif event.type == msg.MsgType.ERROR:
                    error = msg.ErrorReply.decode(event.payload)
                    if error.request != type_:
                        self.counters.stale_frames += 1
                        continue
                    if error.code == msg.ErrorCode.BAD_CRC and attempts < self.retries:
                        retry = True
                    else:
                        raise DeviceError(
                            f"the device refused {name}: {error.describe()}",
                            code=error.code,
                            node=None if error.node == msg.NO_NODE else error.node,
                        )
                elif event.type != type_ | msg.REPLY:
                    self.counters.stale_frames += 1
                    continue
                else:
                    return event.payload
                if retry:
                    attempts += 1
                    self.counters.retries += 1
                    seq = self._next_seq()
                    sent.add(seq)
                    self._send(type_, seq, payload, name)
                    deadline = time.monotonic() + limit
                    self._arm_wake_up()
        finally:
            self._wake_up_at = float("inf")

    def _arm_wake_up(self) -> None:
        self._wake_up_interval = WAKE_UP_SECONDS
        self._wake_up_at = time.monotonic() + WAKE_UP_SECONDS

    def _pending_note(self) -> str:
        parts = []
        if self._decoder.pending_bytes:
            parts.append(f"{self._decoder.pending_bytes} bytes of an unfinished frame held")
        if self._decoder.discarded:
            parts.append(f"{self._decoder.discarded} bytes of garbage dropped")
        return f" ({'; '.join(parts)})" if parts else ""

    def _wait_hello(self, deadline: float) -> msg.HelloReply:
        interval = self.hello_interval
        sent: List[int] = []

        def send() -> None:
            seq = self._next_seq()
            sent.append(seq)
            self.counters.hello_requests += 1
            self._send(msg.MsgType.HELLO, seq, msg.hello_request(), "HELLO")

        send()
        next_hello = time.monotonic() + interval
        while True:
            now = time.monotonic()
            if now >= deadline:
                raise TransportTimeoutError(
                    f"the device did not identify itself within {self.timeout:g} s "
                    f"({len(sent)} HELLO requests sent, {self.link.bytes_read} bytes received"
                    f"{self._pending_note().replace(' (', ', ').rstrip(')')})",
                    hint="is the firmware built as host_driven and on this port?",
                )
            try:
                event = self._next_event(min(deadline, next_hello), "the device's HELLO")
            except TransportTimeoutError:
                if time.monotonic() >= next_hello and time.monotonic() < deadline:
                    send()
                    interval = min(interval * 2, 1.0)
                    next_hello = time.monotonic() + interval
                continue
            if isinstance(event, BadFrame):
                self.counters.bad_frames += 1
                continue
            if event.type == msg.MsgType.HELLO | msg.REPLY and (
                event.seq == 0 or event.seq in sent
            ):
                return msg.HelloReply.decode(event.payload)
            self.counters.stale_frames += 1

    def _describe(self, index: int) -> ModelInfo:
        inputs: List[TensorSpec] = []
        outputs: List[TensorSpec] = []
        first = 0
        name = ""
        while True:
            reply = msg.DescribeReply.decode(
                self._request(msg.MsgType.DESCRIBE, msg.describe_request(index, first))
            )
            name = msg.decode_name(reply.raw_name)
            if reply.status != 0:
                text = f"{msg.error_name(reply.status)} (code {reply.status})"
                if reply.error:
                    text += f": {reply.error}"
                return ModelInfo(index, name, (), (), error=text, error_code=reply.status)
            total = reply.num_inputs + reply.num_outputs
            for position, entry in enumerate(reply.entries, start=reply.first):
                is_input = position < reply.num_inputs
                label = (
                    msg.decode_name(entry.raw_name)
                    if is_input or entry.raw_name
                    else f"output{position - reply.num_inputs}"
                )
                (inputs if is_input else outputs).append(spec_of(label, entry))
            first = reply.first + len(reply.entries)
            if first >= total:
                break
            if not reply.entries:
                raise ProtocolError(f"DESCRIBE of model {index} made no progress at {first}")
        return ModelInfo(index, name, tuple(inputs), tuple(outputs))


# ---- helpers ------------------------------------------------------------------------------


def _answers(event: Union[Frame, BadFrame], type_: int, sent: Set[int]) -> bool:
    return (
        isinstance(event, Frame)
        and event.seq in sent
        and event.type in (type_ | msg.REPLY, msg.MsgType.ERROR)
    )


_BAD_FRAME_REASONS = {
    "crc": "CRC mismatch",
    "too_long": "length too long",
    "truncated": "cut short",
}


def _describe_status(status: int) -> str:
    if status < 0:
        import signal

        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        return f"the device process was killed by {name}"
    return f"the device process exited with status {status}"
