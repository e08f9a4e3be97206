"""``host_driven``: the firmware answers the framed device protocol (docs/protocol.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Mapping, Sequence, Tuple

from ...board import Board
from .base import ProjectType

if TYPE_CHECKING:  # pragma: no cover
    from ..plan import ModelPlan

FRAME_OVERHEAD = 10  # MLF_FRAME_OVERHEAD: marker, type, seq, length, CRC
MAX_WIRE_PAYLOAD = 0xFFFF  # the frame's 16-bit length field


def wire_payload(board: Board) -> int:
    """The largest request payload the firmware buffers on ``board``."""
    return min(int(board.max_payload), MAX_WIRE_PAYLOAD)


class HostDriven(ProjectType):
    name = "host_driven"
    firmware_sources: Tuple[str, ...] = ("mlf_device.c", "mlf_frame.c", "mlf_text.c")
    owned_options = ("profile", "device_protocol", "device_memory_bytes")
    owned_hint = "generate a host_driven project (--project-type host_driven)"
    link_buffer_item = "receive buffer"
    # The host puts the runtime's error descriptions back (transport/reasons.py): ~900 bytes
    # of English the firmware need not carry.
    definitions = ("MLF_ERROR_TEXT=0",)
    driven_by = "session()"
    cli_command = "mlf-project run"

    def ram_items(
        self, plans: Sequence[ModelPlan], board: Board, opts: Mapping[str, Any]
    ) -> Dict[str, int]:
        return {"receive buffer": wire_payload(board) + FRAME_OVERHEAD}

    def compile_definitions(
        self, plans: Sequence[ModelPlan], opts: Mapping[str, Any]
    ) -> Tuple[str, ...]:
        # Models that share one arena: the loop keeps track of whose tensors it holds.
        if sum(1 for plan in plans if plan.shares_arena) > 1:
            return (*self.definitions, "MLF_SHARED_ARENA=1")
        return self.definitions

    def context(
        self, plans: Sequence[ModelPlan], board: Board, opts: Mapping[str, Any]
    ) -> Dict[str, Any]:
        return {
            "header_includes": [],
            "model_fields": [],
            "defines": {"MLF_MAX_PAYLOAD": f"{wire_payload(board)}u"},
        }
