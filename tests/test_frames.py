"""Frames of the device protocol: encoding, CRC, the resynchronising decoder (garbage, bad
CRCs, per-type length limits, frame starts cut short by a silence and rescanned, frames
inside payloads, the bounded work of a flood of fake headers), and the firmware's C decoder
(mlf_frame.c, through tests/device_c/frame_tool.c) giving the same events as the Python one
for the same bytes and silences."""

from __future__ import annotations

import random
import struct
import subprocess
import zlib
from pathlib import Path
from typing import List, Sequence

import pytest
from device_c import cbuild

from project_api.transport import frames
from project_api.transport.frames import (
    CHECK_CREDIT_BUFFERS,
    CHECK_CREDIT_PER_BYTE,
    MAX_PAYLOAD,
    OVERHEAD,
    SMALL_PAYLOAD,
    BadFrame,
    Frame,
    FrameDecoder,
    crc32,
    encode_frame,
    payload_limit,
)

HELLO_SEQ1 = bytes.fromhex("a55a010100004ed23a98")  # the example in docs/protocol.md


def test_encode_matches_the_documented_example() -> None:
    assert encode_frame(0x01, 1) == HELLO_SEQ1
    frame = encode_frame(0x02, 2, struct.pack("<HH", 0, 0))
    assert frame == bytes.fromhex("a55a02020400000000002b8b092b")


def test_crc_is_zlib_crc32_over_type_to_payload() -> None:
    payload = bytes(range(200))
    frame = encode_frame(0x83, 7, payload)
    assert frame[:2] == b"\xa5\x5a"
    assert frame[2:6] == bytes([0x83, 7]) + struct.pack("<H", 200)
    assert struct.unpack("<I", frame[-4:])[0] == zlib.crc32(frame[2:-4])
    assert crc32(b"hello") == 0x3610A686


def test_encode_refuses_oversized_payload_and_bad_fields() -> None:
    with pytest.raises(ValueError, match="exceeds"):
        encode_frame(1, 1, bytes(MAX_PAYLOAD + 1))
    with pytest.raises(ValueError):
        encode_frame(256, 1)
    with pytest.raises(ValueError):
        encode_frame(1, -1)


def test_decode_round_trip_whole_and_byte_by_byte() -> None:
    parts = [encode_frame(t, s, bytes([s]) * s) for t, s in [(1, 1), (0x81, 2), (3, 40)]]
    stream = b"".join(parts)
    whole = FrameDecoder().feed(stream)
    assert whole == [Frame(1, 1, b"\x01"), Frame(0x81, 2, b"\x02" * 2), Frame(3, 40, b"(" * 40)]
    decoder = FrameDecoder()
    events: list = []
    for byte in stream:
        events += decoder.feed(bytes([byte]))
    assert events == whole
    assert decoder.discarded == 0 and decoder.pending_bytes == 0


def test_garbage_before_between_and_after_frames_is_dropped() -> None:
    a, b = encode_frame(1, 1, b"abc"), encode_frame(2, 2, b"")
    garbage = b"boot log\r\n\xa5\x00\x5a\xa5"
    decoder = FrameDecoder()
    events = decoder.feed(garbage + a + b"\x00\xff" + b + b"tail")
    assert events == [Frame(1, 1, b"abc"), Frame(2, 2, b"")]
    assert decoder.discarded == len(garbage) + 2 + 4


def test_bad_crc_is_reported_and_the_next_frame_still_decodes() -> None:
    bad = bytearray(encode_frame(3, 9, b"payload"))
    bad[-1] ^= 0x40
    good = encode_frame(4, 10, b"ok")
    events = FrameDecoder().feed(bytes(bad) + good)
    assert events == [BadFrame("crc", 3, 9, 7), Frame(4, 10, b"ok")]


def test_length_above_the_receivers_max_is_reported_and_skipped() -> None:
    too_long = encode_frame(3, 1, bytes(100))
    good = encode_frame(1, 2)
    events = FrameDecoder(max_payload=64).feed(too_long + good)
    assert events[0] == BadFrame("too_long", 3, 1, 100)
    assert events[-1] == Frame(1, 2, b"")
    assert all(isinstance(e, BadFrame) for e in events[:-1])


