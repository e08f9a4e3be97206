"""Boards anywhere in a lab, through labgrid (https://labgrid.readthedocs.io).

A labgrid *place* groups the resources of one board: its console, exported by a
``labgrid-exporter`` (ser2net behind a ``NetworkSerialPort``: an RFC 2217 port that pyserial
opens as ``rfc2217://host:port``), and optionally what flashes it. :class:`LabgridRunner`
acquires the place through the coordinator (``labgrid-client``, so labgrid's own locking and
users apply), flashes the firmware through labgrid's drivers when an environment file is
given (``labgrid-client -c ENV bootstrap FIRMWARE``: OpenOCD, pyOCD or a flash script, as the
lab configured them), opens the console and hands it to the same Session as every runner.
The place is released on every exit path. ``docs/labgrid.md`` describes the lab set-up.
"""

from __future__ import annotations

import ast
import contextlib
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, List, Optional, Tuple

from ..errors import FlashError, TransportError
from .base import Runner, reap, spawn

DEFAULT_COORDINATOR = "127.0.0.1:20408"
_CLIENT = "labgrid-client"
_WAIT_POLL = 1.0


class LabgridError(TransportError):
    """The coordinator, the place or its resources are not usable."""


@dataclass(frozen=True)
class NetworkConsole:
    """A place's exported console: where ser2net listens."""

    host: str
    port: int
    speed: int
    protocol: str = "rfc2217"

    @property
    def url(self) -> str:
        if self.protocol != "rfc2217":
            return f"socket://{self.host}:{self.port}"
        # ser2net on a device without modem lines (a pty, many USB bridges) leaves the
        # modem-control requests unanswered: don't wait for those answers.
        return f"rfc2217://{self.host}:{self.port}?ign_set_control"


def coordinator_address(explicit: Optional[str] = None) -> str:
    """``explicit``, else ``$LG_COORDINATOR`` (labgrid's own variable), else the default."""
    return explicit or os.environ.get("LG_COORDINATOR") or DEFAULT_COORDINATOR


def client_path() -> str:
    """labgrid-client on PATH, else beside this interpreter (a venv used without activating)."""
    beside = Path(sys.executable).parent / _CLIENT
    found = shutil.which(_CLIENT) or (str(beside) if beside.is_file() else None)
    if found is None:
        raise LabgridError(
            "labgrid-client is not installed", hint="pip install labgrid (or mlf-project-api[lab])"
        )
    return found


