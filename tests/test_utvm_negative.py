"""What TVM's host never sends, sent to our microTVM RPC firmware by our own client
(tests/utvm_client.py): bad CRCs, stale session ids, garbage between frames, oversized
packets, lying lengths, unknown functions and codes, wrong argument types. Each is answered
(an Exception) or ignored, and the firmware keeps serving: the good request that follows
gets its own reply, and nothing else arrives first.

The codec itself is checked against the byte sequences the spec verified against TVM 0.14.
"""

from __future__ import annotations

import contextlib
import json
import random
import struct
from pathlib import Path
from typing import Any, Iterator, Tuple

import pytest
from conftest import corpus_archive, requires_arm
from utvm_client import (
    CALL_FUNC,
    COPY_TO_REMOTE,
    EXCEPTION,
    FREE_HANDLE,
    GET_GLOBAL_FUNC,
    HANDLE,
    INT,
    MODULE,
    NORMAL,
    NULL,
    RETURN,
    Arg,
    RemoteError,
    Tensor,
    UtvmClient,
    crc16,
    encode_args,
    frame,
    rpc_packet,
)

from project_api.options import OPTIONS

# --- the codec, against the spec's verified bytes ---------------------------------------------


def test_crc16_check_value() -> None:
    assert crc16(b"123456789") == 0x29B1


def test_frame_escapes_and_covers_the_escaped_bytes() -> None:
    assert frame(b"\xff\x01\xfd").hex() == "fffd03000000ffff01fd5187"
    assert frame(b"\0\0\x02").hex() == "fffd030000000000026677"  # the boot Terminate


def test_system_lib_lookup_bytes() -> None:
    body = rpc_packet(GET_GLOBAL_FUNC, encode_args(["runtime.SystemLib"]))
    packet = frame(bytes.fromhex("432210") + body)
    assert packet[:6].hex() == "fffd30000000"
    assert packet[-2:].hex() == "61d9"


def test_unframer_drops_a_bad_packet_whole() -> None:
    from utvm_client import Unframer

    unframer = Unframer()
    got = unframer.feed(
        b"\xfe"
        + frame(b"A" * 9, corrupt_crc=True)
        + b"noise\xff\x00"  # between packets: hunted over, not an error
        + b"\xff\xfd\x02\x00\x00\x00\xff\x07"  # an invalid escape inside a packet
        + frame(b"\xff\x01\xfd")
    )
    assert got == [b"\xff\x01\xfd"]
    assert unframer.dropped == 2  # the bad CRC, the bad escape


# --- against the firmware ---------------------------------------------------------------------

needs_rpc_firmware = pytest.mark.skipif(
    "device_protocol" not in OPTIONS,
    reason="no option device_protocol yet: the firmware cannot be asked for microTVM RPC",
)


def rpc_project(directory: Path, board: str, **options: Any) -> Any:
    """mlp_default's microTVM RPC firmware for ``board``, built."""
    if "device_protocol" not in OPTIONS:
        pytest.skip("no option device_protocol yet: no microTVM RPC firmware to talk to")
    archive = corpus_archive("mlp_default")
    if archive is None:
        pytest.skip("corpus archive mlp_default.tar is absent")
    from project_api.driver import Project

    project = Project.generate(
        archive, directory, board=board, options={"device_protocol": "microtvm", **options}
    )
    project.build()
    return project