def test_max_length_frame_is_accepted() -> None:
    payload = bytes(random.Random(1).randbytes(MAX_PAYLOAD))
    decoder = FrameDecoder()
    assert decoder.feed(encode_frame(0x85, 3, payload)) == [Frame(0x85, 3, payload)]
    small = FrameDecoder(max_payload=16)
    assert small.feed(encode_frame(1, 1, bytes(16))) == [Frame(1, 1, bytes(16))]
    assert small.capacity == 16 + OVERHEAD


def test_truncated_frame_waits_then_completes() -> None:
    frame = encode_frame(0x85, 5, bytes(range(50)))
    decoder = FrameDecoder()
    assert decoder.feed(frame[:20]) == []
    assert decoder.pending_bytes == 20
    assert decoder.feed(frame[20:]) == [Frame(0x85, 5, bytes(range(50)))]


def test_a_frame_behind_a_truncated_one_is_found_after_a_silence() -> None:
    bogus = encode_frame(3, 1, bytes(4000))[:30]
    good = encode_frame(1, 2)
    decoder = FrameDecoder()
    assert decoder.feed(bogus) == []
    assert decoder.feed(good) == []  # no lookahead: it could be payload of the first
    assert decoder.idle() == [BadFrame("truncated", 3, 1, 4000), Frame(1, 2, b"")]
    assert decoder.pending_bytes == 0 and decoder.discarded == 30
    assert decoder.feed(encode_frame(1, 3)) == [Frame(1, 3, b"")]


def test_a_frame_cut_by_a_silence_is_not_completed_by_later_bytes() -> None:
    # Senders never pause inside a frame: the second half after a silence is not its rest.
    frame = encode_frame(4, 7, b"\x00\x00")
    decoder = FrameDecoder()
    assert decoder.feed(frame[:5]) == []
    assert decoder.idle() == []  # not even a whole header: dropped without a report
    assert decoder.feed(frame[5:]) == []
    assert decoder.feed(frame[:8]) == []
    assert decoder.idle() == [BadFrame("truncated", 4, 7, 2)]
    assert decoder.feed(frame[8:] + encode_frame(1, 8)) == [Frame(1, 8, b"")]
    assert decoder.idle() == [] and decoder.pending_bytes == 0


def test_a_silence_changes_nothing_between_whole_frames() -> None:
    decoder = FrameDecoder()
    for seq in range(1, 4):
        assert decoder.feed(encode_frame(4, seq, b"\x00\x00")) == [Frame(4, seq, b"\x00\x00")]
        assert decoder.idle() == []
    assert decoder.discarded == 0


def test_garbage_with_fake_markers_hides_no_frame() -> None:
    # Fake headers with plausible lengths, some overlapping the real frames behind them.
    reals = [encode_frame(4, 10, b"\x01\x00"), encode_frame(3, 11, bytes(30)), encode_frame(1, 12)]
    garbage = (
        b"\xa5\x5a\x03\x01\x40\x00"  # SET_INPUT claiming 64: reaches into the real frames
        + b"log \xa5\x5a\x02\x09\x04\x00ab"  # DESCRIBE claiming 4, completed by real bytes
        + b"\xa5\x5a\x85\x02\x00\x01"  # a GET_OUTPUT reply header claiming 256
        + b"\xa5"
    )
    decoder = FrameDecoder()
    events = decoder.feed(garbage + b"".join(reals))
    events += decoder.idle()
    found = [e for e in events if isinstance(e, Frame)]
    assert found == [Frame(4, 10, b"\x01\x00"), Frame(3, 11, bytes(30)), Frame(1, 12, b"")]
    assert decoder.pending_bytes == 0
    # Byte by byte, the same.
    decoder = FrameDecoder()
    again: list = []
    for byte in garbage + b"".join(reals):
        again += decoder.feed(bytes([byte]))
    again += decoder.idle()
    assert again == events


