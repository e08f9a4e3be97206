"""The MLPerf Tiny benchmark protocol both ways: the mlperftiny firmware (real KWS archives,
graph and AOT, on the host) answering the host's client (project_api.transport.eembc), every
hostile input answered with an e-[...] line while the firmware keeps serving, and the client
against a scripted device (stale lines, errors, incomplete answers)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest
from mlperf_support import kws_archive, mlperftiny_project, reference, reference_values

from project_api.driver import Project
from project_api.errors import DeviceError, GenerateError, ProtocolError, UnsupportedModelError
from project_api.generate.project_types.mlperftiny import DEFAULT_PROFILE, benchmark_of
from project_api.report.mlperf import expected_results
from project_api.transport.eembc import EembcDevice, errors_in, parse_results

pytestmark = pytest.mark.slow


def loaded(device: EembcDevice, form: str) -> EembcDevice:
    device.load(reference(form)[0])
    return device


# --- the firmware -------------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["graph", "aot"])
def test_one_inference_equals_the_reference(form: str) -> None:
    project = mlperftiny_project(form)
    with project.benchmark() as device:
        assert device.name() == "mlf-project-api"
        assert device.profile() == (DEFAULT_PROFILE, "kws01")
        assert device.tick_hz == 1_000_000_000  # the mlf-ticks extension answered
        loaded(device, form)
        result = device.infer(1, 0)
        assert result.results == reference_values(form)
        assert result.elapsed_us is not None and result.elapsed_us > 0
        assert result.elapsed_ticks is not None and result.elapsed_ticks >= result.elapsed_us
        assert device.results() == reference_values(form)
        # The boot banner came first, as the EEMBC firmware prints it.
        received = [line[2:] for line in device.transcript if line.startswith("< ")]
        assert received[:3] == ["m-timestamp-mode-performance", "m-init-done", "m-ready"]
        # Input went in db commands of 31 bytes (62 hex digits), as the EEMBC runner sends.
        chunks = [
            line for line in device.transcript if line.startswith("> db ") and "load" not in line
        ]
        assert [len(c) - len("> db ") for c in chunks] == [62] * 15 + [(490 - 15 * 31) * 2]


def test_infer_runs_warmups_then_the_timed_inferences() -> None:
    with loaded(mlperftiny_project("graph").benchmark(), "graph") as device:
        lines = device.checked("infer 3", timeout=30)
        assert lines[:3] == ["m-warmup-start-10", "m-warmup-done", "m-infer-start-3"]
        laps = [int(m.group(1)) for m in map(re.compile(r"m-lap-us-(\d+)").match, lines) if m]
        assert len(laps) == 2 and laps[1] > laps[0]
        assert lines[-2:] == [
            "m-infer-done",
            f"m-results-[{','.join(map(str, reference_values('graph')))}]",
        ]
        assert device.checked("infer")[:3] == [
            "m-warmup-start-10",
            "m-warmup-done",
            "m-infer-start-1",
        ]
        assert device.timestamp() is not None


def test_db_print_shows_the_loaded_bytes() -> None:
    data = reference("graph")[0]
    with loaded(mlperftiny_project("graph").benchmark(), "graph") as device:
        lines = device.checked("db print")
        assert len(lines) == (len(data) + 7) // 8
        shown = bytes.fromhex("".join(line[len("m-buffer-") :].replace("-", "") for line in lines))
        assert shown == data


HOSTILE = [
    ("x" * 81, "Command too long"),
    ("x" * 5000, "Command too long"),
    ("bogus arguments", "Unknown command: bogus"),
    ("\x01\x7f\xff", "Unknown command: ???"),
    ("NAME", "Unknown command: NAME"),
    ("db", "db: needs load N"),
    ("db load", "db load: needs N, 1 or more"),
    ("db load 0", "db load: needs N, 1 or more"),
    ("db load -5", "db load: needs N, 1 or more"),
    ("db load 99999999999", "db load: needs N, 1 or more"),
    ("db load 12", "the model's input is 490 bytes, not 12"),
    ("db 0a", "db: no db load N before the data"),
    ("infer 1 0", "infer: input not loaded"),
    ("results", "results: no inference has run yet"),
    ("db print", "db print: nothing loaded"),
    ("infer 0", "infer: usage: infer N (W), N >= 1 runs, W >= 0 warm-ups"),
    ("infer x", "infer: usage"),
    ("infer 1 -1", "infer: usage"),
    ("infer 1 2 3", "infer: usage"),
    ("mlf-ticks maybe", "mlf-ticks: on or off"),
    ("a b c d e f g h i j", "Too many words"),
]


def test_hostile_commands_are_refused_and_the_firmware_keeps_serving() -> None:
    with mlperftiny_project("graph").benchmark() as device:
        for text, expected in HOSTILE:
            device.link.write_all((text + "%").encode("latin-1"))
            answer = device.answer()
            problems = errors_in(answer)
            assert len(problems) == 1 and expected in problems[0], (text, answer)
            assert not re.search(r"[\[\]]", problems[0])  # brackets never nest
            assert device.name() == "mlf-project-api"  # still serving
        # A fresh start after all of it: the reference result.
        assert loaded(device, "graph").infer(1, 0).results == reference_values("graph")


def test_bad_data_changes_nothing_already_loaded() -> None:
    data = reference("graph")[0]
    with mlperftiny_project("graph").benchmark() as device:
        device.checked(f"db load {len(data)}")
        device.checked("db " + data[:31].hex())
        for bad, expected in [
            ("db " + data[31:40].hex() + "zz", "bad hex digit 'z'"),
            ("db " + data[31:40].hex() + "1", "odd number of hex digits"),
        ]:
            problems = errors_in(device.command(bad))
            assert len(problems) == 1 and expected in problems[0]
        assert device.checked("db " + "00" * 38) == []  # 38 zeros (the most one command holds)
        # The bad commands stored nothing: the zeros follow the first 31 bytes.
        rest = data[69:]
        answers: List[str] = []
        for offset in range(0, len(rest), 31):
            answers += device.checked("db " + rest[offset : offset + 31].hex())
        assert answers == ["m-load-done"]
        problems = errors_in(device.command("db 00"))
        assert "1 bytes beyond the end: db load declared 490, 490 loaded" in problems[0]
        assert device.checked("db print")[4] == "m-buffer-" + "-".join(["00"] * 8)
        expected_input = data[:31] + bytes(38) + data[69:]
        got = device.infer(1, 0).results
        assert len(got) == 12  # an inference of what was loaded (not the reference input)
        assert (
            bytes.fromhex("".join(line[9:].replace("-", "") for line in device.checked("db print")))
            == expected_input
        )


def test_commands_sent_together_are_answered_in_order() -> None:
    with mlperftiny_project("graph").benchmark() as device:
        device.link.write_all(b"name%profile%bogus%%name%")
        answers = [device.answer() for _ in range(5)]
        assert answers[0] == ["m-name-dut-[mlf-project-api]"]
        assert answers[1] == [f"m-profile-[{DEFAULT_PROFILE}]", "m-model-[kws01]"]
        assert answers[2] == ["e-[Unknown command: bogus]"]
        assert answers[3] == []  # an empty command: just m-ready
        assert answers[4] == ["m-name-dut-[mlf-project-api]"]


def test_names_and_dequantized_results_from_options() -> None:
    scale, zero_point = 0.00390625, -128
    project = mlperftiny_project(
        "aot",
        mlperftiny_name="acme-dut",
        mlperftiny_model="kws01",
        mlperftiny_profile="my profile",
        output_scale=str(scale),
        output_zero_point=str(zero_point),
    )
    assert project.info["mlperftiny"]["output_scale"] == scale
    with loaded(project.benchmark(), "aot") as device:
        assert device.name() == "acme-dut"
        assert device.profile() == ("my profile", "kws01")
        got = device.infer(1, 0).results
    want = expected_results([reference("aot")[1]], scale, zero_point)
    assert got == want and all(isinstance(v, float) for v in got)
    assert want[9] == 0.5 and want[0] == 0.0
    # Dequantized results are floats: the firmware links float printing only then.
    runtime_build = Path("runtime", "mlf_runtime_build.cmake")
    assert "MLF_TEXT_FLOATS=0" not in (project.dir / runtime_build).read_text()
    plain = (mlperftiny_project("aot").dir / runtime_build).read_text()
    assert '"MLF_TEXT_FLOATS=0"' in plain


def test_energy_mode_without_a_timestamp_pin() -> None:
    project = mlperftiny_project("graph", mlperftiny_energy="true")
    with project.benchmark() as device:
        received = [line[2:] for line in device.transcript if line.startswith("< ")]
        assert received[0] == "m-timestamp-mode-energy"
        assert errors_in(device.command("timestamp")) == [
            "timestamp: this board has no timestamp pin"
        ]
        loaded(device, "graph")
        lines = device.command("infer 1 0")
        assert not any(line.startswith("m-lap-us-") for line in lines)  # pulses, not laps
        assert len(errors_in(lines)) == 2  # one per pulse the host cannot make
        assert lines[-1] == f"m-results-[{','.join(map(str, reference_values('graph')))}]"


def test_options_the_generator_refuses(tmp_path: Any) -> None:
    archive = kws_archive("graph")
    cases: List[Dict[str, Any]] = [
        {"project_type": "host_driven", "options": {"output_scale": "0.5"}},
        {"project_type": "mlperftiny", "options": {"mlperftiny_name": "a[b]"}},
        {"project_type": "mlperftiny", "options": {"mlperftiny_profile": "x" * 65}},
        {"project_type": "mlperftiny", "options": {"output_zero_point": "3"}},
        {"project_type": "mlperftiny", "options": {"output_scale": "-1"}},
        {"project_type": "mlperftiny", "options": {"output_scale": "nan"}},
    ]
    for number, case in enumerate(cases):
        with pytest.raises(GenerateError):
            Project.generate(archive, tmp_path / str(number), **case)
    multi = archive.parent / "multi_module.tar"
    if multi.is_file():
        with pytest.raises(UnsupportedModelError, match="one model"):
            Project.generate(multi, tmp_path / "m", project_type="mlperftiny", model="*")


def test_benchmark_names_from_model_names() -> None:
    assert benchmark_of("kws") == "kws01" and benchmark_of("vww_96_int8") == "vww01"
    assert benchmark_of("my-ResNet8") == "ic01" and benchmark_of("ad01") == "ad01"
    assert benchmark_of("mnist") is None and benchmark_of("adder") is None


# --- the client against a scripted device --------------------------------------------------------


class ScriptedPort:
    """A serial-like port whose device answers each command from ``replies`` (by its first
    word), after ``pending`` (what a device had written before we came)."""

    def __init__(self, replies: Dict[str, str], pending: str = "") -> None:
        self.replies = replies
        self.out = bytearray(pending.encode())
        self.timeout = 0.05
        self.write_timeout = 1.0
        self.line = b""

    @property
    def in_waiting(self) -> int:
        return len(self.out)

    def read(self, n: int) -> bytes:
        data = bytes(self.out[:n])
        del self.out[:n]
        return data

    def write(self, data: bytes) -> int:
        for byte in data:
            if byte == ord("%"):
                word = self.line.decode().split(" ")[0]
                self.out += (
                    self.replies.get(word, "e-[Unknown command: x]\r\n") + "m-ready\r\n"
                ).encode()
                self.line = b""
            else:
                self.line += bytes([byte])
        return len(data)

    def close(self) -> None:
        pass


def test_client_skips_what_was_pending_and_reads_answers() -> None:
    port = ScriptedPort(
        {
            "": "",
            "name": "m-name-dut-[dev]\r\n",
            "infer": "m-warmup-start-0\r\nm-warmup-done\r\nm-infer-start-1\r\nm-lap-us-10\r\n"
            "m-lap-us-35\r\nm-infer-done\r\nm-results-[1,-2,0.5,1e-05]\r\n",
        },
        pending="garbage\r\nm-ready\r\nm-name-dut-[stale?\r\nm-ready\r\n",
    )
    device = EembcDevice(port, timeout=1.0)
    assert device.connect() == "dev"
    result = device.infer(1, 0)
    assert result.results == [1, -2, 0.5, 1e-05] and result.elapsed_us == 25
    assert result.elapsed_ticks is None


class DeafAtFirstPort(ScriptedPort):
    """A console that drops the first ``deaf`` bytes written to it, as QEMU's STM32 USART
    drops what arrives before the firmware set UE and RE; it says m-ready when it wakes."""

    def __init__(self, replies: Dict[str, str], deaf: int) -> None:
        super().__init__(replies)
        self.deaf = deaf

    def write(self, data: bytes) -> int:
        dropped = min(self.deaf, len(data))
        self.deaf -= dropped
        if dropped and not self.deaf:
            self.out += b"m-init-done\r\nm-ready\r\n"
        return dropped + super().write(data[dropped:])


def test_client_asks_again_when_the_question_was_dropped() -> None:
    port = DeafAtFirstPort({"name": "m-name-dut-[dev]\r\n", "results": "m-results-[3]\r\n"}, 6)
    device = EembcDevice(port, timeout=5.0)
    assert device.connect() == "dev"
    assert device.transcript.count("> name") == 2
    assert device.results() == [3]  # the second question's answer did not linger


def test_client_raises_on_errors_and_incomplete_answers() -> None:
    port = ScriptedPort({"infer": "m-warmup-start-0\r\n", "results": "e-[results: none]\r\n"})
    device = EembcDevice(port, timeout=1.0)
    with pytest.raises(ProtocolError, match="incomplete"):
        device.infer(1, 0)
    with pytest.raises(DeviceError, match="results: none"):
        device.results()
    with pytest.raises(ValueError):
        device.send("x%")
    with pytest.raises(ProtocolError):
        parse_results("m-results-[1,two]")
    assert parse_results("m-results-[]") == []
    assert np.isnan(parse_results("m-results-[nan]")[0])


# --- the firmware's numbers, the Project API's options ---------------------------------------


def _text_number_program(tmp_path: Any, *flags: str) -> Any:
    from device_c import cbuild

    return cbuild.build(
        tmp_path,
        "text_number",
        [cbuild.DEVICE_C / "text_number_main.c", cbuild.FIRMWARE / "mlf_text.c"],
        flags=("-std=c11", "-O2", *flags),
    )


def _nine_digits(value: float) -> str:
    """The 9 significant digits of ``value`` rounded half up, as the firmware rounds them
    (Python's formatting rounds the exact value half to even; ties are all that differ)."""
    from decimal import ROUND_HALF_UP, Decimal

    exact = Decimal(value)
    digits = exact.scaleb(-exact.adjusted() + 8).to_integral_value(rounding=ROUND_HALF_UP)
    return str(int(digits)).rstrip("0") or "0"


def test_floats_print_so_that_they_read_back_exactly(tmp_path: Any) -> None:
    """mlf_text_number(): 9 significant digits, correctly rounded, always a float, every
    float32 exact — with integer arithmetic only."""
    import subprocess

    program = _text_number_program(tmp_path)
    rng = np.random.default_rng(1)
    with np.errstate(over="ignore", invalid="ignore"):
        values = np.concatenate(
            [
                np.array(
                    [0.0, -0.0, 1.0, -3.0, 0.5, 1e-05, 123456789.0, 1234567890.0, 0.1], np.float32
                ),
                np.array(
                    [np.finfo(np.float32).max, np.finfo(np.float32).tiny, 1.4e-45], np.float32
                ),
                rng.standard_normal(2000).astype(np.float32) * 10.0 ** rng.integers(-40, 38, 2000),
                rng.integers(0, 2**32, 2000, dtype=np.uint64).astype(np.uint32).view(np.float32),
            ]
        ).astype(np.float32)
    finite = values[np.isfinite(values)]
    done = subprocess.run([str(program)], input=finite.tobytes(), capture_output=True, check=True)
    lines = done.stdout.decode().split("\n")[:-1]
    assert len(lines) == finite.size
    for text, value in zip(lines, finite):
        assert re.fullmatch(r"-?\d+\.\d+|-?\d(\.\d+)?e[+-]\d\d+", text), text
        assert np.float32(float(text)) == value, (text, value)
        if value != 0:
            shown = text.lstrip("-").split("e")[0].replace(".", "").lstrip("0").rstrip("0")
            assert shown == _nine_digits(float(abs(value))), (text, value)
    assert lines[:6] == ["0.0", "-0.0", "1.0", "-3.0", "0.5", "9.99999975e-06"]
    assert lines[6:8] == ["123456792.0", "1.23456794e+09"]  # float32 values
    specials = np.array([np.inf, -np.inf, np.nan], np.float32).tobytes()
    done = subprocess.run([str(program)], input=specials, capture_output=True, check=True)
    assert done.stdout.decode().split() == ["inf", "-inf", "nan"]


def test_dequantized_numbers_round_as_float32_does(tmp_path: Any) -> None:
    """mlf_number_dequantized(): float32(q - zero_point) * scale, bit for bit as numpy's
    float32 arithmetic (subnormal results and overflow to inf included)."""
    import subprocess

    program = _text_number_program(tmp_path)
    rng = np.random.default_rng(2)
    n = 3000
    q = np.concatenate([rng.integers(-(2**31), 2**31, n - 6), [0, -128, 127, 2**31 - 1, 5, 1]])
    zero_point = np.concatenate(
        [rng.integers(-(2**31), 2**31, n - 6), [-128, -128, 3, -(2**31), 0, 0]]
    )
    scale = np.concatenate(
        [
            (rng.random(n - 6) * 10.0 ** rng.integers(-45, 30, n - 6)).astype(np.float32),
            np.array([0.00390625, 0.00390625, 1e-45, 3e38, 1e-40, 1.0], np.float32),
        ]
    ).astype(np.float32)
    records = np.zeros(n, dtype=[("q", "<i4"), ("zp", "<i4"), ("scale", "<f4")])
    records["q"], records["zp"], records["scale"] = q, zero_point, scale
    done = subprocess.run(
        [str(program), "dequantize"], input=records.tobytes(), capture_output=True, check=True
    )
    lines = done.stdout.decode().split("\n")[:-1]
    with np.errstate(over="ignore"):
        want = (q.astype(np.int64) - zero_point).astype(np.float32) * scale
    assert len(lines) == n
    for text, value in zip(lines, want):
        assert np.float32(float(text)) == value, (text, value)
    assert lines[-6:-4] == ["0.5", "0.0"] and lines[-1] == "1.0"


def test_without_floats_integers_still_print(tmp_path: Any) -> None:
    """MLF_TEXT_FLOATS=0 (integer outputs printed as such): integers as before, and a float
    element has no reading instead of a wrong one."""
    import subprocess

    program = _text_number_program(tmp_path, "-DMLF_TEXT_FLOATS=0")
    words = np.array([0, -128, 127, 2**31 - 1, -(2**31)], np.int32).tobytes()
    done = subprocess.run([str(program), "int32"], input=words, capture_output=True, check=True)
    assert done.stdout.decode().split() == ["0", "-128", "127", "2147483647", "-2147483648"]
    floats = np.array([1.0, 0.5], np.float32).tobytes()
    done = subprocess.run([str(program)], input=floats, capture_output=True, check=True)
    assert done.stdout.decode().split() == ["none", "none"]


def test_project_api_options_of_mlperftiny() -> None:
    from project_api.options import normalize_options
    from project_api.serve.options import coerce_options

    given = {"board": "host", "project_type": "mlperftiny", "output_scale": "0.25"}
    coerced = coerce_options("generate_project", given)
    assert coerced["project_type"] == "mlperftiny" and coerced["output_scale"] == "0.25"
    generator = {k: v for k, v in coerced.items() if k in ("output_scale", "mlperftiny_energy")}
    assert normalize_options(generator)["output_scale"] == 0.25
