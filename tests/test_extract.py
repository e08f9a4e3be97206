"""Hostile tarballs: every unsafe member is refused and nothing is left on disk; and the same
rules for an already-extracted directory."""

from __future__ import annotations

import io
import os
import tarfile

import pytest
from mlf_builders import member, mlf_files, write_dir, write_raw_tar, write_tar

from project_api.cli import main
from project_api.errors import UnsafeArchiveError
from project_api.read import ExtractLimits, open_archive
from project_api.read.extract import normalise_name

METADATA = mlf_files(7)["metadata.json"]


def refused(tmp_path, scratch, entries, fragment, data=None, limits=None):
    path = write_raw_tar(tmp_path / "evil.tar", entries, data)
    target = tmp_path / "out"
    with pytest.raises(UnsafeArchiveError, match=fragment):
        open_archive(path, limits=limits)
    with pytest.raises(UnsafeArchiveError, match=fragment):
        open_archive(path, extract_to=target, limits=limits)
    assert list(scratch.iterdir()) == []
    assert not target.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evil.tar", "tmp"]


@pytest.mark.parametrize(
    "name, normal",
    [("./a/b", "a/b"), ("a//b/", "a/b"), (".", ""), ("./", ""), ("./x/./y", "x/y")],
)
def test_normalise_name(name, normal):
    assert normalise_name(name) == normal


@pytest.mark.parametrize("name", ["/etc/passwd", "C:/x", "a\\..\\..\\x"])
def test_absolute_or_foreign_paths(tmp_path, scratch, name):
    refused(tmp_path, scratch, [member(name)], "absolute or non-POSIX path", {name: b"x"})


@pytest.mark.parametrize("name", ["a" * 256, "./d/" + "é" * 128 + ".c"])
def test_name_component_too_long(tmp_path, scratch, name):
    fragment = "member name component longer than 255 bytes"
    refused(tmp_path, scratch, [member(name)], fragment, {name: b"x"})


def test_name_too_long(tmp_path, scratch):
    name = "/".join(["d" * 200] * 6)
    refused(tmp_path, scratch, [member(name)], "member name longer than 1024 bytes", {name: b"x"})


@pytest.mark.parametrize("name", ["../x", "./../x", "a/../../x", "a/.."])
def test_dot_dot(tmp_path, scratch, name):
    refused(tmp_path, scratch, [member(name)], "contains '..'", {name: b"x"})


def test_symlink_to_absolute_path(tmp_path, scratch):
    entries = [member("metadata.json", tarfile.SYMTYPE, "/etc/passwd")]
    refused(tmp_path, scratch, entries, "points to absolute path")


def test_symlink_escaping(tmp_path, scratch):
    entries = [member("a/metadata.json", tarfile.SYMTYPE, "../../../etc/passwd")]
    refused(tmp_path, scratch, entries, "leaves the archive")


def test_hardlink_escaping(tmp_path, scratch):
    entries = [member("metadata.json", tarfile.LNKTYPE, "../outside")]
    refused(tmp_path, scratch, entries, "leaves the archive")


def test_link_to_missing_member(tmp_path, scratch):
    entries = [member("metadata.json", tarfile.SYMTYPE, "nothing.json")]
    refused(tmp_path, scratch, entries, "target not in archive")


def test_link_to_directory(tmp_path, scratch):
    entries = [member("d", tarfile.DIRTYPE), member("metadata.json", tarfile.SYMTYPE, "d")]
    refused(tmp_path, scratch, entries, "points to a directory")


def test_symlink_loop(tmp_path, scratch):
    entries = [member("a", tarfile.SYMTYPE, "b"), member("b", tarfile.SYMTYPE, "a")]
    refused(tmp_path, scratch, entries, "too many hops")


@pytest.mark.parametrize("kind", [tarfile.CHRTYPE, tarfile.BLKTYPE, tarfile.FIFOTYPE])
def test_special_files(tmp_path, scratch, kind):
    refused(tmp_path, scratch, [member("dev", kind)], "device, fifo or other special file")


def test_member_count_cap(tmp_path, scratch):
    entries = [member(f"f{i}") for i in range(11)]
    data = {f"f{i}": b"x" for i in range(11)}
    refused(tmp_path, scratch, entries, "more than 10 members", data, ExtractLimits(max_members=10))


def test_total_size_cap(tmp_path, scratch):
    entries = [member("a"), member("b")]
    data = {"a": b"x" * 600, "b": b"y" * 600}
    limits = ExtractLimits(max_total_bytes=1000)
    refused(tmp_path, scratch, entries, "'b' takes the content past 1,000 bytes", data, limits)


