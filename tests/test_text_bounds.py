"""Every regular expression that reads untrusted text, and the readers built on them, finish
within 2 s on pathological text (issue 41, part 6; the cases: tests/text_bounds.py). The
control: the comment stripper CMSIS-NN's reader used before (17 s for 260 KB) does not
finish within the bound on one of these inputs."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest
import text_bounds
from text_bounds import SECONDS, Case, cases
from text_patterns import FEWER_BRACES, MODES, NEAR_MISS

CASES = cases()


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_finishes_within_bound(case: Case) -> None:
    text = case.make()
    started = time.process_time()  # this process's CPU: what the case costs, whatever else runs
    case.apply(text)
    seconds = time.process_time() - started
    assert seconds <= SECONDS, f"{case.name}: {seconds:.2f} s"


def test_tables_name_existing_patterns() -> None:
    """A pattern renamed or removed leaves no stale row behind."""
    known = set(text_bounds.patterns())
    for table in (NEAR_MISS, MODES, FEWER_BRACES):
        assert set(table) <= known, sorted(set(table) - known)
    assert set(text_bounds.READER_TARGETS) == set(text_bounds.READER_INPUTS)


def test_control_the_old_stripper_does_not_finish() -> None:
    """The pattern ``cmsis_nn.sources._strip`` used, on 1 MiB of ``// /*`` lines, killed
    once the bound has passed: the bound is one that a quadratic pattern fails."""
    old = r"/\*.*?\*/"
    program = (
        "import re; text = '// /*\\n' * ((1 << 20) // 6); "
        f"re.sub({old!r}, ' ', text, flags=re.S); print('finished')"
    )
    finished = True
    try:  # subprocess.run kills the child when the time is out
        subprocess.run([sys.executable, "-c", program], capture_output=True, timeout=SECONDS)
    except subprocess.TimeoutExpired:
        finished = False
    assert not finished, f"the old pattern finished within {SECONDS} s"


def test_linear_stripper_keeps_what_c_keeps() -> None:
    from project_api.read.ctext import strip_comments

    text = "a/* x */b // c /* d\ne /* f\n// g */ h\n/* open"
    assert strip_comments(text, line_comments=True) == "a b  \ne   h\n "
    assert strip_comments(text) == "a b // c   h\n "
    assert re.sub(r"\s+", " ", strip_comments("int/**/x;")) == "int x;"
