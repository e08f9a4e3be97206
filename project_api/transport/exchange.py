"""Requests and their replies over a link (docs/protocol.md 1 and 3): sequence numbers,
deadlines, wake-up bytes, the settling of half-received frames after a silence, and the
resending of damaged requests. :class:`~project_api.transport.session.Session` speaks the
device protocol's messages through one of these.
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field
from typing import Deque, List, Optional, Set, Union

from ..errors import DeviceError, ProtocolError, TransportClosedError, TransportTimeoutError
from . import messages as msg
from .frames import MAX_PAYLOAD, BadFrame, Frame, FrameDecoder, encode_frame
from .link import Link

# Silence after which a half-received frame counts as cut short and the bytes after its
# marker are scanned again (devices never pause inside a frame; FrameDecoder.idle()).
IDLE_RESET_SECONDS = 0.5
# While a reply is awaited, one 0x00 byte is sent after this much time and again after twice
# as long each time: the device looks at silences only when a byte arrives, so this is what
# lets it find a request hidden behind a truncated frame or garbage (docs/protocol.md 3).
WAKE_UP_SECONDS = IDLE_RESET_SECONDS
WAKE_UP_BYTE = b"\x00"


@dataclass
class Counters:
    stale_frames: int = 0
    bad_frames: int = 0
    retries: int = 0
    hello_requests: int = 0
    wake_ups: int = 0
    notes: List[str] = field(default_factory=list)


class Exchange:
    """One request at a time over ``link``: each waits at most ``timeout`` seconds (unless
    told otherwise) and a damaged one is sent again up to ``retries`` times. ``ended``, once
    set, is why every further request is refused."""

    def __init__(self, link: Link, *, timeout: float, retries: int) -> None:
        self.link = link
        self.timeout = timeout
        self.retries = retries
        self.counters = Counters()
        self.ended: Optional[str] = None
        self.decoder = FrameDecoder(MAX_PAYLOAD)
        self._events: Deque[Union[Frame, BadFrame]] = collections.deque()
        self._seq = 0
        self._last_rx = time.monotonic()
        self._wake_up_at = float("inf")
        self._wake_up_interval = WAKE_UP_SECONDS

    def _next_seq(self) -> int:
        # 0 is what the device's unsolicited boot HELLO carries; requests never use it.
        self._seq = self._seq % 255 + 1
        return self._seq

    def _next_event(self, deadline: float, what: str) -> Union[Frame, BadFrame]:
        """The next frame event, settling a half-received frame after IDLE_RESET_SECONDS of
        silence and sending the wake-up bytes that are due meanwhile."""
        while not self._events:
            if time.monotonic() >= deadline:
                # Also when bytes keep coming: a device babbling non-frames must not hold us.
                raise TransportTimeoutError(f"timed out waiting for {what}")
            wake = deadline
            if self.decoder.pending_bytes:
                wake = min(wake, self._last_rx + IDLE_RESET_SECONDS)
            wake = min(wake, self._wake_up_at)
            try:
                data = self.link.read_some(wake, what=what)
            except TransportTimeoutError:
                now = time.monotonic()
                if self.decoder.pending_bytes and (
                    now >= self._last_rx + IDLE_RESET_SECONDS or now >= deadline
                ):
                    # The device never pauses inside a frame: a frame start held is whole by
                    # now or was cut short; what follows its marker may be the reply.
                    self._events.extend(self.decoder.idle())
                    continue
                if now >= deadline:
                    raise
                if now >= self._wake_up_at:
                    self._wake_up()
                continue
            if self.decoder.pending_bytes and self.link.waited > IDLE_RESET_SECONDS:
                self._events.extend(self.decoder.idle())
            self._last_rx = time.monotonic()
            self._events.extend(self.decoder.feed(data))
        return self._events.popleft()

    def _wake_up(self) -> None:
        self.counters.wake_ups += 1
        self.link.write_all(WAKE_UP_BYTE, what="a wake-up byte")
        self._wake_up_interval *= 2
        self._wake_up_at = time.monotonic() + self._wake_up_interval

    def _send(self, type_: int, seq: int, payload: bytes, what: str) -> None:
        self.link.write_all(encode_frame(type_, seq, payload), what=what)

    def request(self, type_: int, payload: bytes, *, timeout: Optional[float] = None) -> bytes:
        if self.ended is not None:
            raise TransportClosedError(self.ended)
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
        if self.decoder.pending_bytes:
            parts.append(f"{self.decoder.pending_bytes} bytes of an unfinished frame held")
        if self.decoder.discarded:
            parts.append(f"{self.decoder.discarded} bytes of garbage dropped")
        return f" ({'; '.join(parts)})" if parts else ""

    def wait_hello(self, deadline: float, hello_interval: float) -> msg.HelloReply:
        interval = hello_interval
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
