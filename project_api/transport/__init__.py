"""The device protocol (docs/protocol.md) over pyserial: frames, messages, the host-side
:class:`Session`, the link helpers, a Python device emulator, and the reader of standalone
firmware output."""

from __future__ import annotations

from .link import Link, open_serial
from .session import Session
from .standalone import StandaloneReport, parse_standalone
from .tensors import DeviceInfo, ModelInfo, RunStats, TensorSpec

__all__ = [
    "DeviceInfo",
    "Link",
    "ModelInfo",
    "RunStats",
    "Session",
    "StandaloneReport",
    "TensorSpec",
    "open_serial",
    "parse_standalone",
]