def test_a_fake_header_completed_by_real_bytes_is_rescanned_at_once() -> None:
    # A RUN-reply header claiming 2 bytes: the real frame completes it, its CRC fails, and
    # the real frame is found behind it without any silence.
    events = FrameDecoder().feed(b"\xa5\x5a\x84\x05\x02\x00" + encode_frame(0x83, 6))
    assert events[-1] == Frame(0x83, 6, b"")
    assert all(isinstance(e, BadFrame) and e.reason == "crc" for e in events[:-1])


@pytest.mark.parametrize(
    "type_, limit",
    [
        (0x01, SMALL_PAYLOAD),
        (0x02, 4),
        (0x03, MAX_PAYLOAD),
        (0x04, 2),
        (0x05, 12),
        (0x06, 4),
        (0x81, 1024),
        (0x82, MAX_PAYLOAD),
        (0x83, 0),
        (0x84, MAX_PAYLOAD),  # 28 bytes, then the host firmware's per-call workspace
        (0x85, MAX_PAYLOAD),
        (0x86, 0),
        (0x07, 4),
        (0x87, MAX_PAYLOAD),
        (0xFF, 135),
        (0x00, SMALL_PAYLOAD),
        (0x7E, SMALL_PAYLOAD),
        (0xC3, SMALL_PAYLOAD),
    ],
)
def test_a_header_longer_than_its_type_allows_is_refused_at_once(type_: int, limit: int) -> None:
    assert payload_limit(type_) == limit
    good = encode_frame(1, 9)
    decoder = FrameDecoder()
    if limit < MAX_PAYLOAD:
        header = bytes([0xA5, 0x5A, type_, 3]) + struct.pack("<H", limit + 1)
        assert decoder.feed(header + good) == [
            BadFrame("too_long", type_, 3, limit + 1),
            good_event(),
        ]
    # At the limit, the frame is waited for.
    frame = encode_frame(type_, 4, bytes(limit))
    assert decoder.feed(frame) == [Frame(type_, 4, bytes(limit))]
    # A receiver's smaller max payload wins over the type's limit.
    small = FrameDecoder(max_payload=16)
    if limit > 16:
        assert small.feed(frame[:6] + good) == [BadFrame("too_long", type_, 4, limit), good_event()]


def good_event() -> Frame:
    return Frame(1, 9, b"")


def test_a_hello_claiming_60000_bytes_does_not_hide_the_next_request() -> None:
    events = FrameDecoder().feed(b"\xa5\x5a\x01\x05\x60\xea" + encode_frame(4, 6, b"\x00\x00"))
    assert events == [BadFrame("too_long", 1, 5, 60000), Frame(4, 6, b"\x00\x00")]


def test_lookahead_takes_a_complete_frame_after_a_truncated_one() -> None:
    # A header claiming 4000 bytes that never come: with lookahead the next good frame is
    # taken as soon as it is complete, without waiting for 4000 bytes.
    bogus = encode_frame(3, 1, bytes(4000))[:30]
    good = encode_frame(1, 2)
    decoder = FrameDecoder(lookahead=True)
    events = decoder.feed(bogus)
    events += decoder.feed(good)
    assert events == [Frame(1, 2, b"")]
    assert decoder.pending_bytes == 0


def test_lookahead_with_many_pending_starts_still_finds_the_frame() -> None:
    bogus = b"".join(encode_frame(3, i, bytes(300))[:8] for i in range(10))
    decoder = FrameDecoder(max_payload=300, lookahead=True)
    events = decoder.feed(bogus)
    for piece in (encode_frame(1, 99), bytes(600)):
        events += decoder.feed(piece)
    assert Frame(1, 99, b"") in events


def test_lone_marker_byte_at_a_chunk_end_is_kept() -> None:
    frame = encode_frame(1, 7)
    decoder = FrameDecoder()
    assert decoder.feed(b"xx" + frame[:1]) == []
    assert decoder.feed(frame[1:]) == [Frame(1, 7, b"")]


