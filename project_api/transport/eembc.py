"""The MLPerf Tiny / EEMBC benchmark protocol, host side (docs/mlperftiny.md).

An ``mlperftiny`` firmware (``template_project/firmware/mlf_mlperftiny.c``) — or any firmware
built on EEMBC's ``internally_implemented`` API — reads text commands ending with ``%`` and
answers each with lines ending in ``\\r\\n``, the last of them ``m-ready``. :class:`EembcDevice`
drives one over a :class:`~project_api.transport.link.Link` the way the EEMBC runner does:
31 bytes of input per ``db`` command, ``infer N W``, the ``m-lap-us-`` timestamps around the
runs and the ``m-results-[...]`` line.

Errors: an ``e-[...]`` answer raises :class:`~project_api.errors.DeviceError` with its text;
lines that are not the protocol's raise :class:`~project_api.errors.ProtocolError`; time-outs
and a vanished device come from the link.
"""

from __future__ import annotations

import collections
import re
import time
from dataclasses import dataclass, field
from typing import Any, Deque, List, Optional, Tuple, Union

from ..errors import DeviceError, ProtocolError, TransportTimeoutError
from .link import Link
from .reasons import explain

READY = "m-ready"
TERMINATOR = "%"
LINE_MAX = 80  # characters of one command
CHUNK_BYTES = 31  # input bytes per db command, as the EEMBC runner sends them
RESEND_SECONDS = 1.0  # connect: how long a question goes unanswered before it is asked again
DEFAULT_WARMUPS = 10  # what the firmware runs when `infer N` names none
# What the host takes of what a firmware says (it decides how much): one line at most
# ANSWER_LINE_MAX bytes, one answer at most ANSWER_LINES lines, the transcript the last
# TRANSCRIPT_LINES lines, each cut at TRANSCRIPT_LINE_MAX characters.
ANSWER_LINE_MAX = 64 << 10
ANSWER_LINES = 10_000
TRANSCRIPT_LINES = 10_000
TRANSCRIPT_LINE_MAX = 4096
SHOWN_CHARS = 300  # of a device's text quoted in an error

Number = Union[int, float]

_NAME = re.compile(r"^m-name-(?:dut-)?\[(.*)\]$")
_PROFILE = re.compile(r"^m-(profile|model)-\[(.*)\]$")
_RESULTS = re.compile(r"^m-results-\[(.*)\]$")
_LAP_US = re.compile(r"^m-lap-us-(\d{1,19})$")
_LAP_TICKS = re.compile(r"^m-lap-ticks-(\d{1,19})$")
_TICKS_HZ = re.compile(r"^m-ticks-hz-(\d{1,19})$")
_EXPECTING = re.compile(r"^m-\[Expecting (\d{1,19}) bytes\]$")
_ERROR = re.compile(r"^e-\[(.*)\]$")
_INTEGER = re.compile(r"^-?\d+$")


@dataclass
class InferResult:
    """One ``infer N W``: the timestamps around the N runs and the results after them."""

    iterations: int
    warmups: int
    results: List[Number]
    start_us: Optional[int] = None
    end_us: Optional[int] = None
    start_ticks: Optional[int] = None
    end_ticks: Optional[int] = None
    host_seconds: float = 0.0
    lines: List[str] = field(default_factory=list)

    @property
    def elapsed_us(self) -> Optional[int]:
        if self.start_us is None or self.end_us is None:
            return None
        return self.end_us - self.start_us

    @property
    def elapsed_ticks(self) -> Optional[int]:
        if self.start_ticks is None or self.end_ticks is None:
            return None
        return self.end_ticks - self.start_ticks


def parse_results(line: str) -> List[Number]:
    """The values of an ``m-results-[a,b,...]`` line: integers stay integers."""
    match = _RESULTS.match(line)
    if match is None:
        raise ProtocolError(f"not a results line: {shown(line)}")
    values: List[Number] = []
    for text in match.group(1).split(","):
        text = text.strip()
        if not text:
            continue
        try:
            values.append(int(text) if _INTEGER.match(text) else float(text))
        except ValueError:
            raise ProtocolError(
                f"results line holds {shown(text)}, not a number: {shown(line)}"
            ) from None
    return values


