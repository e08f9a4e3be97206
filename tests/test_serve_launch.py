"""Servers launched as separate processes, the way TVM's client launches them: the shipped
template's microtvm_api_server.py, launch scripts, the missing-package message,
``mlf-project serve``, and reaping when the client disappears or the server is killed."""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from project_api.errors import ProjectApiError
from project_api.resources import template_dir
from project_api.serve.client import ProjectApiClient, server_argv

REPO_ROOT = Path(__file__).resolve().parent.parent
SERVER_SCRIPT = template_dir() / "microtvm_api_server.py"


def env_with_checkout(**extra: str) -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


def launch_argv(argv: List[str], cwd: Path, env: Optional[Dict[str, str]] = None) -> Any:
    """Starts ``argv --read-fd R --write-fd W`` like TVM's client; returns a client."""
    server_read, client_write = os.pipe()
    client_read, server_write = os.pipe()
    proc = subprocess.Popen(
        [*argv, "--read-fd", str(server_read), "--write-fd", str(server_write)],
        cwd=cwd,
        env=env,
        pass_fds=(server_read, server_write),
    )
    os.close(server_read)
    os.close(server_write)
    return ProjectApiClient(
        os.fdopen(client_read, "rb"), os.fdopen(client_write, "wb", buffering=0), process=proc
    )


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_dead(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


# --- the shipped template, as TVM launches it ------------------------------------------------


def test_template_server_info_through_the_client() -> None:
    with ProjectApiClient.launch(template_dir()) as client:
        info = client.server_info_query("0.14.0")
        assert info["platform_name"] == "mlf-project-api"
        assert info["is_template"] is True
        assert info["model_library_format_path"] == ""
        assert info["protocol_version"] == 1
        assert {"board", "project_type", "compile_definitions"} <= {
            o["name"] for o in info["project_options"]
        }
        with pytest.raises(ProjectApiError) as err:
            client.build({})
        assert err.value.code == -32000
        assert "template directory" in str(err.value)
        assert client.server_info_query()["is_template"] is True  # still serving
    assert client.process is not None
    assert client.process.returncode == 0


def test_template_exactly_as_tvm_runs_it() -> None:
    """argv = [sys.executable, <dir>/microtvm_api_server.py, --read-fd, R, --write-fd, W],
    cwd = the template dir, our environment untouched (project_api importable from it)."""
    client = launch_argv(
        [sys.executable, str(SERVER_SCRIPT)], template_dir(), env=env_with_checkout()
    )
    try:
        assert client.server_info_query("0.14.0")["is_template"] is True
    finally:
        assert client.close() == 0


def test_template_from_a_checkout_without_site_packages() -> None:
    """``python -S -I``: nothing installed, nothing on PYTHONPATH; the stub finds the checkout
    beside template_project/ and the server starts without any third-party package."""
    checkout_template = REPO_ROOT / "template_project"
    script = checkout_template / "microtvm_api_server.py"
    client = launch_argv([sys.executable, "-S", "-I", str(script)], checkout_template, env={})
    try:
        info = client.server_info_query("0.14.0")
        assert info["is_template"] is True
    finally:
        assert client.close() == 0


def test_debug_flag_logs_requests(capfd: pytest.CaptureFixture[str]) -> None:
    with ProjectApiClient.launch(template_dir(), debug=True) as client:
        client.close_transport()
    err = capfd.readouterr().err
    assert "close_transport" in err
    assert "request <-" in err


def test_missing_project_api_says_how_to_install(tmp_path: Path) -> None:
    script = tmp_path / "microtvm_api_server.py"
    shutil.copy(SERVER_SCRIPT, script)
    proc = subprocess.run(
        [sys.executable, "-S", "-I", str(script), "--read-fd", "0", "--write-fd", "1"],
        cwd=tmp_path,
        env={},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 3
    assert proc.stdout == ""
    assert proc.stderr == (
        "microtvm_api_server.py: error: the Python package project_api (distribution "
        f"mlf-project-api) is not installed for {sys.executable}.\n"
        "Install it into that Python (the one TVM runs):\n"
        f"    {sys.executable} -m pip install mlf-project-api\n"
    )


def test_missing_dependency_is_named(tmp_path: Path) -> None:
    (tmp_path / "project_api" / "serve").mkdir(parents=True)
    (tmp_path / "project_api" / "__init__.py").write_text("")
    (tmp_path / "project_api" / "serve" / "__init__.py").write_text("")
    (tmp_path / "project_api" / "serve" / "server.py").write_text("import jinja2_not_here\n")
    (tmp_path / "template_project").mkdir()
    shutil.copy(SERVER_SCRIPT, tmp_path / "template_project" / "microtvm_api_server.py")
    proc = subprocess.run(
        [sys.executable, "-S", "-I", "microtvm_api_server.py", "--read-fd", "0", "--write-fd", "1"],
        cwd=tmp_path / "template_project",
        env={},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 3
    assert "missing module: jinja2_not_here" in proc.stderr
    assert "-m pip install mlf-project-api" in proc.stderr


# --- how the client picks the launcher ------------------------------------------------------


def test_server_argv_prefers_the_launch_script(tmp_path: Path) -> None:
    (tmp_path / "microtvm_api_server.py").write_text("")
    assert server_argv(tmp_path) == [sys.executable, str(tmp_path / "microtvm_api_server.py")]
    (tmp_path / "launch_microtvm_api_server.sh").write_text("")
    assert server_argv(tmp_path) == [
        str(tmp_path / "launch_microtvm_api_server.sh"),
        str(tmp_path / "microtvm_api_server.py"),
    ]


def test_server_argv_without_a_server(tmp_path: Path) -> None:
    with pytest.raises(ProjectApiError, match="no Project API server in"):
        server_argv(tmp_path)


def test_launch_script_is_used_and_keeps_debug(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(SERVER_SCRIPT, tmp_path / "microtvm_api_server.py")
    launcher = tmp_path / "launch_microtvm_api_server.sh"
    launcher.write_text(f'#!/bin/sh\necho launched-by-script >&2\nexec "{sys.executable}" "$@"\n')
    launcher.chmod(0o755)
    with ProjectApiClient.launch(tmp_path, debug=True) as client:
        assert client.server_info_query()["is_template"] is True
    err = capfd.readouterr().err
    assert "launched-by-script" in err
    assert "request <-" in err


# --- mlf-project serve ----------------------------------------------------------------------


def requests(*lines: Any) -> bytes:
    return b"".join(
        (line if isinstance(line, bytes) else json.dumps(line).encode()) + b"\n" for line in lines
    )


def test_serve_on_stdin_stdout() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "project_api", "serve"],
        input=requests(
            {"jsonrpc": "2.0", "id": 1, "method": "server_info_query", "params": {}},
            b"not json",
            {"jsonrpc": "2.0", "id": 2, "method": "close_transport", "params": {}},
        ),
        capture_output=True,
        env=env_with_checkout(),
        cwd=REPO_ROOT,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    replies = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(replies) == 3
    assert replies[0]["result"]["is_template"] is True
    assert replies[1]["error"]["code"] == -32700
    assert replies[2] == {"jsonrpc": "2.0", "id": 2, "result": None}


def test_serve_on_given_fds_for_a_generated_project(tmp_path: Path) -> None:
    (tmp_path / "model.tar").write_bytes(b"")
    client = launch_argv(
        [sys.executable, "-m", "project_api", "serve", "--project-dir", str(tmp_path)],
        REPO_ROOT,
        env=env_with_checkout(),
    )
    try:
        info = client.server_info_query()
        assert info["is_template"] is False
        assert info["model_library_format_path"] == str(tmp_path.resolve() / "model.tar")
    finally:
        assert client.close() == 0


@pytest.mark.parametrize(
    "args, message",
    [
        (["--read-fd", "0"], "--read-fd and --write-fd go together"),
        (["--project-dir", "/nonexistent/dir"], "no such directory"),
        (["--read-fd", "97", "--write-fd", "98"], "file descriptor 97"),
    ],
)
def test_serve_bad_arguments(args: List[str], message: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "project_api", "serve", *args],
        capture_output=True,
        text=True,
        env=env_with_checkout(),
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("mlf-project serve: error: ")
    assert message in proc.stderr


# --- a server with a stand-in driver, in its own process ------------------------------------

FAKE_SERVER = textwrap.dedent(
    '''
    """A Project API server whose driver is a stand-in: the "firmware" is `cat` on a pty."""
    import json
    import os
    import sys
    from pathlib import Path

    import serial

    import project_api.driver
    from project_api.run.base import Runner, reap, spawn

    HERE = Path(__file__).resolve().parent


    class CatRunner(Runner):
        def start(self, timeout):
            master, slave = os.openpty()
            self.proc = spawn(["cat"], stdin=master, stdout=master)
            self.link = serial.Serial(os.ttyname(slave), timeout=timeout)
            os.close(master)
            os.close(slave)
            (HERE / "firmware.pid").write_text(str(self.proc.pid))
            return self.link

        def stop(self):
            self.link.close()
            return reap(self.proc)


    class FakeProject:
        def __init__(self, directory):
            self.dir = Path(directory)
            self.options = {"board": "host"}

        @classmethod
        def generate(cls, archive, project_dir, **kw):
            kw.pop("progress", None)
            (HERE / "generated.json").write_text(
                json.dumps({"archive": str(archive), "project_dir": str(project_dir), **kw})
            )
            return cls(project_dir)

        @classmethod
        def open(cls, project_dir):
            return cls(project_dir)

        def runner(self):
            return CatRunner()


    project_api.driver.Project = FakeProject
    from project_api.serve.server import main

    sys.exit(main(sys.argv[1:], server_dir=HERE))
    '''
)


@pytest.fixture
def fake_project(tmp_path: Path) -> Path:
    directory = tmp_path / "fake_project"
    directory.mkdir()
    (directory / "microtvm_api_server.py").write_text(FAKE_SERVER)
    (directory / "model.tar").write_bytes(b"")
    return directory


def firmware_pid(directory: Path) -> int:
    return int((directory / "firmware.pid").read_text())


def test_client_disappearing_reaps_the_firmware(fake_project: Path) -> None:
    client = ProjectApiClient.launch(fake_project)
    client.open_transport()
    client.write_transport(b"ping", 1)
    assert client.link(timeout=5).read(4) == b"ping"
    pid = firmware_pid(fake_project)
    assert alive(pid)
    assert client.close() == 0  # EOF without close_transport
    assert wait_dead(pid), "the firmware outlived its server"


@pytest.mark.parametrize("method", ["read_transport", "write_transport"])
def test_client_dying_during_a_blocking_transport_call(fake_project: Path, method: str) -> None:
    """The server watches the request pipe while it waits on the device: a client that dies
    in the middle of a call with no timeout does not leave the server or its firmware."""
    client = ProjectApiClient.launch(fake_project)
    client.open_transport()
    pid = firmware_pid(fake_project)
    # nothing to read, or more to write than the pty takes while cat's output is never read
    params = {"n": 10, "timeout_sec": None}
    if method == "write_transport":
        params = {"data": base64.b85encode(bytes(1 << 20)).decode(), "timeout_sec": None}
    request = {"jsonrpc": "2.0", "method": method, "params": params, "id": 99}
    client._write_file.write(json.dumps(request).encode() + b"\n")
    client._write_file.flush()
    time.sleep(0.5)  # the call is waiting now
    assert client.process is not None and client.process.poll() is None
    client._write_file.close()  # the client dies: its end of the request pipe closes
    try:
        client.process.wait(timeout=10)  # raises when the server outlives its client
    finally:
        client.close(timeout=1)
    assert wait_dead(pid), "the firmware outlived its client"


def test_killed_server_takes_the_firmware_with_it(fake_project: Path) -> None:
    client = ProjectApiClient.launch(fake_project)
    try:
        client.open_transport()
        pid = firmware_pid(fake_project)
        assert client.process is not None
        os.kill(client.process.pid, signal.SIGKILL)
        assert wait_dead(pid), "the firmware outlived a SIGKILLed server"
    finally:
        client.close(timeout=1)


def test_terminated_server_reaps_the_firmware(fake_project: Path) -> None:
    client = ProjectApiClient.launch(fake_project)
    try:
        client.open_transport()
        pid = firmware_pid(fake_project)
        assert client.process is not None
        client.process.send_signal(signal.SIGTERM)
        assert client.process.wait(timeout=10) == 128 + signal.SIGTERM
        assert wait_dead(pid)
    finally:
        client.close(timeout=1)


def test_second_open_after_close_in_a_real_server(fake_project: Path) -> None:
    with ProjectApiClient.launch(fake_project) as client:
        for i in range(2):
            client.open_transport()
            pid = firmware_pid(fake_project)
            client.write_transport(b"%d" % i, 1)
            assert client.link(timeout=5).read(1) == b"%d" % i
            client.close_transport()
            assert wait_dead(pid)
        client.close_transport()  # without an open transport: a no-op


def test_relative_paths_mean_the_clients_cwd(
    tmp_path: Path, fake_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (fake_project / "model.tar").unlink()  # a template now
    (tmp_path / "model.tar").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    with ProjectApiClient.launch(fake_project) as client:
        client.generate_project(
            "model.tar", "out/proj", {"board": "host", "project_type": "host_driven"}
        )
    generated = json.loads((fake_project / "generated.json").read_text())
    assert generated["archive"] == str(tmp_path / "model.tar")
    assert generated["project_dir"] == str(tmp_path / "out" / "proj")


def test_relative_paths_mean_the_parents_cwd_without_the_variable(
    tmp_path: Path, fake_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TVM's client starts the server in the project directory and sets no variable: the
    server takes its parent's working directory (Linux) for the client's."""
    (fake_project / "model.tar").unlink()
    (tmp_path / "m.tar").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    env = env_with_checkout()
    env.pop("MLF_PROJECT_CLIENT_CWD", None)
    client = launch_argv([sys.executable, "microtvm_api_server.py"], fake_project, env=env)
    try:
        client.generate_project("m.tar", "proj", {"board": "host", "project_type": "standalone"})
    finally:
        client.close()
    generated = json.loads((fake_project / "generated.json").read_text())
    assert generated["archive"] == str(tmp_path / "m.tar")
    assert generated["project_dir"] == str(tmp_path / "proj")


def test_relative_paths_refused_when_the_clients_cwd_is_unknown(tmp_path: Path) -> None:
    from project_api.serve.handler import ProjectApiHandler

    handler = ProjectApiHandler(tmp_path, client_cwd=None)
    handler.client_cwd = None  # no variable, no parent to ask
    with pytest.raises(ProjectApiError) as err:
        handler.generate_project(
            str(tmp_path / "m.tar"), None, "proj", {"board": "host", "project_type": "standalone"}
        )
    assert err.value.code == -32602
    assert "is relative and the client's working directory is unknown" in str(err.value)
    assert not (tmp_path / "proj").exists()


def test_serve_on_stdio_keeps_stray_output_off_the_reply_stream() -> None:
    """Whatever else writes to fd 1 while serving on stdout (our prints, CMake, compilers)
    lands on stderr; and children can't read the requests from fd 0."""
    noisy = textwrap.dedent(
        """
        import os, sys
        from project_api.cli import main
        from project_api.serve.handler import ProjectApiHandler

        def close_transport(self):
            print("python noise on stdout", flush=True)
            os.system("echo child noise on stdout; cat")  # cat gets /dev/null, not requests

        ProjectApiHandler.close_transport = close_transport
        sys.exit(main(["serve"]))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", noisy],
        input=requests(
            {"jsonrpc": "2.0", "id": 1, "method": "close_transport", "params": {}},
            {"jsonrpc": "2.0", "id": 2, "method": "close_transport", "params": {}},
        ),
        capture_output=True,
        env=env_with_checkout(),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        b'{"jsonrpc": "2.0", "id": 1, "result": null}',
        b'{"jsonrpc": "2.0", "id": 2, "result": null}',
    ]
    assert b"python noise on stdout" in proc.stderr
    assert b"child noise on stdout" in proc.stderr
