"""mlf-project profile: the device's call records (PROFILE), operator calls made of them, the
figures against the whole inference, and the HTML report (rendered in headless Chromium)."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
from conftest import corpus_archive, have_tool, requires_arm

from project_api.board import load_board
from project_api.cli import main
from project_api.driver import Project
from project_api.errors import DeviceError, GenerateError, ProtocolError
from project_api.modelgen import catalog
from project_api.read.elf import ElfFile
from project_api.report.html import bar_chart, page
from project_api.report.profile import ProfileTarget, build_profile, operator_level, unit_of
from project_api.transport.messages import ProfileRecord, ProfileReply


def cli(capsys: pytest.CaptureFixture, *argv: object) -> Tuple[int, str, str]:
    status = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def record(depth: int, enter: int, exit_: int, function: int = 0x100, ws: int = 0) -> ProfileRecord:
    return ProfileRecord(function, enter, exit_, ws, depth)


# --- the wire -----------------------------------------------------------------------------------


def test_profile_reply_decodes() -> None:
    payload = struct.pack("<IIQII", 3, 1, 0x1234, 1, 2)
    payload += struct.pack("<QQQII", 0x2001, 10, 50, 64, 1)
    payload += struct.pack("<QQQII", 0x2101, 60, 70, 0, 2)
    reply = ProfileReply.decode(payload)
    assert (reply.count, reply.dropped, reply.anchor, reply.first) == (3, 1, 0x1234, 1)
    assert [r.ticks for r in reply.records] == [40, 10]
    assert reply.records[0].workspace_bytes == 64 and reply.records[1].depth == 2


@pytest.mark.parametrize(
    "payload, why",
    [
        (struct.pack("<IIQ", 1, 0, 0), "too short"),
        (struct.pack("<IIQII", 1, 0, 0, 0, 2) + bytes(64), "records 0..1 of 1"),
        (struct.pack("<IIQII", 1, 0, 0, 0, 1) + bytes(33), "too many"),
    ],
)
def test_profile_reply_refuses_bad_payloads(payload: bytes, why: str) -> None:
    with pytest.raises(ProtocolError, match=why):
        ProfileReply.decode(payload)


# --- operator calls -------------------------------------------------------------------------------


def test_graph_operator_calls_are_the_outermost() -> None:
    named = [("op_a", record(1, 0, 10)), ("helper", record(2, 2, 5)), ("op_b", record(1, 12, 20))]
    assert [name for name, _ in operator_level(named)] == ["op_a", "op_b"]


def test_aot_operator_calls_are_what_main_calls() -> None:
    named = [
        ("tvmgen_m_run", record(1, 0, 100)),
        ("tvmgen_m___tvm_main__", record(2, 1, 99)),
        ("tvmgen_m_fused_a", record(3, 2, 40)),
        ("inner", record(4, 3, 4)),
        ("tvmgen_m_fused_b", record(3, 41, 98)),
    ]
    calls = operator_level(named)
    assert [name for name, _ in calls] == ["tvmgen_m_fused_a", "tvmgen_m_fused_b"]


def test_units_follow_the_board() -> None:
    an385 = load_board("qemu-mps2-an385")
    assert unit_of(an385, 25_000_000, 40.0) == ("instructions", 1 / 40.0)
    assert unit_of(load_board("host"), 10**9, None) == ("us", 1000.0)
    nucleo = load_board("nucleo-l4r5zi")
    unit, per = unit_of(nucleo, nucleo.timer.clock_hz, None)  # SysTick counts CPU cycles
    assert unit == "cycles" and per == pytest.approx(1.0)


# --- the HTML page --------------------------------------------------------------------------------


def test_bar_chart_escapes_names_and_scales() -> None:
    svg = bar_chart([("a<b>", 10.0, "10"), ("c", 5.0, "5")])
    assert "a&lt;b&gt;" in svg and svg.count("<rect") == 2
    widths = [float(w) for w in __import__("re").findall(r'<rect [^>]*width="([\d.]+)"', svg)]
    assert widths[0] == pytest.approx(2 * widths[1])


# --- on a device ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cnn_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return catalog()["cnn_int8"]().write(tmp_path_factory.mktemp("profile") / "cnn_int8.tar")


def test_profile_on_host(cnn_archive: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    html = tmp_path / "report.html"
    status, out, err = cli(
        capsys, "profile", cnn_archive, "--board", "host", "--json", "--repeat", "3",
        "--html", html, "--project-dir", tmp_path / "p",
    )  # fmt: skip
    assert status == 0, err
    document: Dict[str, Any] = json.loads(out)
    calls: List[Dict[str, Any]] = document["calls"]
    assert document["unit"] == "us" and document["runs"] == 3
    assert [c["function"].rsplit("_fused_", 1)[1].split("_")[:2] for c in calls] == [
        ["nn", "conv2d"], ["nn", "max"], ["nn", "conv2d"], ["nn", "dense"],
    ]  # fmt: skip
    assert all(c["input_bytes"] > 0 and c["output_bytes"] > 0 for c in calls)
    assert calls[0]["workspace_bytes"] > 0  # the first convolution takes workspace
    # ... from its window of the arena, which holds it: each call within its own window.
    assert all(0 <= c["workspace_bytes"] <= c["window_bytes"] for c in calls)
    # Sized from its code: the least whole 64-byte blocks that hold what it takes.
    assert calls[0]["window_bytes"] - 64 < calls[0]["workspace_bytes"] <= calls[0]["window_bytes"]
    assert 0 < document["calls_total"] <= document["whole"]
    assert html.read_text().count("<svg") == 3  # the bars, RAM and flash


def test_profiling_off_leaves_the_firmware_as_it_was(cnn_archive: Path, tmp_path: Path) -> None:
    """Without the option nothing of the profiler is compiled or linked, and the device says
    so when asked for a profile."""
    project = Project.generate(cnn_archive, tmp_path / "off", board="host")
    assert "finstrument" not in (project.dir / "CMakeLists.txt").read_text()
    assert not (project.dir / "runtime" / "firmware" / "mlf_profile.c").exists()
    project.build()
    symbols = ElfFile(project.firmware.read_bytes()).symbol_names()
    # (a static C library brings glibc's own _dl_profile* and __profile_frequency)
    assert not [s for s in symbols if s.startswith(("mlf_profile", "__cyg_profile"))]
    with project.session() as session:
        session.run({"input": catalog()["cnn_int8"]().sample_inputs()["input"]})
        with pytest.raises(DeviceError, match="records no profile") as caught:
            session.profile()
    assert "profile=true" in str(caught.value.hint)


def test_profile_needs_host_driven(cnn_archive: Path, tmp_path: Path) -> None:
    with pytest.raises(GenerateError, match="needs a host_driven project"):
        Project.generate(
            cnn_archive, tmp_path / "s", project_type="standalone", options={"profile": True}
        )


@pytest.mark.slow
@requires_arm
@pytest.mark.parametrize(
    "stem, board",
    [
        ("kws_int8", "qemu-mps2-an385"),
        ("kws_int8_aot_usmp", "qemu-mps2-an385"),
        ("kws_int8", "qemu-mps3-an547"),
    ],
)
def test_kws_on_qemu(stem: str, board: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """KWS (graph and AOT) on Cortex-M3 (and graph on the M55) under -icount: its 14 operator
    calls, in instructions to one tick of the board's timer (40 on the an385, 31.25 on the
    an547's SysTick), sum to the whole inference within a measured overhead."""
    archive = corpus_archive(stem)
    if archive is None:
        pytest.skip(f"{stem}.tar is not in the corpus (MLF_PROJECT_CORPUS or ../shared/mlf)")
    status, out, err = cli(capsys, "profile", archive, "--board", board, "--icount", "--json")
    assert status == 0, err
    document = json.loads(out)
    assert document["unit"] == "instructions" and len(document["calls"]) == 14
    per_tick = load_board(board).instructions_per_tick()
    ticks = [c["value"] / per_tick for c in document["calls"]]
    assert all(t > 0 and abs(t - round(t)) < 1e-6 for t in ticks)
    assert f"one tick of the board's timer is {per_tick:g} instructions" in document["notes"][0]
    assert 0 < document["overhead"] < 0.001 * document["whole"]
    convolutions = [c for c in document["calls"] if "conv2d" in c["function"]]
    assert len(convolutions) == 9 and sum(c["share"] for c in convolutions) > 0.99


