"""The host as a board: a POSIX process, its console on stdin/stdout, no cross toolchain."""

from __future__ import annotations

from pathlib import Path

from ..resources import crt_dir
from .architecture import Architecture


class Host(Architecture):
    name = "host"
    is_host = True
    console_kinds = ("stdio",)
    timer_kinds = ("host-monotonic",)

    def family_dir(self, family: str) -> Path:
        return crt_dir() / "platform" / "host"