class LabgridClient:
    """``labgrid-client`` for one place at one coordinator; every call bounded in time."""

    def __init__(self, place: str, coordinator: Optional[str] = None, timeout: float = 30.0):
        self.place = place
        self.coordinator = coordinator_address(coordinator)
        self.timeout = timeout

    def call(self, *args: str, env_file: Optional[Path] = None) -> Tuple[int, str]:
        argv = [client_path(), "-x", self.coordinator, "-p", self.place]
        if env_file is not None:
            argv += ["-c", str(env_file)]
        proc = spawn(argv + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            out, _ = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            raise LabgridError(
                f"labgrid-client {' '.join(args)} did not answer within {self.timeout:g} s "
                f"(coordinator {self.coordinator})"
            ) from None
        finally:
            reap(proc)
        text = out.decode("utf-8", "replace") if out else ""
        if _unreachable(text):
            raise LabgridError(
                f"the labgrid coordinator at {self.coordinator} is unreachable",
                hint="start labgrid-coordinator there, or point LG_COORDINATOR "
                "(or --labgrid-coordinator) at the lab's",
            )
        return proc.returncode or 0, text

    def acquire(self, *, wait: bool = False, say: Callable[[str], None] = lambda _: None) -> None:
        announced = False
        while True:
            status, text = self.call("acquire")
            if status == 0:
                return
            holder = _holder(text)
            if "not exist" in text or "not found" in text.lower():
                raise LabgridError(f"no labgrid place {self.place!r} at {self.coordinator}")
            if holder is None or not wait:
                raise LabgridError(
                    f"cannot acquire labgrid place {self.place!r}: {_last_line(text)}",
                    hint="wait for it with --labgrid-wait" if holder else None,
                )
            if not announced:
                say(f"waiting for labgrid place {self.place} (acquired by {holder})")
                announced = True
            time.sleep(_WAIT_POLL)

    def release(self) -> None:
        self.call("release")

    def console(self) -> NetworkConsole:
        status, text = self.call("show")
        if status != 0:
            raise LabgridError(f"labgrid place {self.place!r}: {_last_line(text)}")
        for resource in _acquired_resources(text):
            if resource.get("cls") == "NetworkSerialPort":
                params = resource.get("params", {})
                return NetworkConsole(
                    str(params["host"]),
                    int(params["port"]),
                    int(params.get("speed", 115200)),
                    str(params.get("protocol", "rfc2217")),
                )
        raise LabgridError(
            f"labgrid place {self.place!r} exports no serial console (NetworkSerialPort)",
            hint="export the board's USBSerialPort or RawSerialPort and add a match for it "
            "to the place",
        )

    def bootstrap(self, env_file: Path, firmware: Path) -> None:
        status, text = self.call("bootstrap", str(firmware), env_file=env_file)
        if status != 0:
            raise FlashError(f"labgrid could not flash {firmware.name}: {_last_line(text)}")


def _unreachable(text: str) -> bool:
    lowered = text.lower()
    return (
        "failed to connect" in lowered
        or "connection refused" in lowered
        or ("unavailable" in lowered and "coordinator" in lowered)
    )


def _holder(text: str) -> Optional[str]:
    marker = "already acquired by "
    at = text.find(marker)
    if at < 0:
        return None
    return text[at + len(marker) :].split(".")[0].strip()


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def _acquired_resources(text: str) -> List[dict]:
    """The dicts ``labgrid-client show`` prints after each "Acquired resource ...:" line."""
    found = []
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if not line.startswith("Acquired resource"):
            continue
        block = []
        for following in lines[index + 1 :]:
            if not following.startswith(" "):
                break
            block.append(following)
        try:
            value = ast.literal_eval("\n".join(block).strip())
        except (ValueError, SyntaxError):
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


class _Rfc2217Port:
    """pyserial's RFC 2217 port refuses a write timeout; the link sets one on every port. A
    network write does not block for long, so the setting is kept here and not applied."""

    def __init__(self, port: Any) -> None:
        self._port = port
        self.write_timeout: Optional[float] = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._port, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_") or name == "write_timeout":
            object.__setattr__(self, name, value)
        else:
            setattr(self._port, name, value)


class LabgridRunner(Runner):
    """A firmware on a labgrid place: acquire, flash (with an environment file), open the
    exported console; :meth:`stop` closes it and releases the place."""

    def __init__(
        self,
        firmware: Path,
        place: str,
        *,
        coordinator: Optional[str] = None,
        env_file: Optional[Path] = None,
        wait: bool = False,
        say: Callable[[str], None] = lambda _: None,
        read_timeout: float = 1.0,
    ) -> None:
        self.firmware = Path(firmware)
        self.client = LabgridClient(place, coordinator)
        self.env_file = env_file
        self.wait = wait
        self.say = say
        self.read_timeout = read_timeout
        self._serial: Any = None
        self._acquired = False
        self._log: List[str] = []

    def start(self, timeout: float = 10.0) -> Any:
        import serial

        self.client.acquire(wait=self.wait, say=self.say)
        self._acquired = True
        try:
            if self.env_file is not None:
                self.say(f"flashing {self.firmware.name} through labgrid")
                self.client.bootstrap(self.env_file, self.firmware)
            console = self.client.console()
            self._log.append(f"labgrid place {self.client.place}: console {console.url}")
            self._serial = serial.serial_for_url(
                console.url, baudrate=console.speed, timeout=self.read_timeout
            )
            return _Rfc2217Port(self._serial)
        except serial.SerialException as err:
            self.stop()
            raise LabgridError(
                f"cannot open the console of labgrid place {self.client.place}: {err}"
            ) from err
        except BaseException:
            self.stop()
            raise

    def stop(self) -> Optional[int]:
        if self._serial is not None:
            with contextlib.suppress(Exception):
                self._serial.close()
            self._serial = None
        if self._acquired:
            self._acquired = False
            try:
                self.client.release()
            except LabgridError as err:
                self._log.append(f"release failed: {err}")
        return None

    @property
    def log(self) -> str:
        return "\n".join(self._log)

    def link_closed_reason(self) -> str:
        return (
            f"the console of labgrid place {self.client.place} closed (exporter or ser2net gone?)"
        )
