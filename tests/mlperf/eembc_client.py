"""A stand-alone MLPerf Tiny protocol client, written from the protocol's description only
(commands end with '%', every answer ends with an `m-ready` line), the way a third-party tool
talks to a board: pyserial on a port path or URL, nothing from project_api.

    python eembc_client.py PORT INPUT.bin  ->  prints one JSON object: name, load, results

Used by tests/test_mlperf_attach.py against `mlf-project attach`.
"""

from __future__ import annotations

import json
import re
import sys
import time
from typing import List

import serial


def command(port: serial.SerialBase, text: str, timeout: float = 30.0) -> List[str]:
    port.write((text + "%").encode())
    lines: List[str] = []
    buffer = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        buffer += port.read(port.in_waiting or 1)
        while b"\n" in buffer:
            raw, buffer = buffer.split(b"\n", 1)
            line = raw.decode().strip()
            if line == "m-ready":
                return lines
            if line:
                lines.append(line)
    raise TimeoutError(f"no m-ready after {text!r}; got {lines}")


def main(url: str, input_path: str) -> None:
    with open(input_path, "rb") as handle:
        data = handle.read()
    port = serial.serial_for_url(url, baudrate=115200, timeout=0.1)
    command(port, "")  # ends whatever a previous user left half-typed
    out = {"name": command(port, "name")}
    out["load"] = command(port, f"db load {len(data)}")
    for offset in range(0, len(data), 31):
        out["load"] += command(port, "db " + data[offset : offset + 31].hex())
    out["infer"] = command(port, "infer 1 0")
    results = command(port, "results")
    match = re.match(r"^m-results-\[(.*)\]$", results[-1])
    assert match, results
    out["results"] = [float(v) for v in match.group(1).split(",")]
    print(json.dumps(out))
    port.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
