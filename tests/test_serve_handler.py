"""The Project API methods on a stand-in driver: template vs generated project, paths,
options handed to the driver, and the transport over a real pty with a real child process
(``cat`` echoes what the "firmware" receives), including reaping."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

serial = pytest.importorskip("serial")

from project_api.errors import (  # noqa: E402
    GenerateError,
    ProjectApiError,
    TransportClosedError,
    TransportTimeoutError,
)
from project_api.options import OPTIONS  # noqa: E402
from project_api.resources import template_dir  # noqa: E402
from project_api.run.base import Runner, live_children, reap, spawn  # noqa: E402
from project_api.serve import handler as handler_module  # noqa: E402
from project_api.serve.client import ProjectApiClient  # noqa: E402
from project_api.serve.handler import ProjectApiHandler, board_kind  # noqa: E402
from project_api.serve.server import ProjectApiServer  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("cat") is None, reason="needs cat")


class CatRunner(Runner):
    """A "firmware" that echoes: ``cat`` on the master side of a pty; the link is pyserial
    on the slave side, exactly as a host firmware or QEMU console would be opened."""

    fail_start = False

    def __init__(self) -> None:
        self.proc: Optional[subprocess.Popen] = None
        self.link: Any = None
        self.stopped = 0
        self.start_timeout: Optional[float] = None

    def start(self, timeout: float) -> Any:
        self.start_timeout = timeout
        master, slave = os.openpty()
        try:
            self.proc = spawn(["cat"], stdin=master, stdout=master, stderr=subprocess.DEVNULL)
            if self.fail_start:
                raise TransportTimeoutError("no hello from the firmware")
            self.link = serial.Serial(os.ttyname(slave), baudrate=115200, timeout=timeout)
        finally:
            os.close(master)
            os.close(slave)
        return self.link

    def stop(self) -> Optional[int]:
        self.stopped += 1
        if self.link is not None:
            self.link.close()
        return reap(self.proc) if self.proc is not None else None

    @property
    def exit_status(self) -> Optional[int]:
        return None if self.proc is None else self.proc.poll()

    @property
    def log(self) -> str:
        return "cat said nothing"


class FakeProject:
    """Stands in for project_api.driver.Project; records what the handler asks of it."""

    generated: List[Tuple[Any, ...]] = []
    opened: List[FakeProject] = []
    runners: List[CatRunner] = []
    board = "host"

    def __init__(self, directory: Path) -> None:
        self.dir = Path(directory)
        self.options: Dict[str, Any] = {"board": FakeProject.board}
        self.built_with: Optional[Dict[str, Any]] = None
        self.flashed = False

    @classmethod
    def generate(
        cls,
        archive: Any,
        project_dir: Any,
        *,
        board: str = "host",
        project_type: str = "host_driven",
        model: Optional[str] = None,
        options: Any = None,
        progress: Any = None,
    ) -> FakeProject:
        cls.generated.append((archive, project_dir, board, project_type, model, dict(options)))
        Path(project_dir).mkdir(parents=True, exist_ok=True)
        shutil.copy(archive, Path(project_dir) / "model.tar")
        if progress is not None:
            progress("generated")
        return cls(Path(project_dir))

    @classmethod
    def open(cls, project_dir: Any) -> FakeProject:
        project = cls(Path(project_dir))
        cls.opened.append(project)
        return project

    def build(self, *, progress: Any = None) -> Path:
        self.built_with = dict(self.options)
        return self.dir / "build" / "main"

    def flash(self) -> None:
        self.flashed = True

    def runner(self) -> CatRunner:
        runner = CatRunner()
        FakeProject.runners.append(runner)
        return runner


@pytest.fixture
def fake_driver(monkeypatch: pytest.MonkeyPatch) -> Any:
    FakeProject.generated = []
    FakeProject.opened = []
    FakeProject.runners = []
    FakeProject.board = "host"
    CatRunner.fail_start = False
    monkeypatch.setattr("project_api.driver.Project", FakeProject)
    yield FakeProject
    for runner in FakeProject.runners:
        runner.stop()


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    path = tmp_path / "in" / "model.tar"
    path.parent.mkdir()
    path.write_bytes(b"not really a tar")
    return path


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "proj"
    directory.mkdir()
    (directory / "model.tar").write_bytes(b"")
    return directory


@pytest.fixture
def handler(project_dir: Path, fake_driver: Any) -> Any:
    h = ProjectApiHandler(project_dir, client_cwd=None)
    yield h
    h.shutdown()


GEN_OPTIONS = {"board": "host", "project_type": "host_driven"}


def read_exactly(h: ProjectApiHandler, n: int, timeout: float = 5.0) -> bytes:
    data = b""
    deadline = time.monotonic() + timeout
    while len(data) < n:
        data += h.read_transport(n - len(data), max(0.01, deadline - time.monotonic()))
    return data


# --- server_info_query ----------------------------------------------------------------------


def test_info_in_a_template_dir(tmp_path: Path) -> None:
    info = ProjectApiHandler(tmp_path).server_info_query("0.14.0")
    assert info["platform_name"] == "mlf-project-api"
    assert info["is_template"] is True
    assert info["model_library_format_path"] == ""
    assert info["protocol_version"] == 1
    names = [o["name"] for o in info["project_options"]]
    assert names[:3] == ["verbose", "project_type", "board"]


def test_info_in_the_shipped_template() -> None:
    assert not (template_dir() / "model.tar").exists()
    assert ProjectApiHandler(template_dir()).server_info_query("0.14.0")["is_template"] is True


def test_info_in_a_generated_project(project_dir: Path) -> None:
    info = ProjectApiHandler(project_dir).server_info_query(None)
    assert info["is_template"] is False
    path = info["model_library_format_path"]
    assert os.path.isabs(path)
    assert path == str(project_dir.resolve() / "model.tar")


# --- generate_project -----------------------------------------------------------------------


def test_generate_hands_coerced_options_to_the_driver(
    tmp_path: Path, archive: Path, fake_driver: Any
) -> None:
    h = ProjectApiHandler(template_dir())
    options = dict(
        GEN_OPTIONS,
        project_type="standalone",
        model="net2",
        verbose="true",
        compile_definitions="-DX=1 Y",
        workspace_size_bytes="4096",
        serial_port="/dev/ttyACM0",
        unknown="x",
    )
    h.generate_project(str(archive), "/nonexistent/standalone_crt", str(tmp_path / "p"), options)
    (got_archive, got_dir, board, project_type, model, opts) = fake_driver.generated[0]
    assert (Path(got_archive), Path(got_dir)) == (archive, tmp_path / "p")
    assert (board, project_type, model) == ("host", "standalone", "net2")
    assert opts == {
        "verbose": True,
        "compile_definitions": ["X=1", "Y"],
        "warning_as_error": False,
        "workspace_size_bytes": 4096,
        "qemu_icount": False,
        "graph_format": "tables",
        "memory_plan": "liveness",
        "offline": False,
        "allow_archive_paths": False,
        "allow_dependency_cmake": False,
        "mlperftiny_energy": False,  # advertised for TVM's mlperftiny flow; a default is harmless
        "device_graph_executor": False,
        "cmsis_nn": False,
    } | ({"cmsis_path": os.environ["CMSIS_PATH"]} if os.environ.get("CMSIS_PATH") else {})


requires_device_protocol = pytest.mark.skipif(
    "device_protocol" not in OPTIONS, reason="the option device_protocol is not in the table yet"
)


@requires_device_protocol
@pytest.mark.parametrize(
    "given, project_type, wanted",
    [
        (None, "host_driven", "microtvm"),  # TVM's client: tvm.micro.Session must open it
        ("", "host_driven", "microtvm"),  # tvmc sends an unset option as ""
        ("mlf", "host_driven", "mlf"),  # the caller chose
        ("microtvm", "host_driven", "microtvm"),
        (None, "standalone", None),  # no protocol to choose
    ],
)
def test_generate_chooses_the_device_protocol_for_tvm(
    tmp_path: Path,
    archive: Path,
    fake_driver: Any,
    given: Optional[str],
    project_type: str,
    wanted: Optional[str],
) -> None:
    h = ProjectApiHandler(template_dir())
    options = dict(GEN_OPTIONS, project_type=project_type, device_protocol=given)
    h.generate_project(str(archive), "", str(tmp_path / "p"), options)
    assert fake_driver.generated[0][5].get("device_protocol") == wanted


@requires_device_protocol
def test_device_protocol_is_advertised_unset() -> None:
    """TVM's clients send back every advertised default: only an unset one leaves the choice
    to generate_project."""
    info = ProjectApiHandler(template_dir()).server_info_query("0.14.0")
    option = {o["name"]: o for o in info["project_options"]}["device_protocol"]
    assert option["default"] is None
    assert "generate_project" in (option["required"] or []) + (option["optional"] or [])


def test_generate_relative_project_dir_without_client_cwd_is_refused(
    archive: Path, fake_driver: Any
) -> None:
    h = ProjectApiHandler(template_dir(), client_cwd=None)
    with pytest.raises(ProjectApiError) as info:
        h.generate_project(str(archive), "", "out/proj", GEN_OPTIONS)
    assert info.value.code == -32602
    message = str(info.value)
    assert "project_dir 'out/proj' is relative" in message
    assert "MLF_PROJECT_CLIENT_CWD" in message
    assert fake_driver.generated == []
    assert not (template_dir() / "out").exists()


def test_generate_relative_paths_resolve_against_the_client_cwd(
    tmp_path: Path, archive: Path, fake_driver: Any
) -> None:
    h = ProjectApiHandler(template_dir(), client_cwd=str(tmp_path))
    h.generate_project("in/model.tar", "", "out/proj", GEN_OPTIONS)
    assert Path(fake_driver.generated[0][0]) == archive
    assert Path(fake_driver.generated[0][1]) == tmp_path / "out" / "proj"


def test_client_cwd_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLF_PROJECT_CLIENT_CWD", str(tmp_path))
    assert ProjectApiHandler(template_dir()).client_cwd == str(tmp_path)


def test_generate_missing_archive(tmp_path: Path, fake_driver: Any) -> None:
    h = ProjectApiHandler(template_dir())
    with pytest.raises(ProjectApiError) as info:
        h.generate_project(str(tmp_path / "nope.tar"), "", str(tmp_path / "p"), GEN_OPTIONS)
    assert info.value.code == -32602
    assert "no such file" in str(info.value)


def test_generate_requires_board(tmp_path: Path, archive: Path, fake_driver: Any) -> None:
    h = ProjectApiHandler(template_dir())
    with pytest.raises(ProjectApiError, match="option board is required") as info:
        h.generate_project(str(archive), "", str(tmp_path / "p"), {"project_type": "standalone"})
    assert info.value.code == -32602


def _tar(path: Path, members: Dict[str, bytes]) -> Path:
    with tarfile.open(path, "w") as tar:
        for name, data in members.items():
            member = tarfile.TarInfo(name)
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
    return path


def test_extra_files_tar_goes_to_the_generator(
    tmp_path: Path, archive: Path, fake_driver: Any
) -> None:
    """The generator unpacks it (one place for every front end: generate/extra_files.py); the
    handler checks it and hands it over, made absolute."""
    extra = _tar(tmp_path / "extra.tar", {"include/extra.h": b"#define EXTRA 1\n"})
    h = ProjectApiHandler(template_dir(), client_cwd=str(tmp_path))
    options = dict(GEN_OPTIONS, extra_files_tar="extra.tar")
    h.generate_project(str(archive), "", str(tmp_path / "p"), options)
    assert fake_driver.generated[0][5]["extra_files_tar"] == str(extra)


def test_extra_files_tar_may_not_escape(tmp_path: Path, archive: Path, fake_driver: Any) -> None:
    extra = _tar(tmp_path / "evil.tar", {"../evil.h": b"x"})
    h = ProjectApiHandler(template_dir())
    with pytest.raises(GenerateError, match="escapes the project"):
        h.generate_project(
            str(archive), "", str(tmp_path / "p"), dict(GEN_OPTIONS, extra_files_tar=str(extra))
        )
    assert not (tmp_path / "evil.h").exists()


def test_extra_files_tar_missing(tmp_path: Path, archive: Path, fake_driver: Any) -> None:
    h = ProjectApiHandler(template_dir())
    with pytest.raises(ProjectApiError, match="extra_files_tar .*: no such file"):
        h.generate_project(
            str(archive), "", str(tmp_path / "p"), dict(GEN_OPTIONS, extra_files_tar="/no.tar")
        )


# --- build / flash --------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["build", "flash", "open_transport"])
def test_template_cannot_build_flash_or_open(method: str, fake_driver: Any) -> None:
    h = ProjectApiHandler(template_dir())
    with pytest.raises(ProjectApiError) as info:
        getattr(h, method)({})
    assert info.value.code == -32000
    assert "is a template directory, not a generated project" in str(info.value)


def test_build_passes_options_through_the_project(handler: Any, fake_driver: Any) -> None:
    handler.build({"verbose": "true", "build_dir": "out", "board": "ignored", "x": 1})
    project = fake_driver.opened[-1]
    assert project.built_with == {"board": "host", "verbose": True, "build_dir": "out"}


def test_sandbox_false_reaches_the_build_and_unset_leaves_it_to_the_environment(
    handler: Any, fake_driver: Any
) -> None:
    """Option sandbox=false (TVM sends strings too) opts this call out; unset, the server's
    $MLF_PROJECT_SANDBOX decides, so nothing is put in the project's options."""
    handler.build({"sandbox": "false"})
    assert fake_driver.opened[-1].built_with["sandbox"] is False
    handler.build({})
    assert "sandbox" not in fake_driver.opened[-1].built_with