def test_duplicate_member(tmp_path, scratch):
    entries = [member("metadata.json"), member("./metadata.json")]
    data = {"metadata.json": METADATA, "./metadata.json": b"{}"}
    refused(tmp_path, scratch, entries, "appears twice", data)


def test_member_under_a_file(tmp_path, scratch):
    entries = [member("a"), member("a/b")]
    refused(tmp_path, scratch, entries, "lies under non-directory 'a'", {"a": b"1", "a/b": b"2"})


def test_root_replaced_by_file(tmp_path, scratch):
    refused(tmp_path, scratch, [member(".")], "replaces the root", {".": b"x"})


def test_rejection_after_good_members_still_leaves_nothing(tmp_path, scratch):
    entries = [member("metadata.json"), member("ok.txt"), member("../bad")]
    data = {"metadata.json": METADATA, "ok.txt": b"fine", "../bad": b"x"}
    refused(tmp_path, scratch, entries, "contains '..'", data)


def test_links_inside_become_plain_copies(tmp_path, scratch):
    files = mlf_files(7)
    path = tmp_path / "linked.tar"
    write_tar(path, files)
    with tarfile.open(path, "a") as tar:
        tar.addfile(member("./codegen/host/src/alias.c", tarfile.SYMTYPE, "default_lib0.c"))
        tar.addfile(member("./hard.json", tarfile.LNKTYPE, "./metadata.json"))
    with open_archive(path) as archive:
        alias = archive.root / "codegen/host/src/alias.c"
        hard = archive.root / "hard.json"
        assert (
            not alias.is_symlink()
            and alias.read_bytes() == files["codegen/host/src/default_lib0.c"]
        )
        assert hard.read_bytes() == files["metadata.json"]
        assert hard.stat().st_nlink == 1
    assert list(scratch.iterdir()) == []


def test_archive_modes_are_not_copied(tmp_path, scratch):
    path = tmp_path / "modes.tar"
    write_tar(path, mlf_files(7))
    with tarfile.open(path, "a") as tar:
        info = member("./setuid.sh")
        info.mode = 0o4777
        info.size = 3
        tar.addfile(info, io.BytesIO(b"#!\n"))
    umask = os.umask(0)
    os.umask(umask)
    with open_archive(path) as archive:
        assert (archive.root / "setuid.sh").stat().st_mode & 0o7777 == 0o755 & ~umask
        assert (archive.root / "metadata.json").stat().st_mode & 0o7777 == 0o644 & ~umask


def test_directory_listed_twice_is_fine(tmp_path, scratch):
    path = tmp_path / "twice.tar"
    write_tar(path, mlf_files(7))
    with tarfile.open(path, "a") as tar:
        tar.addfile(member("codegen", tarfile.DIRTYPE))
    with open_archive(path) as archive:
        assert archive.model().name == "default"


# --- an extracted directory ------------------------------------------------------------------


def extracted(tmp_path):
    return write_dir(tmp_path / "extracted", mlf_files(7))


@pytest.mark.parametrize(
    "target", ["/etc/passwd", "../../../../outside.c", "../../../../extracted2"]
)
def test_directory_symlink_out_of_it(tmp_path, target):
    root = extracted(tmp_path)
    (tmp_path / "outside.c").write_text("int stolen;\n")
    (tmp_path / "extracted2").mkdir()
    os.symlink(target, root / "codegen/host/src/default_lib9.c")
    with pytest.raises(UnsafeArchiveError, match="link 'codegen/host/src/default_lib9.c' -> "):
        open_archive(root)
    assert main(["info", str(root)]) == 2


def test_directory_symlink_to_a_directory_out_of_it(tmp_path):
    root = extracted(tmp_path)
    os.symlink("/usr/include", root / "codegen/host/include")
    with pytest.raises(UnsafeArchiveError, match="'codegen/host/include' -> .* leaves the archive"):
        open_archive(root)


def test_directory_symlinks_inside_it_are_followed(tmp_path):
    root = extracted(tmp_path)
    os.symlink("default_lib0.c", root / "codegen/host/src/alias.c")
    os.symlink(str(root / "metadata.json"), root / "absolute_but_inside.json")
    with open_archive(root) as archive:
        assert "alias.c" in [path.name for path in archive.model().sources]


def test_directory_symlink_loop(tmp_path):
    root = extracted(tmp_path)
    os.symlink("b", root / "a")
    os.symlink("a", root / "b")
    with pytest.raises(UnsafeArchiveError, match="link 'a': too many hops"):
        open_archive(root)


def test_directory_fifo(tmp_path):
    root = extracted(tmp_path)
    os.mkfifo(root / "codegen/host/src/default_lib9.c")
    with pytest.raises(UnsafeArchiveError, match="device, fifo or other special file"):
        open_archive(root)