def test_frames_inside_a_payload_are_never_taken_for_frames() -> None:
    # Tensor bytes that happen to hold whole frames must not act as requests, not even when
    # the line goes silent right after, or halfway through a later frame.
    payload = (b"\xa5\x5a\x01\x01\x00\x00" + HELLO_SEQ1 + encode_frame(6, 9, b"\0\0\0\0")) * 20
    frame = encode_frame(3, 4, payload)
    decoder = FrameDecoder()
    events: list = []
    for i in range(0, len(frame), 7):
        events += decoder.feed(frame[i : i + 7])
    events += decoder.idle()
    assert events == [Frame(3, 4, payload)]
    events = decoder.feed(frame + encode_frame(0x85, 5, payload)[:100])
    events += decoder.idle()
    assert events[0] == Frame(3, 4, payload)
    assert events[1] == BadFrame("truncated", 0x85, 5, len(payload))
    assert Frame(6, 9, b"\0\0\0\0") in events  # the cut-short frame's bytes are scanned


def test_a_corrupt_frame_gives_its_bytes_back_to_the_scan() -> None:
    # Only a good CRC protects a payload: the bytes of a damaged frame are scanned again.
    inner = encode_frame(4, 2, b"\x00\x00")
    outer = bytearray(encode_frame(3, 1, bytes(8) + inner))
    outer[-1] ^= 0x80
    assert FrameDecoder().feed(bytes(outer)) == [BadFrame("crc", 3, 1, 20), Frame(4, 2, b"\0\0")]


def test_many_bogus_headers_then_zeros_then_a_frame_recovers() -> None:
    # More half-frames than the decoder tracks at once: a run of zeros flushes them all.
    bogus = b"".join(encode_frame(3, i, bytes(300))[:8] for i in range(10))
    decoder = FrameDecoder(max_payload=300)
    decoder.feed(bogus)
    decoder.feed(bytes(decoder.capacity))
    assert decoder.feed(encode_frame(1, 99))[-1] == Frame(1, 99, b"")


def _fake_header_flood(length: int, count: int) -> bytes:
    # SET_INPUT headers three bytes apart, each claiming `length` bytes (the densest
    # packing of plausible long headers: a type byte, then the next marker).
    unit = b"\xa5\x5a\x03"
    stream = unit * count + struct.pack("<H", length)
    assert FrameDecoder(length).feed(stream[:6])[0:0] == []
    return stream


def test_a_flood_of_long_fake_headers_costs_bounded_work(monkeypatch: pytest.MonkeyPatch) -> None:
    checked = [0]

    def counting_crc32(data: frames.Buffer, crc: int = 0) -> int:
        checked[0] += len(data)
        return zlib.crc32(data, crc) & 0xFFFFFFFF

    monkeypatch.setattr(frames, "crc32", counting_crc32)
    max_payload = 0x035A  # what `5A 03` reads as: every header of the flood is plausible
    decoder = FrameDecoder(max_payload)
    flood = _fake_header_flood(max_payload, 20_000)
    events = decoder.feed(flood)
    events += decoder.feed(bytes(decoder.capacity))  # completes every fake header
    events += decoder.feed(encode_frame(1, 5))
    assert events[-1] == Frame(1, 5, b"")
    received = len(flood) + decoder.capacity + OVERHEAD
    bound = CHECK_CREDIT_PER_BYTE * received + CHECK_CREDIT_BUFFERS * decoder.capacity
    assert checked[0] <= bound
    # Without the credit every one of the 20000 headers would have been checked.
    assert checked[0] < 20_000 * max_payload / 10


def test_a_long_frame_behind_a_few_fake_headers_is_still_checked() -> None:
    # The credit covers a few long fake headers reaching into a real long frame.
    real = encode_frame(3, 8, bytes(range(256)) * 63)
    fakes = b"".join(bytes([0xA5, 0x5A, 3, i]) + struct.pack("<H", len(real) - 3) for i in range(3))
    decoder = FrameDecoder()
    events = decoder.feed(fakes + real)
    events += decoder.idle()
    assert [e for e in events if isinstance(e, Frame)] == [Frame(3, 8, bytes(range(256)) * 63)]


# ---- the C decoder agrees ---------------------------------------------------------------


