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
behind garbage or a truncated frame is found after half a second of silence; a request
hidden the same way on the device is found when the wake-up byte sent while waiting reaches
it after a silence; a damaged or cut-short reply makes the request be sent again.
"""

from __future__ import annotations

import contextlib
import time
from types import TracebackType
from typing import (
    Any,
    Dict,
    List,
    Mapping,
    Optional,
    Sequence,
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
    describe_exit_status,
)
from . import messages as msg
from .exchange import Counters, Exchange
from .frames import MAX_PAYLOAD
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
        timeout = float(timeout)
        self.run_timeout = float(run_timeout) if run_timeout is not None else timeout
        self.ticks_to_instructions = ticks_to_instructions
        self.hello_interval = hello_interval
        self.chunk_size = chunk_size
        self.runner = runner
        if isinstance(link, Link):
            self.link = link
        else:
            why = self._why_closed if runner is not None else None
            try:
                self.link = Link(link, write_timeout=max(timeout, 1.0), on_closed=why)
            except TransportError:
                if runner is not None:  # the session owns the runner from here on
                    runner.stop()
                raise
        if self.link.on_closed is None and runner is not None:
            self.link.on_closed = self._why_closed
        self.last_stats: Optional[RunStats] = None
        self.exchange = Exchange(self.link, timeout=timeout, retries=retries)
        # Per model index, graph node -> function: names for firmware whose tables carry none.
        self.operator_names: Dict[int, Mapping[int, str]] = {}
        self._info: Optional[DeviceInfo] = None

    @property
    def timeout(self) -> float:
        return self.exchange.timeout

    @timeout.setter
    def timeout(self, value: float) -> None:
        self.exchange.timeout = float(value)

    @property
    def counters(self) -> Counters:
        """What the exchange met: stale and bad frames, retries, HELLOs, wake-ups."""
        return self.exchange.counters

    def _request(self, type_: int, payload: bytes, *, timeout: Optional[float] = None) -> bytes:
        return self.exchange.request(type_, payload, timeout=timeout)

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
        self.exchange.decoder.lookahead = True
        try:
            hello = self.exchange.wait_hello(time.monotonic() + self.timeout, self.hello_interval)
        finally:
            self.exchange.decoder.lookahead = False
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
        if self.exchange.ended is not None:
            raise TransportClosedError(self.exchange.ended)
        with contextlib.suppress(TransportClosedError):
            self._request(msg.MsgType.EXIT, msg.exit_request(status))
        self.exchange.ended = f"the session ended (EXIT {status} was sent)"

    def close(self) -> None:
        """Closes the link and stops the runner, if any. Idempotent."""
        if self.exchange.ended is None:
            self.exchange.ended = "the session is closed"
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
        try:
            payload = self._request(
                msg.MsgType.RUN, msg.run_request(info.index), timeout=self.run_timeout
            )
        except DeviceError as err:
            raise self._operator_named(err, info.index) from None
        reply = msg.RunReply.decode(payload)
        self.last_stats = RunStats(
            ticks=reply.ticks,
            tick_hz=reply.tick_hz,
            workspace_bytes=reply.workspace_bytes,
            host_seconds=time.monotonic() - started,
            ticks_to_instructions=self.ticks_to_instructions,
            stack_bytes_used=reply.stack_bytes_used,
            workspace_marks=reply.workspace_marks,
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

    def _operator_named(self, err: DeviceError, model: int) -> DeviceError:
        """A failed operator's error with its function's name, when the device could not
        give it (its tables bind functions by address) and the project knows it."""
        name = self.operator_names.get(model, {}).get(err.node) if err.node is not None else None
        if err.code != OPERATOR_FAILED or not name or f"'{name}'" in err.message:
            return err
        return DeviceError(f"{err.message} '{name}'", hint=err.hint, code=err.code, node=err.node)

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

    def _why_closed(self) -> str:
        runner = self.runner
        if runner is None:
            return ""
        status = runner.exit_status_within(0.5)
        parts = []
        if status is not None:
            parts.append(describe_exit_status(status))
        log = (runner.log or "").strip()
        if log:
            tail = log[-600:]
            parts.append("its log ends with: " + tail.replace("\n", " | "))
        return "; ".join(parts)

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

OPERATOR_FAILED = 9  # the runtime's MLF_ERR_OPERATOR
