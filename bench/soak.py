"""Part 10: long use. 10,000 JSON-RPC requests against one Project API server (valid and
malformed, mixed), 10,000 inferences in one host session and 1,000 on QEMU (every output
checked against the reference): RSS and open descriptors of this process and of the
server/firmware before and after, and no child left at the end. ``--smoke``: 200/200/20.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import numpy as np

from bench.common import Context, Part, PartResult, Skip, Target, corpus_dir, have

REQUESTS, HOST_RUNS, QEMU_RUNS = 10_000, 10_000, 1_000
SMOKE = (200, 200, 20)


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _snapshot(pids: Dict[str, int]) -> Dict[str, int]:
    out = {}
    for who, pid in pids.items():
        out[f"{who}_rss_kb"] = _rss_kb(pid)
        out[f"{who}_fds"] = _fds(pid)
    return out


def _children() -> List[int]:
    me = str(os.getpid())
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if stat.rsplit(")", 1)[1].split()[1] == me and stat.rsplit(")", 1)[1].split()[0] != "Z":
                found.append(int(entry.name))
    return found


def _row(name: str, count: int, correct: int, before: Dict[str, int], after: Dict[str, int],
         seconds: float) -> Dict[str, Any]:  # fmt: skip
    row: Dict[str, Any] = {"soak": name, "count": count, "correct": correct}
    row["seconds"] = round(seconds, 1)
    for key in before:
        row[f"{key}_before"], row[f"{key}_after"] = before[key], after[key]
    return row


_MALFORMED = [
    b"{not json\n",
    b'{"jsonrpc": "2.0", "id": 7, "method": "no_such_method", "params": {}}\n',
    b'{"jsonrpc": "2.0", "id": 8, "method": "server_info_query", "params": {"x": 1}}\n',
    b'{"jsonrpc": "2.0", "id": 9, "method": "build", "params": []}\n',
    b"[" * 5000 + b"]" * 5000 + b"\n",
    b'{"jsonrpc": "2.0", "id": 10, "method": "' + b"x" * 200_000 + b'", "params": {}}\n',
]


def soak_server(count: int) -> Dict[str, Any]:
    from project_api.resources import template_dir
    from project_api.serve.client import ProjectApiClient

    correct = 0
    with ProjectApiClient.launch(template_dir()) as client:
        assert client.process is not None
        pids = {"ours": os.getpid(), "server": client.process.pid}
        client.server_info_query()
        before = _snapshot(pids)
        start = time.perf_counter()
        for i in range(count):
            if i % 2 == 0:
                info = client.server_info_query()
                correct += int(info.get("protocol_version") == 1)
            else:
                reply = client.exchange(_MALFORMED[(i // 2) % len(_MALFORMED)])
                correct += int("error" in reply and "code" in reply["error"])
        seconds = time.perf_counter() - start
        after = _snapshot(pids)
    return _row("JSON-RPC requests", count, correct, before, after, seconds)


def soak_inferences(name: str, board: str, count: int, work: Path) -> Dict[str, Any]:
    from project_api.driver import Project

    archive = corpus_dir() / "mnist8.tar"
    if not archive.is_file():
        raise Skip(f"{archive} is not here")
    inputs = dict(np.load(corpus_dir() / "mnist8.inputs.npz"))
    expected = dict(np.load(corpus_dir() / "mnist8.outputs.npz"))
    project = Project.generate(archive, work / board, board=board)
    project.build()
    correct = 0
    with project.session(timeout=30.0) as session:
        runner_pid = _firmware_pid(session)
        pids = {"ours": os.getpid(), **({"firmware": runner_pid} if runner_pid else {})}
        session.run(inputs)
        before = _snapshot(pids)
        start = time.perf_counter()
        for _ in range(count):
            outputs = session.run(inputs)
            correct += int(all(np.array_equal(outputs[k], v) for k, v in expected.items()))
        seconds = time.perf_counter() - start
        after = _snapshot(pids)
    return _row(name, count, correct, before, after, seconds)


def _firmware_pid(session: Any) -> Optional[int]:
    runner = getattr(session, "runner", None) or getattr(session, "_runner", None)
    proc = getattr(runner, "process", None) or getattr(runner, "_proc", None)
    return getattr(proc, "pid", None)


def run(ctx: Context, result: PartResult) -> None:
    requests, host_runs, qemu_runs = SMOKE if ctx.smoke else (REQUESTS, HOST_RUNS, QEMU_RUNS)
    work = ctx.scratch("soak")
    steps: List[Callable[[], Dict[str, Any]]] = [
        lambda: soak_server(requests),
        lambda: soak_inferences("host inferences (mnist8)", "host", host_runs, work),
    ]
    if have("qemu-system-arm", "arm-none-eabi-gcc"):
        steps.append(
            lambda: soak_inferences("QEMU inferences (mnist8)", "qemu-mps2-an385", qemu_runs, work)
        )
    else:
        result.skipped.append("QEMU soak: needs qemu-system-arm and arm-none-eabi-gcc")
    for step in steps:
        row = step()
        ctx.log("  " + json.dumps(row))
        result.rows.append(row)
    result.summary = {
        "all_correct": all(r["correct"] == r["count"] for r in result.rows),
        "children_left": len(_children()),
        "max_fd_growth": max(
            r[k.replace("_before", "_after")] - r[k]
            for r in result.rows
            for k in r
            if k.endswith("fds_before")
        ),
        "max_rss_growth_kb": max(
            r[k.replace("_before", "_after")] - r[k]
            for r in result.rows
            for k in r
            if k.endswith("rss_kb_before")
        ),
    }
    result.summary["target_met"] = bool(
        result.summary["all_correct"]
        and result.summary["children_left"] == 0
        and result.summary["max_fd_growth"] <= 0
    )


PART = Part(
    "soak",
    "10. long use: JSON-RPC requests, host and QEMU inferences; RSS, fds, children",
    run,
    columns=[
        "soak",
        "count",
        "correct",
        "seconds",
        "ours_rss_kb_before",
        "ours_rss_kb_after",
        "ours_fds_before",
        "ours_fds_after",
        "server_fds_before",
        "server_fds_after",
        "server_rss_kb_before",
        "server_rss_kb_after",
        "firmware_fds_before",
        "firmware_fds_after",
        "firmware_rss_kb_before",
        "firmware_rss_kb_after",
    ],  # fmt: skip
    targets=[
        Target(
            "soak: every reply right, descriptors flat, no child left",
            lambda k: (
                f"all correct: {k['all_correct']}, fd growth {k['max_fd_growth']}, RSS "
                f"growth {k['max_rss_growth_kb']} kB, children left {k['children_left']}"
            ),
            "target_met",
        ),
    ],
    alone=True,
)
