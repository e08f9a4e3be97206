"""What every project type provides (see the package docstring)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ...board import Board
from ...read import Archive, Model
from ...read.dtypes import CODE_BFLOAT, CODE_FLOAT, parse_dtype
from ..registry import defined_functions

if TYPE_CHECKING:  # pragma: no cover
    from ..plan import ModelPlan


class ProjectType:
    """One thing a firmware can do with its models. Subclasses set the class attributes and
    override the methods they need."""

    name = ""
    #: template_project/firmware/*.c files the firmware compiles (every header is copied)
    firmware_sources: Tuple[str, ...] = ()
    #: options only this type uses; given to another type they are refused with ``owned_hint``
    owned_options: Tuple[str, ...] = ()
    owned_hint = ""
    #: the RAM item (of :meth:`ram_items`) buffering the console link: footprint's receive buffer
    link_buffer_item: Optional[str] = None
    #: compile definitions of every C file unless the user's compile_definitions set the
    #: same macro
    definitions: Tuple[str, ...] = ()
    #: whether operator-style archives (functions, no graph) make sense: the host calls them
    serves_operators = False
    #: whether its firmware parses graph JSON of its own (not only graph_format=json)
    parses_graph_json = False
    #: whether the models' arenas may be one (one inference at a time, and what a model
    #: keeps between runs are its inputs and outputs, which the loop guards)
    shares_arena = True
    #: what drives a built firmware of this type: the driver.Project method, the CLI command
    driven_by = ""
    cli_command = ""
    #: its "project" is an exported C library (generate/export/), not firmware
    exports_library = False
    #: the line a freshly started firmware ends its boot output with; ``attach`` waits for it
    #: before it hands the console over, so that a client connecting at once does not read
    #: the boot banner as the answer to its first command (None: it says nothing at boot)
    boot_done: Optional[bytes] = None

    @property
    def main_template(self) -> str:
        """The template of src/main.c (it extends main.c.j2)."""
        return f"main_{self.name}.c.j2"

    def compile_definitions(
        self, plans: Sequence[ModelPlan], opts: Mapping[str, Any]
    ) -> Tuple[str, ...]:
        """``definitions``, and what this type decides from the models."""
        return self.definitions

    def check(self, models: Sequence[Model], opts: Mapping[str, Any]) -> None:
        """Refuses, before anything is planned, what this type cannot build."""

    def plan(self, plan: ModelPlan, archive: Archive, opts: Mapping[str, Any]) -> None:
        """Adds what this type embeds per model to ``plan`` (standalone: the samples)."""

    def keeps_executor(self, plan: ModelPlan) -> bool:
        """Whether the firmware sets this model's executor up (arena, params, tables)."""
        return True

    def ram_items(
        self, plans: Sequence[ModelPlan], board: Board, opts: Mapping[str, Any]
    ) -> Dict[str, int]:
        """RAM this type's loop reserves besides the models' (by name, for the fit check)."""
        return {}

    def context(
        self, plans: Sequence[ModelPlan], board: Board, opts: Mapping[str, Any]
    ) -> Dict[str, Any]:
        """What the templates need from this type: ``header_includes`` and ``model_fields``
        (lines of src/mlf_models.h), ``defines`` (name → value there) and its own keys for
        its main template."""
        return {"header_includes": [], "model_fields": [], "defines": {}}

    def symbol_renames(self, plans: Sequence[ModelPlan]) -> List[Dict[str, str]]:
        """The rename rule (old C name → new, per model, given to its code as ``-D`` or a
        header): functions that several models of one firmware define (TVM names most of them
        ``tvmgen_<mod>_...``, but not all, e.g. ``__tvm_main__``) get a per-model name, so the
        firmware links."""
        if len(plans) < 2:
            return [{} for _ in plans]
        defined = [defined_functions(plan.model.sources) for plan in plans]
        counts: Dict[str, int] = {}
        for names in defined:
            for name in names:
                counts[name] = counts.get(name, 0) + 1
        return [
            {
                name: f"mlf_{plan.c_name}_{name.lstrip('_')}"
                for name in sorted(names)
                if counts[name] > 1
            }
            for plan, names in zip(plans, defined)
        ]

    def describe(self, plans: Sequence[ModelPlan], opts: Mapping[str, Any]) -> Dict[str, Any]:
        """What project.json records about the type (beyond its name)."""
        return {}


def float_outputs(models: Sequence[Model]) -> bool:
    """Whether any output of these models holds floats (float or bfloat16)."""
    return any(
        parse_dtype(spec.dtype).code in (CODE_FLOAT, CODE_BFLOAT)
        for model in models
        for spec in model.outputs
    )


# Firmware that prints numbers (mlf_text.c) but never a float leaves float reading out.
NO_TEXT_FLOATS = "MLF_TEXT_FLOATS=0"


def input_bytes(models: Sequence[Model]) -> List[int]:
    """The byte size of every input of every model, in order."""
    return [spec.nbytes for model in models for spec in model.inputs]
