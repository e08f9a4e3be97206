"""``mlf-project profile ARCHIVE_OR_PROJECT``: where one inference's time and workspace go,
per operator call (``run`` with the ``profile`` option, then the device's call records)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ..errors import InputError
from .command import EXIT_OK
from .run import RunCommand, add_input_argument


class ProfileCommand(RunCommand):
    name = "profile"
    help = "per-operator time and workspace of a model on a board, as a table, JSON or HTML"
    description = (
        "Generate (for an archive) and build the model with the profile option (its C "
        "compiled with -finstrument-functions; normal firmware is unchanged), run it and "
        "list every operator call in execution order: instructions (QEMU with --icount), "
        "cycles (Cortex-M boards) or microseconds (host), share of the whole inference, "
        "workspace taken, tensor sizes. The sum of the calls is set against the whole "
        "inference: the difference is dispatch plus profiling, measured."
    )

    project_types = ("host_driven",)

    def add_own_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Inputs only: the outputs are run's business, the project type is host_driven."""
        add_input_argument(parser)
        parser.set_defaults(output=None, project_type=None)

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        super().add_arguments(parser)
        parser.add_argument(
            "--repeat", type=int, default=1, help="runs to take the median of (default 1)"
        )
        parser.add_argument("--html", help="also write a self-contained HTML report here")

    def forced_options(self, args: argparse.Namespace) -> Dict[str, str]:
        if args.repeat < 1:
            raise InputError(f"--repeat must be at least 1, not {args.repeat}")
        return {"profile": "true"}

    def execute(
        self,
        project: Any,
        planned: Optional[List[Tuple[str, Dict[str, Any]]]],
        timeout: float,
        run_timeout: float,
        args: argparse.Namespace,
    ) -> int:
        from ..report.profile import build_profile, profile_target

        if not project.info.get("requested_options", {}).get("profile") and not _has_profile(
            project
        ):
            raise InputError(
                f"{project.dir} was generated without the profile option",
                hint="pass the archive, or regenerate with -o profile=true",
            )
        assert planned is not None
        profiles = []
        with project.session(timeout=timeout, run_timeout=run_timeout) as session:
            for name, inputs in planned:
                runs = []
                for _ in range(args.repeat):
                    session.run(inputs, model=name)
                    records, dropped, anchor = session.profile()
                    runs.append((records, dropped, anchor, session.last_stats.ticks))
                profiles.append(
                    build_profile(
                        profile_target(project, name),
                        runs,
                        session.info.tick_hz,
                        session.ticks_to_instructions,
                    )
                )
        if args.json:
            documents = [p.to_json() for p in profiles]
            print(json.dumps(documents[0] if len(documents) == 1 else documents, indent=2))
        else:
            print("\n\n".join(p.text() for p in profiles))
        if args.html:
            _write_html(Path(args.html), project, profiles, args)
        return EXIT_OK


def _has_profile(project: Any) -> bool:
    return (Path(project.dir) / "runtime" / "firmware" / "mlf_profile.c").is_file()


def _write_html(path: Path, project: Any, profiles: List[Any], args: argparse.Namespace) -> None:
    from ..footprint import project_footprint
    from ..generate.plan import generator_version
    from ..report.html import page, toolchain_versions

    footprint = project_footprint(project, estimate=False)
    metadata: Dict[str, Any] = {
        "board": project.board.name,
        "models": ", ".join(p.model for p in profiles),
        "project": None if getattr(project, "temporary", False) else str(project.dir),
        "options": ", ".join(f"{k}={v}" for k, v in sorted(project.options.items()) if v),
        "runs": args.repeat,
        "mlf-project-api": generator_version(),
        **toolchain_versions(project.board),
    }
    body = page(
        f"Profile of {', '.join(p.model for p in profiles)} on {project.board.name}",
        metadata=metadata,
        profile=profiles[0],
        footprint=footprint,
    )
    path.write_text(body, encoding="utf-8")
    print(f"report written to {path}", file=sys.stderr)
