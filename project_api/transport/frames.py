"""Frames of the device protocol (docs/protocol.md), byte for byte like mlf_frame.c.

    A5 5A | u8 type | u8 seq | u16 length (LE) | payload | u32 CRC-32 (LE)

The CRC is ``zlib.crc32`` over type, seq, length and payload. :class:`FrameDecoder` is the
same resynchronising decoder as the firmware's (the tests feed both the same streams and
compare the events). Its rules (docs/protocol.md 1.1): frame starts are judged in order; a
header whose length exceeds the receiver's maximum or its type's limit
(:func:`payload_limit`) is rejected at once; a complete frame with a bad CRC, or a start cut
short by a silence (:meth:`FrameDecoder.idle`), gives up only its marker byte and the bytes
after it are scanned again, so a real frame hidden behind garbage is still found; a good
frame's bytes are consumed and never scanned again, so a frame inside its payload is never
taken for one.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import List, Union

MARKER = b"\xa5\x5a"
HEADER_BYTES = 6
CRC_BYTES = 4
OVERHEAD = HEADER_BYTES + CRC_BYTES
MAX_PAYLOAD = 0xFFFF
SMALL_PAYLOAD = 64  # MLF_FRAME_SMALL_PAYLOAD: the limit of unknown types; always CRC-checked
CHECK_CREDIT_PER_BYTE = 8  # MLF_FRAME_CHECK_CREDIT_PER_BYTE
CHECK_CREDIT_BUFFERS = 4  # MLF_FRAME_CHECK_CREDIT_BUFFERS
PENDING_SLOTS = 4  # frame starts the lookahead mode tracks at once

# The longest payload each message type carries (mlf_frame_payload_limit() in mlf_frame.c).
_PAYLOAD_LIMITS = {
    0x02: 4,  # DESCRIBE
    0x03: MAX_PAYLOAD,  # SET_INPUT
    0x04: 2,  # RUN
    0x05: 12,  # GET_OUTPUT
    0x06: 4,  # EXIT
    0x07: 4,  # PROFILE
    0x81: 1024,  # HELLO reply: 532 bytes at most today; later versions may append
    0x82: MAX_PAYLOAD,  # DESCRIBE reply
    0x83: 0,  # SET_INPUT reply
    0x84: MAX_PAYLOAD,  # RUN reply: 28 bytes, then each call's workspace (host firmware)
    0x85: MAX_PAYLOAD,  # GET_OUTPUT reply
    0x86: 0,  # EXIT reply
    0x87: MAX_PAYLOAD,  # PROFILE reply
    0xFF: 135,  # ERROR: 8 bytes + a message of at most 127
}

_HEADER = struct.Struct("<2sBBH")
_CRC = struct.Struct("<I")


Buffer = Union[bytes, bytearray, memoryview]


def crc32(data: Buffer, crc: int = 0) -> int:
    return zlib.crc32(data, crc) & 0xFFFFFFFF


def payload_limit(type_: int) -> int:
    """The longest payload a frame of this type may carry: a header claiming more is
    rejected before any payload byte is awaited (HELLO requests and unknown types:
    :data:`SMALL_PAYLOAD`)."""
    return _PAYLOAD_LIMITS.get(type_, SMALL_PAYLOAD)


def encode_frame(type_: int, seq: int, payload: Buffer = b"") -> bytes:
    """One complete frame."""
    if not 0 <= type_ <= 0xFF or not 0 <= seq <= 0xFF:
        raise ValueError(f"type {type_} and seq {seq} must be bytes")
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"payload of {len(payload)} bytes exceeds {MAX_PAYLOAD}")
    header = _HEADER.pack(MARKER, type_, seq, len(payload))
    crc = crc32(payload, crc32(header[2:]))
    return header + bytes(payload) + _CRC.pack(crc)


@dataclass(frozen=True)
class Frame:
    """A frame whose CRC matched."""

    type: int
    seq: int
    payload: bytes


@dataclass(frozen=True)
class BadFrame:
    """A frame start that was rejected: ``reason`` is ``"crc"`` (complete frame, CRC
    mismatch), ``"too_long"`` (length above the receiver's maximum or the type's limit) or
    ``"truncated"`` (a plausible header whose frame was not whole when the line went
    silent). ``type``, ``seq`` and ``length`` are as read from the (possibly corrupt)
    header."""

    reason: str
    type: int
    seq: int
    length: int


Event = Union[Frame, BadFrame]


class FrameDecoder:
    """Turns received bytes into :class:`Frame` / :class:`BadFrame` events.

    Holds at most ``max_payload + OVERHEAD`` bytes, like the firmware's decoder, so both
    produce the same events for the same bytes fed in the same pieces with silences
    (:meth:`idle`) at the same places.

    ``lookahead`` (off by default, and absent from the firmware): while a frame is
    incomplete, a later complete frame with a good CRC is taken and the incomplete start
    dropped. That un-sticks a corrupt length without waiting for a silence, but would also
    take a frame embedded in another frame's payload for a frame, so only turn it on while
    no payload can carry arbitrary data (a session does during connect, to get past a boot
    log's noise).
    """

    def __init__(self, max_payload: int = MAX_PAYLOAD, *, lookahead: bool = False) -> None:
        if not 0 <= max_payload <= MAX_PAYLOAD:
            raise ValueError(f"max_payload must be 0..{MAX_PAYLOAD}")
        self.max_payload = max_payload
        self.capacity = max_payload + OVERHEAD
        self.lookahead = lookahead
        self.discarded = 0
        self._buf = bytearray()
        self._settled = 0  # leading bytes held that arrived before the last silence
        self._credit_cap = CHECK_CREDIT_BUFFERS * self.capacity
        self._credit = self._credit_cap
        self._scanned = 0
        self._pending: List[int] = []

    @property
    def pending_bytes(self) -> int:
        """Bytes held that do not form a complete frame yet."""
        return len(self._buf)

    def idle(self) -> List[Event]:
        """The line was silent for longer than a sender pauses inside a frame: every frame
        start held must be whole by now or was cut short (``"truncated"``). Nothing is
        dropped: the bytes after a cut-short start's marker are scanned again, and the
        frames that releases are returned with the other events."""
        self._settled = len(self._buf)
        events: List[Event] = []
        self._drain(events)
        return events

    def feed(self, data: Buffer) -> List[Event]:
        events: List[Event] = []
        view = memoryview(data)
        pos = 0
        while pos < len(view):
            room = self.capacity - len(self._buf)
            piece = view[pos : pos + room]
            self._buf += piece
            pos += len(piece)
            earned = min(len(piece), self._credit_cap) * CHECK_CREDIT_PER_BYTE
            self._credit = min(self._credit + earned, self._credit_cap)
            self._drain(events)
        return events

    # -- the algorithm of mlf_frame.c (plus the optional lookahead) -----------------------

    def _drop(self, n: int) -> None:
        del self._buf[:n]
        self._settled = self._settled - n if self._settled > n else 0
        self._scanned = self._scanned - n if self._scanned > n else 0
        self._pending = [p - n for p in self._pending if p > n]

    def _drop_marker(self) -> None:
        self.discarded += 1
        self._drop(1)

    def _length_at(self, pos: int) -> int:
        return self._buf[pos + 4] | (self._buf[pos + 5] << 8)

    def _limit(self, type_: int) -> int:
        return min(payload_limit(type_), self.max_payload)

    def _crc_ok_at(self, pos: int, length: int) -> bool:
        buf = self._buf
        end = pos + HEADER_BYTES + length
        expected = buf[end] | buf[end + 1] << 8 | buf[end + 2] << 16 | buf[end + 3] << 24
        with memoryview(buf) as view:
            return crc32(view[pos + 2 : end]) == expected

    def _find_later_frame(self) -> int:
        fill = len(self._buf)
        kept: List[int] = []
        found = 0
        for pos in self._pending:
            length = self._length_at(pos)
            complete = pos + OVERHEAD + length <= fill
            if not complete or found:
                kept.append(pos)
            elif self._crc_ok_at(pos, length):
                found = pos
        self._pending = kept
        if found:
            return found
        if self._scanned < 1:
            self._scanned = 1
        while self._scanned + HEADER_BYTES <= fill:
            pos = self._buf.find(MARKER, self._scanned, fill - HEADER_BYTES + 2)
            if pos < 0:
                self._scanned = fill - HEADER_BYTES + 1
                break
            length = self._length_at(pos)
            if length <= self._limit(self._buf[pos + 2]):
                if pos + OVERHEAD + length <= fill:
                    if self._crc_ok_at(pos, length):
                        self._scanned = pos + 1
                        return pos
                elif len(self._pending) < PENDING_SLOTS:
                    self._pending.append(pos)
                else:
                    self._scanned = pos
                    return 0
            self._scanned = pos + 1
        return 0

    def _drain(self, events: List[Event]) -> None:
        while True:
            buf = self._buf
            head = buf.find(MARKER)
            if head < 0:
                head = len(buf) - 1 if buf.endswith(b"\xa5") else len(buf)
            if head > 0:
                self.discarded += head
                self._drop(head)
            if not buf:
                return
            # A start from before the last silence gets no more bytes: judge it by those.
            final = self._settled > 0
            known = self._settled if final else len(buf)
            if known < HEADER_BYTES:
                if not final:
                    return
                self._drop_marker()  # not even a header: garbage, nothing to report
                continue
            type_, seq = buf[2], buf[3]
            length = self._length_at(0)
            if length > self._limit(type_):
                events.append(BadFrame("too_long", type_, seq, length))
                self._drop_marker()
                continue
            total = OVERHEAD + length
            if known < total:
                if final:
                    events.append(BadFrame("truncated", type_, seq, length))
                    self._drop_marker()
                    continue
                later = self._find_later_frame() if self.lookahead else 0
                if not later:
                    return
                self.discarded += later
                self._drop(later)
                continue
            if length > SMALL_PAYLOAD:
                if self._credit < length:
                    self._drop_marker()  # out of check credit: a flood of long fake headers
                    continue
                self._credit -= length
            if self._crc_ok_at(0, length):
                events.append(Frame(type_, seq, bytes(buf[HEADER_BYTES : HEADER_BYTES + length])))
                self._drop(total)
            else:
                events.append(BadFrame("crc", type_, seq, length))
                self._drop_marker()
