"""Real device-protocol frames through JSON-RPC, before the full driver exists: a server in its
own process whose stand-in driver starts the fake-runtime test firmware (tests/device_c) with
:class:`project_api.run.host.HostRunner`; the host side is :class:`Session` over the client's
:class:`TransportLink` (write_transport/read_transport, base85 on the wire)."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest

from project_api.errors import TransportClosedError
from project_api.serve.client import ProjectApiClient

REPO_ROOT = Path(__file__).resolve().parent.parent
DEVICE_SOURCES = [
    REPO_ROOT / "tests" / "device_c" / "device_test_main.c",
    REPO_ROOT / "tests" / "device_c" / "fake_runtime.c",
    REPO_ROOT / "crt" / "platform" / "host" / "mlf_platform_host.c",
    REPO_ROOT / "template_project" / "firmware" / "mlf_device.c",
    REPO_ROOT / "template_project" / "firmware" / "mlf_frame.c",
    REPO_ROOT / "template_project" / "firmware" / "mlf_text.c",
]

session_module = pytest.importorskip("project_api.transport.session")
host_module = pytest.importorskip("project_api.run.host")


@pytest.fixture(scope="module")
def test_firmware(tmp_path_factory: pytest.TempPathFactory) -> Path:
    compiler = shutil.which("gcc") or shutil.which("cc")
    missing = [str(p) for p in DEVICE_SOURCES if not p.is_file()]
    if compiler is None or missing:
        pytest.skip(f"needs a C compiler and the test firmware sources (missing: {missing})")
    out = tmp_path_factory.mktemp("firmware") / "device_test"
    proc = subprocess.run(
        [
            compiler,
            "-std=c11",
            "-O1",
            f"-I{REPO_ROOT / 'crt' / 'include'}",
            f"-I{REPO_ROOT / 'template_project' / 'firmware'}",
            f"-I{REPO_ROOT / 'tests' / 'device_c'}",
            *map(str, DEVICE_SOURCES),
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if proc.returncode != 0:
        pytest.skip(f"the test firmware does not build here: {proc.stderr[-500:]}")
    return out


FAKE_SERVER = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    import project_api.driver
    from project_api.run.host import HostRunner

    HERE = Path(__file__).resolve().parent
    FIRMWARE = {firmware!r}


    class FakeProject:
        board = "host"

        def __init__(self, directory):
            self.dir = Path(directory)
            self.options = {{}}

        @classmethod
        def open(cls, project_dir):
            return cls(project_dir)

        def runner(self):
            return HostRunner(FIRMWARE, ["--echo-bytes", "3000", "--max-payload", "256"])


    project_api.driver.Project = FakeProject
    from project_api.serve.server import main

    sys.exit(main(sys.argv[1:], server_dir=HERE))
    """
)


@pytest.fixture
def project(tmp_path: Path, test_firmware: Path) -> Path:
    (tmp_path / "microtvm_api_server.py").write_text(
        FAKE_SERVER.format(firmware=str(test_firmware))
    )
    (tmp_path / "model.tar").write_bytes(b"")
    return tmp_path


def test_session_over_json_rpc(project: Path) -> None:
    Session = session_module.Session
    with ProjectApiClient.launch(project) as client:
        for round_ in range(2):  # open, use, close; then again
            client.open_transport({})
            with Session(client.link(), timeout=20) as session:
                names = [m.name for m in session.info.models]
                assert names == ["adder", "echo", "broken"]
                data = np.arange(3000, dtype=np.uint64).astype(np.uint8)
                data[0] = round_
                outputs = session.run({"data": data}, model="echo")
                np.testing.assert_array_equal(outputs["output0"], data ^ 0x5A)
            client.close_transport()


def test_firmware_exit_is_transport_closed(project: Path) -> None:
    Session = session_module.Session
    with ProjectApiClient.launch(project) as client:
        client.open_transport({})
        session = Session(client.link(), timeout=20)
        session.connect()
        # The EXIT reply itself may be lost: a pty drops what its reader had not read yet
        # when the firmware side closes (the same happens without JSON-RPC).
        with contextlib.suppress(TransportClosedError):
            session.exit(0)
        with pytest.raises(TransportClosedError):
            for _ in range(200):
                client.read_transport(16, 0.05)
        client.close_transport()
        client.open_transport({})  # and it starts again
        with Session(client.link(), timeout=20) as again:
            assert again.info.models[1].name == "echo"
