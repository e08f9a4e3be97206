"""Frames of the device protocol: encoding, CRC, the resynchronising decoder, and the
firmware's C decoder (mlf_frame.c, through tests/device_c/frame_tool.c) giving the same
events as the Python one for the same bytes."""

from __future__ import annotations

import random
import struct
import subprocess
import zlib
from pathlib import Path
from typing import List

import pytest
from device_c import cbuild

from project_api.transport.frames import (
    MAX_PAYLOAD,
    OVERHEAD,
    BadFrame,
    Frame,
    FrameDecoder,
    crc32,
    encode_frame,
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
    frames = [encode_frame(t, s, bytes([s]) * s) for t, s in [(1, 1), (0x81, 2), (5, 40)]]
    stream = b"".join(frames)
    whole = FrameDecoder().feed(stream)
    assert whole == [Frame(1, 1, b"\x01"), Frame(0x81, 2, b"\x02" * 2), Frame(5, 40, b"(" * 40)]
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
    frame = encode_frame(5, 5, bytes(range(50)))
    decoder = FrameDecoder()
    assert decoder.feed(frame[:20]) == []
    assert decoder.pending_bytes == 20
    assert decoder.feed(frame[20:]) == [Frame(5, 5, bytes(range(50)))]


def test_truncated_frame_is_dropped_by_abandon_after_a_silence() -> None:
    bogus = encode_frame(3, 1, bytes(4000))[:30]
    decoder = FrameDecoder()
    assert decoder.feed(bogus) == []
    assert decoder.feed(encode_frame(1, 2)) == []  # swallowed: it could be payload
    decoder.abandon()
    assert decoder.pending_bytes == 0 and decoder.discarded == 40
    assert decoder.feed(encode_frame(1, 3)) == [Frame(1, 3, b"")]


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
    bogus = b"".join(encode_frame(1, i, bytes(300))[:8] for i in range(10))
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
    # Tensor bytes that happen to hold whole frames must not act as requests.
    payload = (b"\xa5\x5a\x01\x01\x00\x00" + HELLO_SEQ1 + encode_frame(6, 9, b"\0\0\0\0")) * 20
    frame = encode_frame(3, 4, payload)
    decoder = FrameDecoder()
    events: list = []
    for i in range(0, len(frame), 7):
        events += decoder.feed(frame[i : i + 7])
    assert events == [Frame(3, 4, payload)]


def test_many_bogus_headers_then_zeros_then_a_frame_recovers() -> None:
    # More half-frames than the decoder tracks at once: a run of zeros flushes them all.
    bogus = b"".join(encode_frame(1, i, bytes(300))[:8] for i in range(10))
    decoder = FrameDecoder(max_payload=300)
    decoder.feed(bogus)
    decoder.feed(bytes(decoder.capacity))
    assert decoder.feed(encode_frame(1, 99))[-1] == Frame(1, 99, b"")


# ---- the C decoder agrees ---------------------------------------------------------------


@pytest.fixture(scope="module")
def frame_tool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cbuild.frame_tool(tmp_path_factory.getbasetemp() / "cbuild")


def _python_events(stream: bytes, max_payload: int, chunk: int) -> List[str]:
    decoder = FrameDecoder(max_payload)
    lines = []
    for i in range(0, len(stream), chunk):
        for ev in decoder.feed(stream[i : i + chunk]):
            if isinstance(ev, Frame):
                lines.append(f"OK {ev.type} {ev.seq} {len(ev.payload)} {ev.payload.hex()}")
            else:
                kind = "BAD_CRC" if ev.reason == "crc" else "TOO_LONG"
                lines.append(f"{kind} {ev.type} {ev.seq} {ev.length}")
    lines.append(f"DISCARDED {decoder.discarded}")
    return lines


def _c_events(tool: Path, stream: bytes, max_payload: int, chunk: int) -> List[str]:
    result = subprocess.run(
        [str(tool), "decode", str(max_payload), str(chunk)], input=stream, capture_output=True
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.decode().splitlines()


def _random_stream(rng: random.Random) -> bytes:
    parts = []
    for _ in range(rng.randint(1, 12)):
        kind = rng.random()
        if kind < 0.4:
            parts.append(
                encode_frame(
                    rng.randrange(256), rng.randrange(256), rng.randbytes(rng.randint(0, 90))
                )
            )
        elif kind < 0.55:
            frame = bytearray(
                encode_frame(rng.randrange(256), 1, rng.randbytes(rng.randint(0, 90)))
            )
            frame[rng.randrange(2, len(frame))] ^= 1 << rng.randrange(8)
            parts.append(bytes(frame))
        elif kind < 0.7:
            frame = encode_frame(rng.randrange(256), 2, rng.randbytes(rng.randint(0, 300)))
            parts.append(frame[: rng.randint(1, len(frame))])
        elif kind < 0.85:
            parts.append(rng.choice([b"\xa5", b"\xa5\x5a", b"\x5a\xa5", b"\xa5\x5a\x01\x02\xff"]))
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
        expected = _python_events(stream, max_payload, chunk)
        assert _c_events(frame_tool, stream, max_payload, chunk) == expected, (
            f"case {case}: max_payload={max_payload} chunk={chunk} stream={stream.hex()}"
        )


def test_c_and_python_decoders_agree_on_stuck_headers(frame_tool: Path) -> None:
    bogus = b"".join(encode_frame(1, i, bytes(250))[:8] for i in range(9))
    stream = bogus + encode_frame(1, 77) + bytes(600) + encode_frame(2, 78)
    for chunk in (1, 5, 64):
        expected = _python_events(stream, 256, chunk)
        assert "OK 2 78 0 " in expected
        assert _c_events(frame_tool, stream, 256, chunk) == expected


def test_the_documented_example_exchange_is_made_of_valid_frames() -> None:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "protocol.md").read_text("utf-8")
    lines = [line[2:] for line in doc.splitlines() if line.startswith(("→ A5", "← A5"))]
    assert len(lines) == 15
    for line in lines:
        frame = bytes.fromhex(line)
        assert FrameDecoder().feed(frame) == [Frame(frame[2], frame[3], frame[6:-4])], line
    assert bytes.fromhex(lines[1]) == HELLO_SEQ1
