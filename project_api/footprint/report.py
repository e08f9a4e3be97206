"""The footprint report: planned and linked figures, as text, JSON and verdicts."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Tuple

from .linked import LinkedSizes

# --- the report -----------------------------------------------------------------------------


@dataclass
class Footprint:
    """RAM and flash of one firmware, planned and (when built) linked."""

    project_dir: Path
    board: Any
    info: Dict[str, Any]
    planned_ram: Dict[str, int]
    planned_flash: Dict[str, Optional[int]]
    params_ram_bytes: int
    params_in_place: int
    params_total: int

    @property
    def params_padding_bytes(self) -> int:
        """Flash the params take beyond their tensors' bytes (project.json's figure)."""
        models = self.info.get("models") or []
        return sum(int(m.get("sizes", {}).get("params_padding_bytes", 0)) for m in models)

    notes: List[str] = field(default_factory=list)
    linked: Optional[LinkedSizes] = None
    temporary: bool = False  # project_dir was a scratch directory, deleted since

    # --- headline figures ------------------------------------------------------------

    @property
    def models(self) -> List[Dict[str, Any]]:
        return list(self.info.get("models", []))

    def _sum_sizes(self, key: str) -> int:
        return sum(int(m["sizes"].get(key) or 0) for m in self.models)

    @property
    def arena_bytes(self) -> int:
        """The firmware's arenas: the one the models share (the largest one's) and any
        model's own; with the liveness plan the operators' workspace windows are in them."""
        return self.planned_ram.get("arena", 0)

    @property
    def workspace_bytes(self) -> int:
        """Workspace reserved beside the arenas (graph_format=json, memory_plan=tvm)."""
        return self.planned_ram.get("workspace", 0)

    def memory_plans(self) -> List[Dict[str, Any]]:
        """Per model: TVM's plan (storage ids side by side plus the largest workspace), ours
        (the liveness plan's arena: tensors and each operator's workspace window; a JSON
        graph keeps TVM's) and the liveness lower bound, in bytes."""
        out = []
        for m in self.models:
            sizes, plan = m["sizes"], m.get("memory_plan") or {}
            tvm = sizes.get("tvm_plan_bytes")
            ours = plan.get(
                "planned_bytes",
                int(sizes["arena_bytes"])
                + int(sizes.get("workspace_ram_bytes", sizes["workspace_bytes"])),
            )
            out.append(
                {
                    "model": m["name"],
                    "tvm_plan_bytes": tvm,
                    "planned_bytes": ours,
                    "lower_bound_bytes": plan.get("lower_bound_bytes"),
                    "over_bound_percent": plan.get("over_bound_percent"),
                    "peak_operator": plan.get("peak_operator") or "",
                    "saved_bytes": None if tvm is None else tvm - ours,
                    "shares_arena": bool(m.get("shares_arena")),
                }
            )
        return out

    def memory_plan_lines(self) -> List[str]:
        """The plans side by side, as text (and the one arena models share)."""
        plans = self.memory_plans()
        lines = [f"{'memory plan':<24}{'TVM plan':>12}{'ours':>12}{'lower bound':>14}"]
        for p in plans:
            bound = p["lower_bound_bytes"]
            over = "" if bound is None else f" (+{p['over_bound_percent']:.2f} %)"
            lines.append(
                f"  {p['model']:<22}{_num(p['tvm_plan_bytes']):>12}{_num(p['planned_bytes']):>12}"
                f"{_num(bound) if bound is not None else '-':>14}{over}"
            )
        lines += [
            f"  peak of {p['model']}: during {p['peak_operator']}"
            for p in plans
            if p["peak_operator"]
        ]
        sharing = [p for p in plans if p["shares_arena"]]
        if len(sharing) > 1:
            side_by_side = sum(int(p["planned_bytes"]) for p in sharing)
            lines.append(
                f"  one arena for {len(sharing)} models (one inference at a time): "
                f"{int(self.info.get('shared_arena_bytes') or 0):,} B, not {side_by_side:,} B "
                "side by side"
            )
        return lines

    @property
    def model_pools_bytes(self) -> int:
        """RAM the model's C reserves itself (USMP's static pools)."""
        if self.linked is not None:
            return self.linked.category_bytes("pools", (".bss", ".data"))
        return self.planned_ram.get("model pools", 0)

    @property
    def params_flash_bytes(self) -> int:
        if self.linked is not None:
            return self.linked.category_bytes("params", (".rodata", ".text"))
        return self._sum_sizes("params_blob_bytes")

    @property
    def runtime_text_bytes(self) -> Optional[int]:
        if self.linked is not None:
            return self.linked.category_bytes("runtime", (".text", ".rodata"))
        return self.planned_flash.get("runtime")

    @property
    def model_code_bytes(self) -> Optional[int]:
        if self.linked is not None:
            return self.linked.category_bytes("model", (".text", ".rodata"))
        return self.planned_flash.get("model code")

    @property
    def runtime_ram_bytes(self) -> int:
        if self.linked is not None:
            ram = (".data", ".bss")
            return sum(
                self.linked.category_bytes(c, ram) for c in ("runtime", "state", "rx_buffer")
            ) + self.linked.category_bytes("graph", (".bss",))
        return sum(
            self.planned_ram.get(k, 0) for k in ("executor state", "graph tables", "rx buffer")
        )

    @property
    def ram_total_bytes(self) -> int:
        if self.linked is not None:
            return self.linked.ram_bytes
        return sum(self.planned_ram.values())

    @property
    def flash_total_bytes(self) -> int:
        if self.linked is not None:
            return self.linked.flash_bytes
        return sum(v for v in self.planned_flash.values() if v)

    @property
    def ram_available(self) -> Optional[int]:
        ram = getattr(self.board, "ram", None)
        return None if ram is None else int(ram.length)

    @property
    def flash_available(self) -> Optional[int]:
        flash = getattr(self.board, "flash", None)
        return None if flash is None else int(flash.length)

    @property
    def fits(self) -> bool:
        ram, flash = self.ram_available, self.flash_available
        return (ram is None or self.ram_total_bytes <= ram) and (
            flash is None or self.flash_total_bytes <= flash
        )

    @property
    def stage(self) -> str:
        return "linked" if self.linked is not None else "planned"

    def verdict(self) -> str:
        what = ", ".join(m["name"] for m in self.models) or "firmware"
        ram, flash = self.ram_available, self.flash_available
        if ram is None and flash is None:
            return (
                f"{what} on {self.board.name}: RAM {self.ram_total_bytes:,} B, flash "
                f"{self.flash_total_bytes:,} B ({self.stage}; the host has no memory limit)"
            )
        parts = []
        if ram is not None:
            parts.append(
                f"RAM {self.ram_total_bytes:,} of {ram:,} B ({_pct(self.ram_total_bytes, ram)})"
            )
        if flash is not None:
            parts.append(
                f"flash {self.flash_total_bytes:,} of {flash:,} B "
                f"({_pct(self.flash_total_bytes, flash)})"
            )
        verb = "fits" if self.fits else "DOES NOT FIT"
        return f"{what} {verb} {self.board.name}: {', '.join(parts)} ({self.stage})"

    # --- output ---------------------------------------------------------------------

    def to_json(self) -> Dict[str, Any]:
        return {
            # a scratch project is gone once the report is made
            "project_dir": None if self.temporary else str(self.project_dir),
            "board": self.board.name,
            "project_type": self.info.get("project_type"),
            "models": [m["name"] for m in self.models],
            "graph_format": sorted({str(m.get("graph_format")) for m in self.models}),
            "stage": self.stage,
            "runtime_text_bytes": self.runtime_text_bytes,
            "runtime_ram_bytes": self.runtime_ram_bytes,
            "arena_bytes": self.arena_bytes,
            "workspace_bytes": self.workspace_bytes,
            "model_pools_bytes": self.model_pools_bytes,
            "params_flash_bytes": self.params_flash_bytes,
            "params_ram_bytes": self.params_ram_bytes,
            "params_in_place": self.params_in_place,
            "params_total": self.params_total,
            "params_padding_bytes": self.params_padding_bytes,
            "model_code_bytes": self.model_code_bytes,
            "flash_total_bytes": self.flash_total_bytes,
            "ram_total_bytes": self.ram_total_bytes,
            "flash_available_bytes": self.flash_available,
            "ram_available_bytes": self.ram_available,
            "fits": self.fits,
            "verdict": self.verdict(),
            "planned": {"ram": dict(self.planned_ram), "flash": dict(self.planned_flash)},
            "memory_plan": {
                "models": self.memory_plans(),
                "shared_arena_bytes": self.info.get("shared_arena_bytes"),
            },
            "linked": None if self.linked is None else self.linked.to_json(),
            "notes": list(self.notes),
            "counted": {
                "runtime_text_bytes": ".text + .rodata of the runtime's objects (crt/src)",
                "runtime_ram_bytes": "executor state + graph tables in RAM + receive buffer "
                "(+ the runtime's globals once linked); not tensors, workspace, stack",
                "params_ram_bytes": "bytes of params copied into the arena (0: all bound in "
                "place in flash)",
                "params_padding_bytes": "params flash beyond the tensors' bytes: alignment "
                "padding (const tables), or TVM's headers and padding entries (JSON graph)",
            },
        }

    def _kinds(self) -> str:
        kinds = sorted(
            {f"{m.get('executor', 'graph')} executor" for m in self.models}
            | {f"{m.get('graph_format')} graph" for m in self.models}
        )
        return ", ".join(kinds)

    def ram_rows(self) -> List[Tuple[str, Optional[int], Optional[int]]]:
        """(what, planned, linked) RAM figures, total left out."""
        linked = self.linked
        ram = (".data", ".bss")

        def got(category: str, buckets: Iterable[str] = ram) -> Optional[int]:
            return None if linked is None else linked.category_bytes(category, buckets)

        rows: List[Tuple[str, Optional[int], Optional[int]]] = [
            ("arena (tensors, windows)", self.planned_ram.get("arena"), got("arena")),
            ("workspace", self.planned_ram.get("workspace"), got("workspace")),
            ("model pools (USMP)", self.planned_ram.get("model pools", 0), got("pools")),
            ("executor state", self.planned_ram.get("executor state"), got("state")),
            ("graph tables", self.planned_ram.get("graph tables", 0), got("graph", (".bss",))),
            ("receive buffer", self.planned_ram.get("rx buffer", 0), got("rx_buffer")),
            ("stack", self.planned_ram.get("stack", 0), got("stack", (".stack",))),
        ]
        if self.planned_ram.get("cmsis-nn adapter"):  # linked: in the CMSIS-NN library's .bss
            rows.append(("cmsis-nn adapter", self.planned_ram["cmsis-nn adapter"], None))
        if linked is not None:
            rows.append(("runtime globals", None, got("runtime")))
            other = sum(
                linked.category_bytes(c, ram)
                for c in ("firmware", "board", "libc", "model", "lto", "other")
            ) + linked.category_bytes("heap", (".heap",))
            rows.append(("glue, board, libc", None, other))
        return rows

    def flash_rows(self) -> List[Tuple[str, Optional[int], Optional[int]]]:
        """(what, planned, linked) flash figures, total left out."""
        linked = self.linked
        code = (".text", ".rodata")

        def got(category: str) -> Optional[int]:
            return None if linked is None else linked.category_bytes(category, code)

        rows: List[Tuple[str, Optional[int], Optional[int]]] = [
            ("params", self.planned_flash.get("params"), got("params")),
            ("graph tables / json", self.planned_flash.get("graph"), got("graph")),
        ]
        if self.planned_flash.get("samples") or got("samples"):
            rows.append(("samples", self.planned_flash.get("samples"), got("samples")))
        rows += [
            ("model code", self.planned_flash.get("model code"), got("model")),
            ("runtime", self.planned_flash.get("runtime"), got("runtime")),
        ]
        if linked is not None:
            rows += [
                ("firmware loop + glue", None, got("firmware")),
                ("board seam", None, got("board")),
                ("libc", None, got("libc")),
                (".data initialisers", None, linked.bucket_total(".data")),
            ]
            if got("lto"):
                rows.append(("link-time optimisation", None, got("lto")))
            if got("other"):
                rows.append(("other", None, got("other")))
        return rows

    def headline(self) -> str:
        return (
            f"{', '.join(m['name'] for m in self.models)} on {self.board.name} "
            f"({self.info.get('project_type')}, {self._kinds()}) — "
            + (
                f"linked {self.linked.firmware} ({self.linked.method})"
                if self.linked is not None
                else "planned (not built)"
            )
        )

    def text(self) -> str:
        linked = self.linked
        lines = [self.headline()]
        ram_rows = self.ram_rows()
        ram_rows.append(
            (
                "total",
                sum(self.planned_ram.values()),
                linked.ram_bytes if linked is not None else None,
            )
        )
        lines.append(_table("RAM", ram_rows, self.ram_available))
        flash_rows = self.flash_rows()
        flash_rows.append(
            (
                "total",
                sum(v for v in self.planned_flash.values() if v),
                linked.flash_bytes if linked is not None else None,
            )
        )
        lines.append(_table("flash", flash_rows, self.flash_available))
        lines += self.memory_plan_lines()
        lines.append(
            f"params: {self.params_in_place} of {self.params_total} bound in place in flash, "
            f"{self.params_ram_bytes:,} B copied into RAM; {self.params_padding_bytes:,} B of "
            "the params' flash is alignment padding (or TVM's headers, with a JSON graph)"
        )
        lines.append(
            f"runtime: {_num(self.runtime_text_bytes)} B code+rodata, "
            f"{self.runtime_ram_bytes:,} B RAM beyond tensors and workspace"
        )
        lines += [f"note: {note}" for note in self.notes]
        lines.append(f"verdict: {self.verdict()}")
        return "\n".join(lines)


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f} %" if whole else "-"


def _num(value: Optional[int]) -> str:
    return "?" if value is None else f"{value:,}"


def _table(
    title: str, rows: List[Tuple[str, Optional[int], Optional[int]]], available: Optional[int]
) -> str:
    out = [f"{title:<24}{'planned':>12}{'linked':>12}"]
    for name, planned, linked in rows:
        out.append(
            f"  {name:<22}{'-' if planned is None else f'{planned:,}':>12}"
            f"{'-' if linked is None else f'{linked:,}':>12}"
        )
    if available is not None:
        out.append(f"  {'available':<22}{available:>12,}")
    return "\n".join(out)
