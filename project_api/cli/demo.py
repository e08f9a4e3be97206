"""``mlf-project demo``: the bundled digit classifier, generated, built and run end to end.

With no arguments it uses the ``host`` board and a temporary directory: generate a project
from examples/digits.tar, build it (progress on stderr), run every bundled sample through the
device protocol, print each prediction next to its label and check every output against the
numpy reference (examples/digits.reference.npz). Exit status 0 only when all match.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Dict

import numpy as np

from ..errors import GenerateError
from .command import EXIT_FAILURE, EXIT_OK, Command

EXAMPLE = "digits"
RTOL = 1e-5


def example_files() -> Dict[str, Path]:
    from ..resources import examples_dir

    try:
        folder = examples_dir()
    except FileNotFoundError as err:
        raise GenerateError(f"the bundled example is missing: {err}") from None
    files = {
        "archive": folder / f"{EXAMPLE}.tar",
        "samples": folder / f"{EXAMPLE}.samples.npz",
        "reference": folder / f"{EXAMPLE}.reference.npz",
    }
    for what, path in files.items():
        if not path.is_file():
            raise GenerateError(f"the bundled example's {what} is missing: {path}")
    return files


def _check_replaceable(project_dir: Path, archive_name: str, force: bool) -> None:
    """--project-dir may hold an earlier demo's project; another project only with --force."""
    from ..driver import Project
    from ..generate import is_generated_project

    if force or not is_generated_project(project_dir):
        return  # new, empty, or not a project: generate decides
    archive = Project.open(project_dir).info.get("archive")
    if archive != archive_name:
        raise GenerateError(
            f"{project_dir} holds a project generated from {archive}, not the demo's",
            hint="choose another --project-dir, or pass --force to replace it",
        )


class DemoCommand(Command):
    name = "demo"
    runs_model_code = True
    help = "generate, build and run the bundled example model (digits) end to end"
    description = (
        "Generate a firmware project for the bundled 8x8 digit classifier, build it, run "
        "every bundled sample on the board through the device protocol, and compare each "
        "output with the numpy reference. Takes no arguments; --board runs it elsewhere."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--board", default="host", help="board to run on (default: host)")
        parser.add_argument(
            "--project-dir", help="keep the generated project here (default: a temporary one)"
        )
        parser.add_argument(
            "--force",
            action="store_true",
            help="replace a project of another archive in --project-dir (an earlier demo's "
            "is replaced without it)",
        )

    def do_run(self, args: argparse.Namespace) -> int:
        from ..driver import Project
        from ..modelgen.digits import ascii_image
        from .build import ProgressPrinter

        files = example_files()
        samples = np.load(str(files["samples"]))
        images = samples["image"]
        labels = samples["labels"]
        reference = np.load(str(files["reference"]))["output0"]
        scratch = None
        if args.project_dir:
            project_dir = Path(args.project_dir)
            _check_replaceable(project_dir, files["archive"].name, args.force)
        else:
            scratch = Path(tempfile.mkdtemp(prefix="mlf-demo-"))
            project_dir = scratch / "digits"
        try:
            progress = ProgressPrinter()
            print(f"mlf-project demo: the digits classifier on board {args.board}")
            started = time.monotonic()
            project = Project.generate(
                files["archive"],
                project_dir,
                board=args.board,
                progress=progress,
                force=True,
            )
            try:
                project.build(progress=progress)
            finally:
                progress.done()
            print(f"generated and built in {time.monotonic() - started:.1f} s: {project.firmware}")
            failures = 0
            timeout = 10.0 if project.board.is_host else 60.0
            with project.session(timeout=timeout) as session:
                name = session.model(0).inputs[0].name
                for index, (image, label) in enumerate(zip(images, labels)):
                    outputs = session.run({name: image})
                    got = outputs["output0"]
                    want = reference[index]
                    matches = got.shape == want.shape and np.allclose(
                        got, want, rtol=RTOL, atol=RTOL * float(np.max(np.abs(want)))
                    )
                    predicted = int(np.argmax(got))
                    stats = session.last_stats
                    verdict = "ok" if predicted == int(label) else "WRONG"
                    print(
                        f"sample {index}: label {int(label)} predicted {predicted} "
                        f"(p={float(got.reshape(-1)[predicted]):.3f}, {verdict}), output "
                        f"{'matches' if matches else 'DIFFERS from'} the numpy reference, "
                        f"{stats.device_seconds * 1e6:.1f} us on the device"
                    )
                    if index == 0:
                        print("  " + ascii_image(image).replace("\n", "\n  "))
                    if not matches:
                        failures += 1
            if failures:
                print(f"demo: {failures} of {len(labels)} samples failed")
                return EXIT_FAILURE
            print(
                f"demo: all {len(labels)} predictions correct and every output matches the "
                f"numpy reference (rtol {RTOL:g})"
            )
            return EXIT_OK
        finally:
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)
