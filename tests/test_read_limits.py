"""The reader's caps: one bad-input fixture per cap, refused before the member is inflated,
with the member, its size, the cap and the variable that raises it; deep JSON anywhere is
our one-line error, never a RecursionError."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
import time
from pathlib import Path

import pytest
from mlf_builders import mlf_files, write_dir, write_tar

from project_api.cli import main
from project_api.errors import ArchiveError, ArchiveLimitError, GraphError, MetadataError
from project_api.read import open_archive
from project_api.read.limits import ReadLimits, role_of
from project_api.serve.server import PARSE_ERROR, ProjectApiServer

FILES = mlf_files(7)
GRAPH = "executor-config/graph/default.graph"
PARAMS = "parameters/default.params"
SOURCE = "codegen/host/src/default_lib1.c"  # the largest source: the first over a cap


def refused(path: Path, scratch: Path, *fragments: str) -> ArchiveLimitError:
    with pytest.raises(ArchiveLimitError) as caught:
        open_archive(path)
    for fragment in fragments:
        assert fragment in str(caught.value)
    assert list(scratch.iterdir()) == []
    return caught.value


@pytest.mark.parametrize(
    "variable, member, role",
    [
        ("MLF_PROJECT_MAX_METADATA_BYTES", "metadata.json", "metadata"),
        ("MLF_PROJECT_MAX_GRAPH_BYTES", GRAPH, "graph"),
        ("MLF_PROJECT_MAX_PARAMS_BYTES", PARAMS, "params"),
        ("MLF_PROJECT_MAX_SOURCE_BYTES", SOURCE, "source"),
    ],
)
def test_each_role_has_its_cap(tmp_path, scratch, monkeypatch, variable, member, role):
    path = write_tar(tmp_path / "m.tar", FILES, gz=True)
    cap = len(FILES[member]) - 1
    monkeypatch.setenv(variable, str(cap))
    error = refused(path, scratch, repr(member), f"{len(FILES[member]):,} bytes", f"{cap:,}")
    assert f"cap for {role} members" in str(error) and variable in str(error)
    monkeypatch.setenv(variable, str(cap + 1))  # raised: the same archive is accepted
    with open_archive(path) as archive:
        assert archive.model().name == "default"


def test_member_count_cap(tmp_path, scratch, monkeypatch):
    files = dict(FILES)
    files.update({f"codegen/host/src/extra{i}.c": b"" for i in range(20)})
    path = write_tar(tmp_path / "many.tar", files)
    monkeypatch.setenv("MLF_PROJECT_MAX_MEMBERS", "20")
    refused(path, scratch, "more than 20 members", "MLF_PROJECT_MAX_MEMBERS")


def test_whole_archive_cap(tmp_path, scratch, monkeypatch):
    files = dict(FILES)
    files.update({f"codegen/host/src/big{i}.c": bytes(4000) for i in range(5)})
    path = write_tar(tmp_path / "big.tar", files, gz=True)
    monkeypatch.setenv("MLF_PROJECT_MAX_ARCHIVE_BYTES", "12k")
    refused(path, scratch, "takes the content past 12,288 bytes", "MLF_PROJECT_MAX_ARCHIVE_BYTES")


def test_gzip_bomb_is_refused_from_its_header(tmp_path, scratch):
    """2 GiB declared in a 2 MB file: refused in well under a second, nothing inflated."""
    info = tarfile.TarInfo("metadata.json")
    info.size = 2 << 30
    one_mib = gzip.compress(bytes(1 << 20), 9)
    path = tmp_path / "bomb.tar.gz"
    path.write_bytes(gzip.compress(info.tobuf(format=tarfile.GNU_FORMAT)) + one_mib * 2048)
    start = time.monotonic()
    refused(path, scratch, "'metadata.json' is 2,147,483,648 bytes", "1,048,576-byte cap")
    assert time.monotonic() - start < 10  # generous: the point is not reading 2 GiB


def test_pax_header_cap(tmp_path, scratch):
    info = tarfile.TarInfo("././@PaxHeader")
    info.type = tarfile.XHDTYPE
    info.size = 64 << 20
    path = tmp_path / "pax.tar.gz"
    path.write_bytes(gzip.compress(info.tobuf(format=tarfile.USTAR_FORMAT) + bytes(64 << 20)))
    refused(path, scratch, "tar header record of 67,108,864 bytes")


def test_directory_is_held_to_the_same_caps(tmp_path, monkeypatch):
    root = write_dir(tmp_path / "extracted", FILES)
    monkeypatch.setenv("MLF_PROJECT_MAX_PARAMS_BYTES", "10")
    with pytest.raises(ArchiveLimitError, match=f"'{PARAMS}' is"):
        open_archive(root)
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()) == sorted(
        FILES
    )


@pytest.mark.parametrize("raw, size", [("64M", 64 << 20), ("2k", 2048), ("1GiB", 1 << 30)])
def test_sizes_in_variables(raw, size):
    assert (
        ReadLimits.from_environment({"MLF_PROJECT_MAX_PARAMS_BYTES": raw}).max_params_bytes == size
    )


def test_a_bad_variable_is_one_clear_error(tmp_path, monkeypatch, capsys):
    path = write_tar(tmp_path / "m.tar", FILES)
    monkeypatch.setenv("MLF_PROJECT_MAX_GRAPH_BYTES", "lots")
    assert main(["info", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "MLF_PROJECT_MAX_GRAPH_BYTES='lots' is not a size" in err


def test_roles():
    assert role_of("metadata.json") == "metadata"
    assert role_of("runtime-config/graph/graph.json") == "graph"
    assert role_of(GRAPH) == "graph"
    assert role_of(PARAMS) == "params"
    assert role_of("src/default.relay") == "source"
    assert role_of("codegen/host/include/tvmgen_default.h") == "source"


# --- deep JSON ---------------------------------------------------------------------------


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def test_deep_metadata_is_a_json_error(tmp_path, capsys):
    path = write_tar(tmp_path / "deep.tar", {**FILES, "metadata.json": nested(200_000)})
    with pytest.raises(MetadataError, match="not valid JSON: nested too deeply"):
        open_archive(path)
    assert main(["info", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("mlf-project info: error: metadata.json: line 1 column ")


def test_deep_graph_is_a_json_error(tmp_path):
    path = write_tar(tmp_path / "deep.tar", {**FILES, GRAPH: b'{"nodes": ' + nested(50_000) + b"}"})
    with pytest.raises(GraphError, match=f"{GRAPH}: line 1 column .*: nested too deeply"):
        open_archive(path)


def test_deep_json_rpc_request_gets_a_parse_error():
    server = ProjectApiServer(io.BytesIO(), io.BytesIO(), handler=None)  # type: ignore[arg-type]
    reply = server.handle_line(b'{"jsonrpc": "2.0", "id": 1, "params": ' + nested(100_000) + b"}\n")
    assert reply["error"]["code"] == PARSE_ERROR
    assert "nested too deeply" in reply["error"]["message"]


def test_huge_tensor_in_graph_is_refused(tmp_path):
    def edit(graph):
        graph["attrs"]["shape"][1][0] = [1 << 31, 1 << 31]

    files = dict(FILES)
    data = json.loads(files[GRAPH])
    edit(data)
    files[GRAPH] = json.dumps(data).encode()
    with pytest.raises(GraphError, match="runtime's tables hold sizes in 32 bits"):
        open_archive(write_tar(tmp_path / "huge.tar", files))


def test_limit_errors_are_archive_errors():
    assert issubclass(ArchiveLimitError, ArchiveError)
