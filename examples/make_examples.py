#!/usr/bin/env python3
"""Regenerate the bundled example model, byte for byte.

    python examples/make_examples.py [OUTPUT_DIR]     (default: this directory)

Trains the 8x8 digit classifier (project_api.modelgen.digits, numpy only, fixed seeds) and
writes:
  digits.tar            the MLF archive (TVM 0.14 layout, version 7, model "digits")
  digits.samples.npz    "image": [10, 1, 1, 8, 8] float32, one rendered digit per class;
                        "labels": [10] int32, the digit drawn in each
  digits.reference.npz  "output0": [10, 1, 10] float32, the expected softmax of each sample
Running it twice gives identical files (fixed seeds, tar mtimes/owners, zip timestamps).
"""

from __future__ import annotations

import io
import sys
import zipfile
from pathlib import Path
from typing import Dict

import numpy as np

HERE = Path(__file__).resolve().parent
if __package__ in (None, "") and str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))  # run from a source checkout

from project_api.modelgen import digits  # noqa: E402

SAMPLE_SEED = 2024


def write_npz(path: Path, arrays: Dict[str, np.ndarray]) -> None:
    """Like numpy.savez, but with fixed zip timestamps so the bytes are reproducible."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, array in arrays.items():
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, np.ascontiguousarray(array), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, buffer.getvalue())


def main(argv: list) -> int:
    out = Path(argv[1]) if len(argv) > 1 else HERE
    out.mkdir(parents=True, exist_ok=True)
    weights = digits.train_digits(seed=0)
    model = digits.digits_network(weights).build(sample_fn=digits.digit_sample)
    model.write(out / "digits.tar")

    labels = np.arange(digits.CLASSES, dtype=np.int32)
    images = [digits.digit_sample(SAMPLE_SEED + d, int(d))[digits.INPUT_NAME] for d in labels]
    outputs = [model.reference({digits.INPUT_NAME: image})["output0"] for image in images]
    predicted = [int(np.argmax(o)) for o in outputs]
    if predicted != labels.tolist():
        print(f"error: samples misclassified: {predicted} for {labels.tolist()}", file=sys.stderr)
        return 1
    write_npz(out / "digits.samples.npz", {digits.INPUT_NAME: np.stack(images), "labels": labels})
    write_npz(out / "digits.reference.npz", {"output0": np.stack(outputs)})
    print(f"held-out accuracy {digits.accuracy(weights):.3f}; wrote to {out}:")
    for name in ("digits.tar", "digits.samples.npz", "digits.reference.npz"):
        print(f"  {name:22s} {(out / name).stat().st_size:7d} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