def test_flash(handler: Any, fake_driver: Any) -> None:
    handler.flash({"serial_number": "0672FF"})
    project = fake_driver.opened[-1]
    assert project.flashed
    assert project.options["serial_number"] == "0672FF"


# --- transport ------------------------------------------------------------------------------


def test_open_write_read_close(handler: Any, fake_driver: Any) -> None:
    timeouts = handler.open_transport({})
    assert timeouts == {
        "session_start_retry_timeout_sec": 2,
        "session_start_timeout_sec": 10,
        "session_established_timeout_sec": 20,
    }
    runner = fake_driver.runners[-1]
    assert runner.start_timeout == 10.0
    payload = bytes(range(256))
    handler.write_transport(payload, 5.0)
    assert read_exactly(handler, 256) == payload
    handler.close_transport()
    assert runner.proc.returncode is not None, "the firmware process must be reaped"
    assert runner.proc not in live_children()


def test_read_returns_between_1_and_n_bytes(handler: Any) -> None:
    handler.open_transport({})
    handler.write_transport(b"abc", 1.0)
    data = read_exactly(handler, 1)
    assert data == b"a"
    rest = handler.read_transport(100, 2.0)
    assert 1 <= len(rest) <= 100
    assert b"abc".startswith(data + rest) or (data + rest) == b"abc"


