"""The project-type seam: what a firmware does with its models.

A project's type is chosen once, by name (option ``project_type``); the generator, the fit
check and ``footprint`` ask the kind, never compare names:

- :mod:`.host_driven`: the firmware answers the framed device protocol (docs/protocol.md);
- :mod:`.standalone`: it runs samples embedded in the image once, prints, exits;
- :mod:`.mlperftiny`: it speaks the MLPerf Tiny / EEMBC benchmark protocol
  (docs/mlperftiny.md);
- :mod:`.library`: no firmware: the model as a C library for the user's own
  (``mlf-project export``, :mod:`project_api.generate.export`).

Each kind names the firmware sources it compiles, the template of ``src/main.c``, the RAM its
loop reserves, what it adds to ``src/mlf_models.h`` and the options only it uses.

A kind may come in variants chosen by options: ``host_driven`` with ``device_protocol=microtvm``
is :mod:`.microtvm` (TVM's microTVM RPC server instead of our device protocol), with
``device_graph_executor`` its variant that also runs graph executors the host creates.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

from ...errors import GenerateError
from ...options import OPTIONS, PROJECT_TYPES
from .base import ProjectType
from .host_driven import FRAME_OVERHEAD, MAX_WIRE_PAYLOAD, HostDriven, wire_payload
from .library import Library
from .microtvm import HostDrivenMicroTvm, HostDrivenMicroTvmGraph
from .mlperftiny import MlperfTiny
from .standalone import Standalone

KINDS: Dict[str, ProjectType] = {
    kind.name: kind for kind in (HostDriven(), Standalone(), MlperfTiny(), Library())
}
assert tuple(KINDS) == PROJECT_TYPES, "options.PROJECT_TYPES lists the kinds, in this order"


# (kind name, device_protocol, device_graph_executor) -> the variant serving it.
VARIANTS: Dict[Tuple[str, str, bool], ProjectType] = {
    ("host_driven", "microtvm", False): HostDrivenMicroTvm(),
    ("host_driven", "microtvm", True): HostDrivenMicroTvmGraph(),
}


def project_type_for(name: str, opts: Optional[Mapping[str, Any]] = None) -> ProjectType:
    """The kind called ``name`` (its variant for ``opts``' device_protocol); GenerateError
    naming the others."""
    kind = KINDS.get(name)
    if kind is None:
        raise GenerateError(
            f"unknown project type {name!r}", hint="one of: " + ", ".join(PROJECT_TYPES)
        )
    protocol = str((opts or {}).get("device_protocol") or "mlf")
    on_device = bool((opts or {}).get("device_graph_executor"))
    return VARIANTS.get((name, protocol, on_device), kind)


def check_owned_options(kind: ProjectType, opts: Mapping[str, Any]) -> None:
    """Refuses an option that only another project type uses."""
    for other in KINDS.values():
        for name in other.owned_options if other.name != kind.name else ():
            if opts.get(name) not in (None, OPTIONS[name].default):
                raise GenerateError(
                    f"option {name} needs a {other.name} project, not {kind.name}",
                    hint=other.owned_hint,
                )


__all__ = [
    "FRAME_OVERHEAD",
    "KINDS",
    "MAX_WIRE_PAYLOAD",
    "ProjectType",
    "check_owned_options",
    "project_type_for",
    "wire_payload",
]