def test_build_profile_takes_medians(monkeypatch: pytest.MonkeyPatch) -> None:
    """Per-call and whole figures are medians over runs; addresses are relocated by the
    anchor (a position-independent host build loads at another address each run)."""
    import project_api.report.profile as profile_mod

    names = {0x10: "op_a", 0x20: "op_b", 0x1000: "mlf_profile_start"}
    monkeypatch.setattr(profile_mod, "symbol_table", lambda firmware: (names, 0x1000))
    runs = [
        ([record(1, 0, 10, 0x10), record(1, 10, 30, 0x20, ws=8)], 0, 0x1000, 40),
        ([record(1, 0, 12, 0x5010), record(1, 12, 30, 0x5020)], 0, 0x6000, 44),
        ([record(1, 0, 11, 0x10), record(1, 11, 30, 0x20)], 2, 0x1000, 42),
    ]
    sizes = [("a", 4, 8, 0), ("b", 8, 2, 64)]  # op_b has a 64-byte workspace window
    target = ProfileTarget("m", load_board("host"), "graph", Path("fw"), sizes)
    profile = build_profile(target, runs, 10**6, None)
    assert [(c.function, c.ticks, c.workspace_bytes) for c in profile.calls] == [
        ("op_a", 11, 0), ("op_b", 19, 8),
    ]  # fmt: skip
    assert profile.whole_ticks == 42 and profile.whole == pytest.approx(42.0)
    assert profile.overhead == pytest.approx(12.0) and profile.dropped == 2
    assert profile.calls[1].input_bytes == 8 and profile.calls[1].output_bytes == 2
    assert [c.window_bytes for c in profile.calls] == [0, 64]
    assert "not recorded" in profile.text() and "window" in profile.text().splitlines()[1]