def test_a_huge_read_is_served_in_part(handler: Any) -> None:
    """n is an upper bound: 2**40 or 2**64 bytes asked for are not allocated, the link
    stays open."""
    handler.open_transport({})
    handler.write_transport(b"abc", 1.0)
    data = handler.read_transport(1 << 40, 2.0)
    data += handler.read_transport(1 << 64, 2.0) if len(data) < 3 else b""
    assert b"abc".startswith(data) and data
    handler.write_transport(b"z", 1)
    assert b"z" in read_exactly(handler, 1) + b"z"


@pytest.mark.parametrize("timeout", ["0", "-1", "99999999999"])
def test_open_transport_timeout_must_be_a_time(handler: Any, timeout: str) -> None:
    with pytest.raises(ProjectApiError, match="option timeout_sec: want a number of seconds"):
        handler.open_transport({"timeout_sec": timeout})


def test_read_timeout_is_io_timeout_never_empty(handler: Any) -> None:
    handler.open_transport({})
    started = time.monotonic()
    with pytest.raises(TransportTimeoutError):
        handler.read_transport(10, 0.2)
    assert 0.15 < time.monotonic() - started < 3
    with pytest.raises(TransportTimeoutError):
        handler.read_transport(10, 0)
    # still usable afterwards
    handler.write_transport(b"z", 1)
    assert read_exactly(handler, 1) == b"z"