@pytest.fixture(scope="module")
def frame_tool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cbuild.frame_tool(tmp_path_factory.getbasetemp() / "cbuild")


_KINDS = {"crc": "BAD_CRC", "too_long": "TOO_LONG", "truncated": "TRUNCATED"}


def _python_events(
    stream: bytes, max_payload: int, chunk: int, gaps: Sequence[int] = ()
) -> List[str]:
    """As frame_tool: CHUNK bytes at a time, a silence before each offset in gaps."""
    decoder = FrameDecoder(max_payload)
    lines: List[str] = []

    def record(events: list) -> None:
        for ev in events:
            if isinstance(ev, Frame):
                lines.append(f"OK {ev.type} {ev.seq} {len(ev.payload)} {ev.payload.hex()}")
            else:
                lines.append(f"{_KINDS[ev.reason]} {ev.type} {ev.seq} {ev.length}")

    pending = list(gaps)
    pos = 0
    while pos < len(stream):
        if pending and pending[0] <= pos:
            pending.pop(0)
            record(decoder.idle())
            continue
        end = min(pos + chunk, len(stream), pending[0] if pending else len(stream))
        record(decoder.feed(stream[pos:end]))
        pos = end
    if pending:
        record(decoder.idle())
    lines.append(f"DISCARDED {decoder.discarded}")
    return lines


