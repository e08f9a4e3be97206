"""End to end through JSON-RPC, as TVM's client would drive us: from the template directory
server_info_query -> generate_project, then through the generated project's own server
build -> flash -> open_transport -> device-protocol frames over write/read_transport ->
close_transport, on the ``host`` board, with outputs equal to TVM's reference."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Dict

import numpy as np
import pytest
from conftest import corpus_case

from project_api.resources import template_dir
from project_api.serve.client import ProjectApiClient
from project_api.serve.options import project_options


def _driver_missing_reason() -> str:
    """Why the real pipeline can't run yet ("" when it can)."""
    try:
        from project_api.transport.session import Session  # noqa: F401
    except ImportError as err:
        return f"project_api.transport.session is not available yet ({err})"
    from project_api.driver import Project

    with tempfile.TemporaryDirectory() as scratch:
        try:
            Project.generate(Path(scratch) / "absent.tar", Path(scratch) / "p")
        except NotImplementedError:
            return (
                "project_api.driver.Project.generate raises NotImplementedError (the driver of "
                "issue 5 has not landed); the JSON-RPC layer itself is covered with a stand-in "
                "driver by test_serve_handler.py and test_serve_launch.py"
            )
        except Exception:  # noqa: BLE001 - any real failure on a missing archive means it exists
            pass
    return ""


_MISSING = _driver_missing_reason()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(bool(_MISSING), reason=_MISSING)]


def tvmc_options(**chosen: str) -> Dict[str, Any]:
    """What tvmc sends: every advertised option, every value a string."""
    options: Dict[str, Any] = {}
    for option in project_options():
        if option.default is None:
            options[option.name] = ""
        elif isinstance(option.default, bool):
            options[option.name] = str(option.default).lower()
        else:
            options[option.name] = str(option.default)
    options.update(chosen)
    return options


def assert_matches_reference(outputs: Dict[str, np.ndarray], reference: Any) -> None:
    assert sorted(outputs) == sorted(reference.files)
    for key in reference.files:
        want = reference[key]
        got = outputs[key]
        assert got.shape == want.shape, key
        assert got.dtype == want.dtype, key
        if np.issubdtype(want.dtype, np.floating):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=key)
        else:
            np.testing.assert_array_equal(got, want, err_msg=key)


# A graph archive, and AOT ones (interface c): shapes from the Relay result type (mnist), or
# followed back from the result expression where TVM wrote none (KWS, from TFLite).
ARCHIVES = ["mlp_default.tar", "aot/mnist8_aot.tar", "aot/kws_int8_aot_usmp.tar"]


@pytest.mark.parametrize("member", ARCHIVES)
def test_template_to_outputs_on_host(tmp_path: Path, mlf_corpus: Path, member: str) -> None:
    from project_api.transport.session import Session

    case = corpus_case(mlf_corpus / member)
    archive = Path(str(case["archive"]))
    project_dir = tmp_path / "generated"
    # Through the Project API, host_driven means TVM's microTVM RPC unless the caller says:
    # this test drives the firmware with our own device protocol, so it says so.
    options = tvmc_options(
        board="host", project_type="host_driven", verbose="false", device_protocol="mlf"
    )

    with ProjectApiClient.launch(template_dir()) as template:
        info = template.server_info_query("0.14.0")
        assert info["is_template"] is True
        template.generate_project(
            archive, project_dir, options, standalone_crt_dir="/nonexistent/standalone_crt"
        )
    assert (project_dir / "model.tar").is_file()
    assert (project_dir / "microtvm_api_server.py").is_file()

    inputs = dict(np.load(str(case["inputs_npz"])))
    reference = np.load(str(case["outputs_npz"]))
    with ProjectApiClient.launch(project_dir) as project:
        info = project.server_info_query("0.14.0")
        assert info["is_template"] is False
        assert info["model_library_format_path"] == str(project_dir.resolve() / "model.tar")
        project.build(options)
        project.flash(options)
        for _ in range(2):  # a second open after close must work too
            timeouts = project.open_transport(options)
            assert set(timeouts) == {
                "session_start_retry_timeout_sec",
                "session_start_timeout_sec",
                "session_established_timeout_sec",
            }
            with Session(project.link(), timeout=30) as session:
                outputs = session.run(inputs)
            assert_matches_reference(outputs, reference)
            project.close_transport()  # already closed by the session: a no-op
    assert project.process is not None and project.process.returncode == 0
