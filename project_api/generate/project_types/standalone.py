"""``standalone``: the firmware runs samples embedded in the image once, prints the results
and exits with a status (docs/protocol.md, section 5)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Mapping, Sequence, Tuple

from ...board import Board
from ...read import Archive
from .. import samples as samples_mod
from .base import NO_TEXT_FLOATS, ProjectType, float_outputs

if TYPE_CHECKING:  # pragma: no cover
    from ..plan import ModelPlan


class Standalone(ProjectType):
    name = "standalone"
    firmware_sources = ("mlf_standalone.c", "mlf_frame.c", "mlf_text.c")
    # The firmware says "<status>: #<why>"; the host words the reason (transport/reasons.py).
    definitions = ("MLF_ERROR_TEXT=0",)
    owned_options = ("sample_inputs",)
    owned_hint = "the samples are embedded in standalone firmware only"
    driven_by = "run_standalone()"
    cli_command = "mlf-project run"

    def compile_definitions(
        self, plans: Sequence[ModelPlan], opts: Mapping[str, Any]
    ) -> Tuple[str, ...]:
        # without float outputs, nothing links floating-point arithmetic (docs/protocol.md §5)
        floats = float_outputs([plan.model for plan in plans])
        return self.definitions + (() if floats else (NO_TEXT_FLOATS,))

    def plan(self, plan: ModelPlan, archive: Archive, opts: Mapping[str, Any]) -> None:
        plan.samples = samples_mod.choose_samples(plan.model, opts["sample_inputs"], archive)
        plan.samples_blob = plan.samples.to_blob()

    def context(
        self, plans: Sequence[ModelPlan], board: Board, opts: Mapping[str, Any]
    ) -> Dict[str, Any]:
        print_bytes = 1 << 20 if board.is_host else 16384
        return {
            "header_includes": ["mlf_standalone.h"],
            "model_fields": [
                "const mlf_standalone_sample* samples; /* the embedded inputs and expected "
                "outputs */",
                "uint32_t num_samples;",
            ],
            "defines": {
                "MLF_PRINT_BYTES": f"{print_bytes}u /* outputs up to this size are printed in "
                "full */"
            },
        }