# --- rendered ----------------------------------------------------------------------------------

CHROMIUM = next((c for c in ("chromium", "chromium-browser") if have_tool(c)), None)


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    from project_api.report.profile import OperatorCall, Profile

    calls = [
        OperatorCall(i, f"tvmgen_m_fused_op_{i}", 40 * v, float(v), v / 60, 64 * i, 16, 16)
        for i, v in enumerate((10, 30, 15))
    ]
    profile = Profile("m", "qemu-mps2-an385", "graph", "instructions", calls, 2400, 25_000_000,
                      1 / 40.0)  # fmt: skip
    html = tmp_path / "report.html"
    html.write_text(page("Profile of m", metadata={"board": "qemu-mps2-an385"}, profile=profile))
    assert CHROMIUM is not None
    base = [shutil.which(CHROMIUM) or CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
            "--no-first-run", f"--user-data-dir={tmp_path / 'chrome'}"]  # fmt: skip
    dom = subprocess.run(
        [*base, "--dump-dom", html.as_uri()], capture_output=True, text=True, timeout=120
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count("<rect") == 3 and "tvmgen_m_fused_op_1" in dom.stdout
    shot = tmp_path / "report.png"
    done = subprocess.run(
        [*base, f"--screenshot={shot}", "--window-size=1200,800", html.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


@pytest.mark.parametrize("flag", [["--output", "o.npz"], ["--project-type", "standalone"]])
def test_profile_offers_no_flag_it_would_ignore(
    flag: List[str], capsys: pytest.CaptureFixture
) -> None:
    """profile writes no outputs and runs host_driven firmware only: it does not take the
    run flags that say otherwise."""
    with pytest.raises(SystemExit) as exited:
        main(["profile", "model.tar", *flag])
    assert exited.value.code == 2
    assert flag[0] in capsys.readouterr().err