def test_close_without_open_is_a_noop(handler: Any) -> None:
    handler.close_transport()
    handler.close_transport()


def test_second_open_after_close_works(handler: Any, fake_driver: Any) -> None:
    for i in range(3):
        handler.open_transport({})
        handler.write_transport(b"round %d" % i, 1)
        assert read_exactly(handler, 7) == b"round %d" % i
        handler.close_transport()
    assert all(r.proc.returncode is not None for r in fake_driver.runners)


def test_open_while_open_stops_the_old_firmware_first(handler: Any, fake_driver: Any) -> None:
    handler.open_transport({})
    first = fake_driver.runners[-1]
    handler.open_transport({})
    assert first.stopped >= 1
    assert first.proc.returncode is not None
    handler.write_transport(b"new", 1)
    assert read_exactly(handler, 3) == b"new"


def test_transport_calls_before_open_are_transport_closed(handler: Any) -> None:
    with pytest.raises(TransportClosedError, match="not open"):
        handler.read_transport(1, 0.1)
    with pytest.raises(TransportClosedError, match="not open"):
        handler.write_transport(b"x", 0.1)


def test_device_death_is_transport_closed(handler: Any, fake_driver: Any) -> None:
    handler.open_transport({})
    runner = fake_driver.runners[-1]
    runner.proc.kill()
    runner.proc.wait()
    with pytest.raises(TransportClosedError) as info:
        handler.read_transport(4, 2.0)
    assert "killed by SIGKILL" in str(info.value)  # how it ended, not only "end of file"
    assert runner.proc not in live_children()
    # Later calls keep saying why.
    with pytest.raises(TransportClosedError) as again:
        handler.write_transport(b"x", 1.0)
    assert str(info.value) in str(again.value)
    # And the project can be opened again.
    handler.open_transport({})
    handler.write_transport(b"ok", 1)
    assert read_exactly(handler, 2) == b"ok"