@pytest.fixture(scope="module")
def utvm_project(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return rpc_project(tmp_path_factory.mktemp("utvm") / "mlp", "host")


@contextlib.contextmanager
def started(project: Any, timeout: float = 10.0) -> Iterator[Tuple[UtvmClient, Any]]:
    """A fresh firmware with a session started; stopped (and reaped) afterwards."""
    runner, link = project.start_firmware(write_timeout=timeout)
    try:
        client = UtvmClient(link, timeout=timeout)
        client.start()
        yield client, runner
        assert runner.exit_status is None, f"the firmware ended: {runner.log}"
    finally:
        runner.stop()


@pytest.fixture
def device(utvm_project: Any) -> Iterator[Tuple[UtvmClient, Any]]:
    with started(utvm_project) as both:
        yield both


@pytest.fixture(scope="module")
def graph_project(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The same firmware with a graph executor on the device (device_graph_executor)."""
    directory = tmp_path_factory.mktemp("utvm-graph") / "mlp"
    return rpc_project(directory, "host", device_graph_executor=True)


@pytest.fixture
def graph_device(graph_project: Any) -> Iterator[Tuple[UtvmClient, Any]]:
    with started(graph_project) as both:
        yield both


PROBE = rpc_packet(GET_GLOBAL_FUNC, encode_args(["runtime.SystemLib"]))


def outcome(client: UtvmClient, bad: bytes) -> str:
    """Sends ``bad`` (raw bytes) and right after it a good lookup; returns "answered" when an
    Exception came first and then the lookup's reply, "ignored" when the lookup's reply came
    first. Anything else fails the test."""
    client.send_raw(bad)
    client.send_message(NORMAL, PROBE)
    first = client.reply()
    result = "ignored"
    if first.code == EXCEPTION:
        with pytest.raises(RemoteError):
            first.values()
        result, first = "answered", client.reply()
    assert first.code == RETURN, f"reply code {first.code} {first.body.hex()}"
    ((code, handle),) = first.values()
    assert code == HANDLE and handle != 0
    return result


def normal(client: UtvmClient, body: bytes, session: bytes = b"") -> bytes:
    return frame((session or client.session_id) + bytes([NORMAL]) + body)


@needs_rpc_firmware
def test_good_calls(device: Tuple[UtvmClient, Any]) -> None:
    client, _ = device
    lib = client.system_lib()
    assert lib != 0
    size = client.get_global("tvm.rpc.server.GetCRTMaxPacketSize")
    values = client.call(size)
    assert values[0] == (INT, INT) and 64 <= values[1][1] <= 2048 - 11
    pointer = client.alloc(256)
    tensor = Tensor(pointer, (256,), (1, 8, 1))
    client.copy_to(tensor, bytes(range(256)))
    assert client.copy_from(tensor, 256) == bytes(range(256))
    client.free_data(pointer)


@needs_rpc_firmware
def test_bad_crc_is_dropped_whole(device: Tuple[UtvmClient, Any]) -> None:
    client, _ = device
    bad = frame(client.session_id + bytes([NORMAL]) + PROBE, corrupt_crc=True)
    assert outcome(client, bad) == "ignored"
    # A bad packet in the middle of a good one's bytes: both lost, the next one answered.
    assert outcome(client, bad[:10] + bad) == "ignored"


@needs_rpc_firmware
def test_stale_session_is_ignored(device: Tuple[UtvmClient, Any]) -> None:
    client, _ = device
    old = client.session_id
    client.start()  # a restarted host: a new session id
    assert client.session_id != old
    lookup_unknown = rpc_packet(GET_GLOBAL_FUNC, encode_args(["no.such.function"]))
    assert outcome(client, normal(client, lookup_unknown, session=old)) == "ignored"
    assert outcome(client, normal(client, PROBE, session=b"\0\0")) == "ignored"


@needs_rpc_firmware
def test_garbage_between_frames(device: Tuple[UtvmClient, Any]) -> None:
    client, _ = device
    rng = random.Random(28)
    for size in (1, 7, 300, 3000):
        garbage = bytes(rng.randrange(256) for _ in range(size)).rstrip(b"\xff") + b"\x00"
        assert outcome(client, garbage) == "ignored"
    assert outcome(client, b"\xfe" * 50 + b"\xff\xfd\x05") == "ignored"  # a start cut short
    assert outcome(client, b"\xff\xfd\x02\x00\x00\x00\xff\x07") == "ignored"  # bad escape


@needs_rpc_firmware
def test_oversized_packets(device: Tuple[UtvmClient, Any]) -> None:
    client, _ = device
    lib = client.system_lib()
    body = struct.pack("<Q", lib) + encode_args([b"\xaa" * 65536])
    assert outcome(client, normal(client, rpc_packet(CALL_FUNC, body))) in ("answered", "ignored")
    # A length field that promises more than ever comes: the next start abandons it.
    liar = frame(client.session_id + bytes([NORMAL]) + PROBE, length=0x7FFFFFF0)[:40]
    assert outcome(client, liar) == "ignored"


@needs_rpc_firmware
def test_unknown_functions(device: Tuple[UtvmClient, Any]) -> None:
    client, _ = device
    assert client.get_global("no.such.function") == 0
    lib = client.system_lib()
    assert client.module_function(lib, "no_such_operator") == 0
    with pytest.raises(RemoteError):
        client.call(0xDEAD0001)
    assert outcome(client, b"") == "ignored"


@needs_rpc_firmware
def test_wrong_argument_types(device: Tuple[UtvmClient, Any]) -> None:
    client, _ = device
    lib = client.system_lib()
    getter = client.get_global("tvm.rpc.server.ModuleGetFunction")
    # Wrong types or too few arguments: null as TVM's device answers, or an Exception.
    with contextlib.suppress(RemoteError):
        assert client.call(getter, 1, 2, 3) == [(INT, NULL), (NULL, None)]
    with contextlib.suppress(RemoteError):
        assert client.call(getter, Arg(MODULE, lib)) == [(INT, NULL), (NULL, None)]
    cases = [
        rpc_packet(GET_GLOBAL_FUNC, encode_args([5])),
        rpc_packet(FREE_HANDLE, encode_args(["not a handle", 10])),
        rpc_packet(13, encode_args(["cpu", "big", "aligned", "float"])),  # DevAllocData
        rpc_packet(COPY_TO_REMOTE, Tensor(0x10, (4,)).data.to_bytes(8, "little")),  # cut short
        rpc_packet(COPY_TO_REMOTE, encode_args([1]) + b"\x00" * 40),
    ]
    for bad in cases:
        assert outcome(client, normal(client, bad)) == "answered", bad.hex()
    # A copy to memory the device never gave out.
    stray = Tensor(0x10, (4,), (1, 8, 1))
    with pytest.raises(RemoteError):
        client.copy_to(stray, b"\x01\x02\x03\x04")
    with pytest.raises(RemoteError):
        client.copy_from(stray, 4)


@needs_rpc_firmware
def test_unknown_and_misplaced_codes(device: Tuple[UtvmClient, Any]) -> None:
    client, _ = device
    for code in (99, 21, 0x7FFFFFFF, -1):
        assert outcome(client, normal(client, rpc_packet(code, encode_args([])))) == "answered"
    for code in (RETURN, EXCEPTION):  # replies sent to the device: answering is not required
        packet = normal(client, rpc_packet(code, encode_args([])))
        assert outcome(client, packet) in ("answered", "ignored")
    # A MinRPC length that disagrees with the message, and a zero length (ignored by MinRPC).
    lying = struct.pack("<Qi", 400, GET_GLOBAL_FUNC) + encode_args(["x"])
    assert outcome(client, normal(client, lying)) in ("answered", "ignored")
    assert outcome(client, normal(client, struct.pack("<Q", 0))) in ("answered", "ignored")
    # Message types the device never expects from a host.
    for kind in (0x03, 0x01, 0x44):
        assert outcome(client, frame(client.session_id + bytes([kind]) + b"xyz")) == "ignored"


@needs_rpc_firmware
def test_one_firmware_survives_everything(device: Tuple[UtvmClient, Any], tmp_path: Path) -> None:
    """All the abuse in one session, then a session restart and a normal exchange."""
    client, runner = device
    rng = random.Random(2028)
    for _ in range(20):
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
        client.send_raw(junk.rstrip(b"\xff") + b"\x00")
        client.send_raw(frame(junk, corrupt_crc=True))
    client.send_raw(normal(client, rpc_packet(77, b"")))
    client.start()
    assert client.system_lib() != 0
    assert runner.exit_status is None


def test_our_session_refuses_a_microtvm_project(utvm_project: Any) -> None:
    """Project.session() speaks our device protocol: on a microTVM firmware it says so at
    once instead of waiting for a HELLO that never comes."""
    from project_api.errors import FlashError

    with pytest.raises(FlashError) as info:
        utvm_project.session(timeout=5.0)
    assert "microTVM RPC" in str(info.value)
    assert "device_protocol=mlf" in (info.value.hint or "")


SOFTMAX = "tvmgen_default_fused_nn_softmax"  # mlp_default's last operator: [1, 4] -> [1, 4]
FLOAT32 = (2, 32, 1)


@needs_rpc_firmware
def test_operator_calls_are_checked(device: Tuple[UtvmClient, Any]) -> None:
    """An operator of the system library called with real device tensors works; with too few
    arguments, a number for a tensor or a tensor too small it is an Exception, never TVM's
    operator running on garbage."""
    import numpy as np

    client, _ = device
    lib = client.system_lib()
    softmax = client.module_function(lib, SOFTMAX)
    assert softmax != 0
    x, y = client.alloc(16), client.alloc(16)
    tx, ty = Tensor(x, (1, 4), FLOAT32), Tensor(y, (1, 4), FLOAT32)
    values = np.array([[1.0, 2.0, 3.0, 4.0]], dtype=np.float32)
    client.copy_to(tx, values.tobytes())
    client.call(softmax, tx, ty)
    got = np.frombuffer(client.copy_from(ty, 16), dtype=np.float32)
    want = np.exp(values[0] - values.max()) / np.exp(values[0] - values.max()).sum()
    np.testing.assert_allclose(got, want, rtol=1e-5)
    small = client.alloc(4)
    for args in ([], [tx], [tx, 7], [tx, Tensor(small, (1, 1), FLOAT32)]):
        with pytest.raises(RemoteError):
            client.call(softmax, *args)
    client.call(softmax, tx, ty)  # still serving, the same function


@needs_rpc_firmware
@requires_arm
@pytest.mark.qemu
def test_abuse_over_qemu_uart(tmp_path: Path) -> None:
    """The same firmware on qemu-mps2-an385, behind its UART: a bad CRC, a stale session,
    garbage, an unknown code; each answered or ignored, then a new session serves."""
    project = rpc_project(tmp_path / "mlp", "qemu-mps2-an385")
    with started(project, timeout=30.0) as (client, runner):
        bad = frame(client.session_id + bytes([NORMAL]) + PROBE, corrupt_crc=True)
        assert outcome(client, bad) == "ignored"
        old = client.session_id
        client.start()
        assert outcome(client, normal(client, PROBE, session=old)) == "ignored"
        garbage = bytes(random.Random(85).randrange(256) for _ in range(500))
        assert outcome(client, garbage.rstrip(b"\xff") + b"\x00") == "ignored"
        assert outcome(client, normal(client, rpc_packet(99, encode_args([])))) == "answered"
        client.start()
        assert client.system_lib() != 0
        assert runner.exit_status is None


def softmax_graph(width: int, func: str = SOFTMAX) -> str:
    """A graph JSON of one node: x [1, width] float32 -> func -> [1, width]."""
    shape = [1, width]
    return json.dumps(
        {
            "nodes": [
                {"op": "null", "name": "x", "inputs": []},
                {
                    "op": "tvm_op",
                    "name": "s",
                    "attrs": {"func_name": func, "num_inputs": "1", "num_outputs": "1"},
                    "inputs": [[0, 0, 0]],
                },
            ],
            "arg_nodes": [0],
            "heads": [[1, 0, 0]],
            "attrs": {
                "dltype": ["list_str", ["float32", "float32"]],
                "storage_id": ["list_int", [0, 1]],
                "shape": ["list_shape", [shape, shape]],
            },
            "node_row_ptr": [0, 1, 2],
        }
    )


@needs_rpc_firmware
def test_graph_executor_create_is_refused_by_default(device: Tuple[UtvmClient, Any]) -> None:
    client, _ = device
    create = client.get_global("tvm.graph_executor.create")
    with pytest.raises(RemoteError, match="device_graph_executor=true"):
        client.call(create, softmax_graph(4), Arg(MODULE, client.system_lib()), 1, 0)
    assert client.system_lib() != 0  # still serving


@needs_rpc_firmware
def test_graph_executor_create_abuse(graph_device: Tuple[UtvmClient, Any]) -> None:
    """tvm.graph_executor.create with a JSON that does not parse, one naming a function the
    firmware lacks, one passing a function less than its signature; a module freed twice and
    called after its free: each an Exception, and the firmware keeps serving."""
    import numpy as np

    client, runner = graph_device
    create = client.get_global("tvm.graph_executor.create")
    lib = client.system_lib()

    def graph(text: str) -> int:
        values = client.call(create, text, Arg(MODULE, lib), 1, 0)
        assert values[0] == (INT, MODULE), values
        return int(values[1][1])

    for text, why in (
        ('{"nodes": [', "tvm.graph_executor.create"),
        (softmax_graph(4, SOFTMAX + "_missing"), "no function in the system library"),
        (softmax_graph(1), "smaller than its model's graph"),
        ("x" * 100, "tvm.graph_executor.create"),
    ):
        with pytest.raises(RemoteError, match=why):
            graph(text)
    with pytest.raises(RemoteError, match="expected"):
        client.call(create, softmax_graph(4), 7, 1, 0)  # no module
    module = graph(softmax_graph(4))
    run = client.module_function(module, "run")
    get_input = client.module_function(module, "get_input")
    assert client.module_function(module, "set_input_zero_copy") == 0
    x = np.array([[1.0, 2.0, 3.0, 4.0]], dtype=np.float32)
    client.copy_to(Tensor(client.call(get_input, "x")[1][1][0], (1, 4), FLOAT32), x.tobytes())
    client.call(run)
    out = client.call(client.module_function(module, "get_output"), 0)[1][1][0]
    got = np.frombuffer(client.copy_from(Tensor(out, (1, 4), FLOAT32), 16), dtype=np.float32)
    np.testing.assert_allclose(got, np.exp(x[0] - 4) / np.exp(x[0] - 4).sum(), rtol=1e-5)
    client.free(module, MODULE)
    with pytest.raises(RemoteError, match="already freed"):
        client.free(module, MODULE)
    with pytest.raises(RemoteError, match="freed"):
        client.call(run)
    assert client.module_function(module, "run") == 0
    assert outcome(client, b"") == "ignored"  # still serving
    assert graph(softmax_graph(4)) != module  # its memory came back
    assert runner.exit_status is None