def shown(value: object) -> str:
    """``repr(value)`` of at most :data:`SHOWN_CHARS` characters, for an error message."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def errors_in(lines: List[str]) -> List[str]:
    """The texts of the ``e-[...]`` lines, the runtime's reasons worded (the firmware sends
    ``: #<why>``, :func:`~project_api.transport.reasons.explain`)."""
    return [explain(m.group(1)) for m in map(_ERROR.match, lines) if m is not None] + [
        line for line in lines if line.startswith("e-") and _ERROR.match(line) is None
    ]


class EembcDevice:
    """A benchmark firmware on ``link`` (a :class:`Link`, or a serial-like port that is
    wrapped in one). ``timeout`` bounds every command but ``infer``'s runs."""

    def __init__(self, link: Any, *, timeout: float = 10.0, runner: Any = None) -> None:
        self.link = link if isinstance(link, Link) else Link(link)
        self.timeout = float(timeout)
        self.runner = runner  # stopped by close()
        self.tick_hz: Optional[int] = None
        self.ticks_to_instructions: Optional[float] = None  # QEMU -icount: exact
        # The lines sent (">") and received ("<"), the last TRANSCRIPT_LINES of them.
        self.transcript: Deque[str] = collections.deque(maxlen=TRANSCRIPT_LINES)
        self._pending = bytearray()

    # --- lines -----------------------------------------------------------------------------

    def read_line(self, deadline: float) -> str:
        """The next line the device wrote (without its end of line; blank lines skipped)."""
        while True:
            end = self._pending.find(b"\n", 0, ANSWER_LINE_MAX + 1)
            if end >= 0:
                raw = bytes(self._pending[:end])
                del self._pending[: end + 1]
                line = raw.decode("ascii", "replace").strip("\r\0 ")
                if line:
                    self.transcript.append("< " + line[:TRANSCRIPT_LINE_MAX])
                    return line
                continue
            if len(self._pending) > ANSWER_LINE_MAX:
                self._pending.clear()
                raise ProtocolError(f"the device sent a line longer than {ANSWER_LINE_MAX} bytes")
            self._pending += self.link.read_some(deadline, what="an answer of the device")

    def send(self, text: str) -> None:
        """Writes one command (``%`` is added)."""
        if TERMINATOR in text or len(text) > LINE_MAX:
            raise ValueError(f"not a command: {text!r} (at most {LINE_MAX} characters, no %)")
        self.transcript.append("> " + text)
        self.link.write_all((text + TERMINATOR).encode("ascii"), what=f"command {text!r}")

    def command(self, text: str, *, timeout: Optional[float] = None) -> List[str]:
        """Sends ``text`` and returns the lines of the answer, ``m-ready`` excluded."""
        self.send(text)
        return self.answer(timeout)

    def answer(self, timeout: Optional[float] = None) -> List[str]:
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        lines: List[str] = []
        while True:
            line = self.read_line(deadline)
            if line == READY:
                return lines
            if len(lines) >= ANSWER_LINES:
                raise ProtocolError(f"the device answered with more than {ANSWER_LINES} lines")
            lines.append(line)

    def checked(self, text: str, *, timeout: Optional[float] = None) -> List[str]:
        """:meth:`command`, raising DeviceError when the device answers with an error."""
        lines = self.command(text, timeout=timeout)
        problems = errors_in(lines)
        if problems:
            raise DeviceError(
                f"the device refused {text.split(' ')[0]!r}: {problems[0][:SHOWN_CHARS]}"
            )
        return lines

    # --- session ---------------------------------------------------------------------------

    def connect(self, timeout: Optional[float] = None) -> str:
        """Synchronises with a device in any state (a boot banner or a previous client's
        half-sent command may be pending): ends whatever line it holds, asks its name and
        skips everything before the answer. Returns the name.

        A console that drops what arrives before the firmware enabled it (QEMU's STM32 USART
        until UE and RE are set) loses the question of a host quicker than the boot: while
        no line has come for :data:`RESEND_SECONDS` it is asked again, and the answers to the
        repeats are read away before the session goes on."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        asked = 0
        ask_at = time.monotonic()
        name: Optional[str] = None
        while True:
            if name is None and time.monotonic() >= ask_at:
                self.transcript.append("> ")
                self.link.write_all(TERMINATOR.encode("ascii"), what="a command terminator")
                self.send("name")
                asked += 1
                ask_at = time.monotonic() + RESEND_SECONDS
            try:
                line = self.read_line(deadline if name is not None else min(deadline, ask_at))
            except TransportTimeoutError:
                if time.monotonic() >= deadline:
                    raise
                continue
            match = _NAME.match(line)
            if match is not None:
                name = match.group(1)
            elif line == READY and name is not None:
                if asked > 1:
                    self._read_away(deadline)
                return name

    def _read_away(self, deadline: float) -> None:
        """Discards what the device says until it is quiet for :data:`RESEND_SECONDS`;
        ProtocolError when it is not by ``deadline``, or within the command time-out."""
        deadline = max(deadline, time.monotonic() + self.timeout)
        while True:
            if time.monotonic() > deadline:
                raise ProtocolError("the device does not stop talking after its name")
            try:
                self.link.read_some(time.monotonic() + RESEND_SECONDS)
            except TransportTimeoutError:
                break
        self._pending.clear()

    def name(self) -> str:
        for line in self.checked("name"):
            match = _NAME.match(line)
            if match is not None:
                return match.group(1)
        raise ProtocolError("the device answered `name` without an m-name- line")

    def profile(self) -> Tuple[str, str]:
        """(profile, model): what ``m-profile-[...]`` and ``m-model-[...]`` say."""
        found = {}
        for line in self.checked("profile"):
            match = _PROFILE.match(line)
            if match is not None:
                found[match.group(1)] = match.group(2)
        if "model" not in found:
            raise ProtocolError("the device answered `profile` without an m-model- line")
        return found.get("profile", ""), found["model"]

    def enable_ticks(self) -> Optional[int]:
        """Asks for m-lap-ticks- lines (an extension of mlperftiny firmware); their rate in
        Hz, or None when the device does not know the command."""
        lines = self.command("mlf-ticks on")
        for line in lines:
            match = _TICKS_HZ.match(line)
            if match is not None:
                self.tick_hz = int(match.group(1))
                return self.tick_hz
        return None

    def load(self, data: bytes, *, chunk: int = CHUNK_BYTES) -> None:
        """``db load N``, then the bytes ``chunk`` at a time; DeviceError unless the device
        says m-load-done after the last."""
        if not 1 <= chunk <= (LINE_MAX - 3) // 2:
            raise ValueError(f"chunk must be 1..{(LINE_MAX - 3) // 2} bytes, not {chunk}")
        lines = self.checked(f"db load {len(data)}")
        if not any(_EXPECTING.match(line) for line in lines):
            raise ProtocolError(f"the device answered `db load` with {shown(lines)}")
        done = False
        for offset in range(0, len(data), chunk):
            lines = self.checked("db " + data[offset : offset + chunk].hex())
            done = "m-load-done" in lines
        if not done:
            raise ProtocolError(f"the device did not say m-load-done after {len(data)} bytes")

    def infer(
        self, iterations: int = 1, warmups: int = 0, *, timeout: Optional[float] = None
    ) -> InferResult:
        """``infer N W``: the timestamps around the N runs and the results."""
        began = time.monotonic()
        lines = self.checked(f"infer {iterations} {warmups}", timeout=timeout)
        result = InferResult(iterations, warmups, [], host_seconds=time.monotonic() - began)
        result.lines = lines
        laps_us = [int(m.group(1)) for m in map(_LAP_US.match, lines) if m is not None]
        laps_ticks = [int(m.group(1)) for m in map(_LAP_TICKS.match, lines) if m is not None]
        if len(laps_us) >= 2:
            result.start_us, result.end_us = laps_us[0], laps_us[1]
        if len(laps_ticks) >= 2:
            result.start_ticks, result.end_ticks = laps_ticks[0], laps_ticks[1]
        found = [line for line in lines if line.startswith("m-results-")]
        if "m-infer-done" not in lines or not found:
            raise ProtocolError(f"the device's answer to `infer` is incomplete: {shown(lines)}")
        result.results = parse_results(found[-1])
        return result

    def results(self) -> List[Number]:
        """``results``: the outputs of the last inference."""
        for line in self.checked("results"):
            if line.startswith("m-results-"):
                return parse_results(line)
        raise ProtocolError("the device answered `results` without an m-results- line")

    def timestamp(self) -> Optional[int]:
        """``timestamp``: the device's clock in µs (None in energy mode)."""
        for line in self.checked("timestamp"):
            match = _LAP_US.match(line)
            if match is not None:
                return int(match.group(1))
        return None

    def close(self) -> None:
        """Closes the link and stops the firmware's runner, if it has one. Idempotent."""
        try:
            self.link.close()
        finally:
            if self.runner is not None:
                self.runner.stop()

    def __enter__(self) -> EembcDevice:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