def test_failed_start_stops_the_runner(handler: Any, fake_driver: Any) -> None:
    CatRunner.fail_start = True
    with pytest.raises(TransportTimeoutError):
        handler.open_transport({})
    runner = fake_driver.runners[-1]
    assert runner.stopped == 1
    assert runner.proc.returncode is not None
    with pytest.raises(TransportClosedError):
        handler.read_transport(1, 0)


def test_shutdown_reaps_the_firmware(project_dir: Path, fake_driver: Any) -> None:
    h = ProjectApiHandler(project_dir)
    h.open_transport({})
    runner = fake_driver.runners[-1]
    h.shutdown()
    assert runner.proc.returncode is not None
    assert runner.proc not in live_children()


@pytest.mark.parametrize(
    "board, kind, start, established",
    [
        ("host", "host", 10.0, 20),
        ("qemu-mps2-an385", "qemu", 30.0, 30),
        ("nucleo-l4r5zi", "serial", 10.0, 10),
    ],
)
def test_timeouts_per_board_kind(
    handler: Any, fake_driver: Any, board: str, kind: str, start: float, established: int
) -> None:
    assert board_kind(board) == kind
    fake_driver.board = board
    timeouts = handler.open_transport({})
    assert timeouts["session_established_timeout_sec"] == established
    assert fake_driver.runners[-1].start_timeout == start
    assert timeouts == handler_module.TIMEOUTS[kind]