def _c_events(
    tool: Path, stream: bytes, max_payload: int, chunk: int, gaps: Sequence[int] = ()
) -> List[str]:
    result = subprocess.run(
        [str(tool), "decode", str(max_payload), str(chunk), *map(str, gaps)],
        input=stream,
        capture_output=True,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.decode().splitlines()


_TYPES = [1, 2, 3, 4, 5, 6, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0xFF]


def _random_frame(rng: random.Random, seq: int, longest: int) -> bytes:
    type_ = rng.choice(_TYPES) if rng.random() < 0.8 else rng.randrange(256)
    limit = min(payload_limit(type_), longest)
    length = rng.randint(0, limit) if rng.random() < 0.9 else rng.randint(0, longest)
    return encode_frame(type_, seq, rng.randbytes(length))


def _random_stream(rng: random.Random) -> bytes:
    parts = []
    for _ in range(rng.randint(1, 12)):
        kind = rng.random()
        if kind < 0.4:
            parts.append(_random_frame(rng, rng.randrange(256), 90))
        elif kind < 0.55:
            damaged = bytearray(_random_frame(rng, 1, 90))
            damaged[rng.randrange(2, len(damaged))] ^= 1 << rng.randrange(8)
            parts.append(bytes(damaged))
        elif kind < 0.7:
            frame = _random_frame(rng, 2, 300)
            parts.append(frame[: rng.randint(1, len(frame))])
        elif kind < 0.85:
            parts.append(
                rng.choice(
                    [
                        b"\xa5",
                        b"\xa5\x5a",
                        b"\x5a\xa5",
                        b"\xa5\x5a\x01\x02\xff",
                        b"\xa5\x5a\x03\x07\x20\x00",
                    ]
                )
            )
        else:
            parts.append(rng.randbytes(rng.randint(1, 40)))
    return b"".join(parts)


def test_c_crc_and_encoding_match_python(frame_tool: Path) -> None:
    data = random.Random(5).randbytes(3000)
    out = subprocess.run([str(frame_tool), "crc"], input=data, capture_output=True, check=True)
    assert int(out.stdout, 16) == zlib.crc32(data)
    out = subprocess.run(
        [str(frame_tool), "encode", "131", "200"], input=data[:500], capture_output=True, check=True
    )
    assert out.stdout == encode_frame(131, 200, data[:500])


def test_c_and_python_decoders_agree_on_random_streams(frame_tool: Path) -> None:
    rng = random.Random(20240601)
    for case in range(150):
        stream = _random_stream(rng)
        max_payload = rng.choice([16, 64, 100, 300, MAX_PAYLOAD])
        chunk = rng.choice([1, 2, 3, 7, 64, 1000])
        gaps = sorted(rng.sample(range(len(stream) + 1), min(len(stream) + 1, rng.randint(0, 3))))
        expected = _python_events(stream, max_payload, chunk, gaps)
        assert _c_events(frame_tool, stream, max_payload, chunk, gaps) == expected, (
            f"case {case}: max_payload={max_payload} chunk={chunk} gaps={gaps} "
            f"stream={stream.hex()}"
        )


def test_c_and_python_decoders_agree_on_stuck_headers(frame_tool: Path) -> None:
    bogus = b"".join(encode_frame(3, i, bytes(250))[:8] for i in range(9))
    stream = bogus + encode_frame(1, 77) + bytes(600) + encode_frame(2, 78, b"\0\0\0\0")
    for chunk in (1, 5, 64):
        expected = _python_events(stream, 256, chunk)
        assert "OK 2 78 4 00000000" in expected
        assert _c_events(frame_tool, stream, 256, chunk) == expected


def test_c_finds_the_frame_behind_a_truncated_one_after_a_silence(frame_tool: Path) -> None:
    stream = encode_frame(3, 1, bytes(4000))[:30] + encode_frame(1, 2)
    events = _c_events(frame_tool, stream, 4096, 7, [len(stream)])
    assert events == ["TRUNCATED 3 1 4000", "OK 1 2 0 ", "DISCARDED 30"]
    assert events == _python_events(stream, 4096, 7, [len(stream)])
    assert _c_events(frame_tool, stream, 4096, 7) == ["DISCARDED 0"]  # no silence: held


def test_c_never_takes_a_frame_inside_a_payload(frame_tool: Path) -> None:
    payload = (HELLO_SEQ1 + encode_frame(6, 9, b"\0\0\0\0")) * 30
    stream = encode_frame(3, 4, payload) + encode_frame(0x85, 5, payload)[:50]
    for chunk in (1, 13, 4096):
        events = _c_events(frame_tool, stream, 4096, chunk, [len(stream)])
        assert events[0] == f"OK 3 4 {len(payload)} {payload.hex()}"
        assert events[1] == f"TRUNCATED 133 5 {len(payload)}"
        assert events == _python_events(stream, 4096, chunk, [len(stream)])


def test_c_and_python_agree_on_a_flood_of_fake_headers(frame_tool: Path) -> None:
    max_payload = 0x035A
    stream = _fake_header_flood(max_payload, 3000) + bytes(2000) + encode_frame(1, 5)
    for chunk in (1, 100):
        expected = _python_events(stream, max_payload, chunk, [len(stream) - 10])
        assert "OK 1 5 0 " in expected
        assert _c_events(frame_tool, stream, max_payload, chunk, [len(stream) - 10]) == expected


def test_c_and_python_agree_on_the_limit_of_every_type(frame_tool: Path) -> None:
    """Each type's limit, probed at the limit and one byte past it (a receiver of 65535 bytes
    cannot be sent 65536: those types are probed at the limit only)."""
    stream = b""
    for type_ in range(256):
        limit = payload_limit(type_)
        stream += encode_frame(type_, 1, bytes(limit))
        if limit < MAX_PAYLOAD:
            stream += bytes([0xA5, 0x5A, type_, 2]) + struct.pack("<H", limit + 1)
    expected = _python_events(stream, MAX_PAYLOAD, 4096)
    # every frame whole, every over-long header refused, then the DISCARDED line
    assert len(expected) == 256 + sum(payload_limit(t) < MAX_PAYLOAD for t in range(256)) + 1
    assert _c_events(frame_tool, stream, MAX_PAYLOAD, 4096) == expected


def test_the_documented_example_exchange_is_made_of_valid_frames() -> None:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "protocol.md").read_text("utf-8")
    lines = [line[2:] for line in doc.splitlines() if line.startswith(("→ A5", "← A5"))]
    assert len(lines) == 15
    for line in lines:
        frame = bytes.fromhex(line)
        assert FrameDecoder().feed(frame) == [Frame(frame[2], frame[3], frame[6:-4])], line
    assert bytes.fromhex(lines[1]) == HELLO_SEQ1