def test_timeout_sec_option_overrides(handler: Any, fake_driver: Any) -> None:
    timeouts = handler.open_transport({"timeout_sec": "42"})
    assert fake_driver.runners[-1].start_timeout == 42.0
    assert timeouts["session_start_timeout_sec"] == 42
    assert timeouts["session_established_timeout_sec"] == 42


# --- the same over the wire, through the client ---------------------------------------------


def in_process(h: ProjectApiHandler) -> Tuple[ProjectApiClient, threading.Thread]:
    server_read, client_write = os.pipe()
    client_read, server_write = os.pipe()
    server = ProjectApiServer(
        os.fdopen(server_read, "rb"), os.fdopen(server_write, "wb", buffering=0), h
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    client = ProjectApiClient(
        os.fdopen(client_read, "rb"), os.fdopen(client_write, "wb", buffering=0)
    )
    return client, thread


def test_transport_through_client_and_server(project_dir: Path, fake_driver: Any) -> None:
    client, thread = in_process(ProjectApiHandler(project_dir))
    try:
        info = client.server_info_query()
        assert info["is_template"] is False
        assert client.open_transport({"verbose": "false"})["session_start_timeout_sec"] == 10
        client.write_transport(b"\x00\x01abc", 1.0)
        link = client.link(timeout=5.0)
        assert link.read(5) == b"\x00\x01abc"
        with pytest.raises(TransportTimeoutError):
            client.read_transport(1, 0.1)
        link.timeout = 0.1
        assert link.read(3) == b""
        link.write(b"xyz")
        link.timeout = 5
        assert link.read(3) == b"xyz"
        runner = fake_driver.runners[-1]
        runner.proc.kill()
        with pytest.raises(TransportClosedError, match="the transport is closed"):
            client.read_transport(1, 2.0)
        client.close_transport()
        with pytest.raises(ProjectApiError) as info_err:
            client.call("nope", {})
        assert info_err.value.code == -32601
    finally:
        client.close()
        thread.join(timeout=10)
    assert not thread.is_alive()
    assert all(r.proc.returncode is not None for r in fake_driver.runners)


def test_client_eof_reaps_the_open_firmware(project_dir: Path, fake_driver: Any) -> None:
    client, thread = in_process(ProjectApiHandler(project_dir))
    client.open_transport()
    runner = fake_driver.runners[-1]
    client.close()  # no close_transport: the client just goes away
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert runner.proc.returncode is not None


class ScriptedClient:
    """Stands in for ProjectApiClient under TransportLink: serves scripted chunks."""

    def __init__(self, chunks: List[bytes]) -> None:
        self.chunks = chunks
        self.reads: List[Tuple[int, Optional[float]]] = []
        self.closed = 0

    def read_transport(self, n: int, timeout_sec: Optional[float]) -> bytes:
        self.reads.append((n, timeout_sec))
        if not self.chunks:
            raise TransportTimeoutError("nothing")
        chunk = self.chunks.pop(0)
        self.chunks[:0] = [chunk[n:]] if len(chunk) > n else []
        return chunk[:n]

    def close_transport(self) -> None:
        self.closed += 1


def test_transport_link_reads_like_pyserial() -> None:
    from project_api.serve.client import TransportLink

    client = ScriptedClient([b"abc", b"defgh"])
    link = TransportLink(client, timeout=1.0)  # type: ignore[arg-type]
    assert link.read(4) == b"abcd"  # blocks until 4 bytes: two round trips
    assert link.in_waiting == 4  # the surplus is kept
    assert link.read(2) == b"ef"
    assert link.read(10) == b"gh"  # fewer when the time-out runs out
    assert all(n >= 4096 for n, _ in client.reads)
    link.timeout = 0
    assert link.read(1) == b""
    assert link.in_waiting == 0
    link.close()
    link.close()
    assert client.closed == 1
