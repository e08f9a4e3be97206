"""How much of an untrusted archive the reader will take, member by member.

Every member has a role (metadata, graph, params, source) chosen by its path, and each role
has a cap on its size; the whole archive has caps on its member count and total content.
Caps are checked against the tar headers before a byte of a member is inflated, and against
file sizes for an extracted directory, so a gzip bomb is refused after reading its headers
only. A legitimate giant raises a cap with ``MLF_PROJECT_MAX_<ROLE>_BYTES`` (or
``MLF_PROJECT_MAX_MEMBERS``), which every refusal names.
"""

from __future__ import annotations

import os
import tarfile
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Dict, Mapping, Optional

from ..errors import ArchiveLimitError
from .extract import ExtractLimits, check_directory_entry

KIB = 1 << 10
MIB = 1 << 20

# Roles in the order a member's path is tested; the first prefix that matches wins.
_ROLE_PREFIXES = (
    ("metadata", ("metadata.json",)),
    ("graph", ("executor-config/", "runtime-config/")),
    ("params", ("parameters/",)),
)
ROLES = ("metadata", "graph", "params", "source")
# tar's own long-name and pax records, which tarfile reads whole into memory.
_HEADER_RECORD_CAP = 1 * MIB
_HEADER_RECORD_TYPES = (
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
)


@dataclass(frozen=True)
class ReadLimits(ExtractLimits):
    """Caps of the MLF reader. Defaults are far above any archive TVM wrote for a
    microcontroller and low enough that reading stays within seconds and a few hundred MB."""

    max_members: int = 10_000
    max_total_bytes: int = 64 * MIB
    max_metadata_bytes: int = 1 * MIB
    max_graph_bytes: int = 4 * MIB
    max_params_bytes: int = 32 * MIB
    max_source_bytes: int = 16 * MIB

    @classmethod
    def from_environment(cls, environ: Optional[Mapping[str, str]] = None) -> ReadLimits:
        """The defaults, each overridden by its ``MLF_PROJECT_MAX_*`` variable when set."""
        environ = os.environ if environ is None else environ
        values: Dict[str, int] = {}
        for field in fields(cls):
            variable = env_variable(field.name)
            raw = environ.get(variable)
            if raw is None or not raw.strip():
                continue
            try:
                values[field.name] = _parse_size(raw)
            except ValueError:
                raise ArchiveLimitError(
                    f"{variable}={raw!r} is not a size",
                    hint="give a byte count such as 67108864, 64M or 1G",
                ) from None
        return cls(**values)

    @classmethod
    def adopt(cls, limits: Optional[ExtractLimits]) -> ReadLimits:
        """``limits`` as ReadLimits: plain ExtractLimits keep their two caps and take the
        role caps from the environment."""
        if isinstance(limits, ReadLimits):
            return limits
        base = cls.from_environment()
        if limits is None:
            return base
        return cls(
            **{f.name: getattr(base, f.name) for f in fields(cls)}
            | {"max_members": limits.max_members, "max_total_bytes": limits.max_total_bytes}
        )

    def cap_for(self, role: str) -> int:
        return int(getattr(self, f"max_{role}_bytes"))

    def check_member(self, name: str, size: int) -> None:
        role = role_of(name)
        cap = self.cap_for(role)
        if size > cap:
            raise ArchiveLimitError(
                f"member {name!r} is {size:,} bytes, over the {cap:,}-byte cap for {role} members",
                hint=_raise_hint(f"max_{role}_bytes"),
            )

    def too_many_members(self) -> ArchiveLimitError:
        return ArchiveLimitError(
            f"more than {self.max_members:,} members", hint=_raise_hint("max_members")
        )

    def too_much_content(self, name: str) -> ArchiveLimitError:
        return ArchiveLimitError(
            f"member {name!r} takes the content past {self.max_total_bytes:,} bytes",
            hint=_raise_hint("max_total_bytes"),
        )


def env_variable(field_name: str) -> str:
    """``max_params_bytes`` → ``MLF_PROJECT_MAX_PARAMS_BYTES``; the total is ARCHIVE_BYTES."""
    name = "max_archive_bytes" if field_name == "max_total_bytes" else field_name
    return "MLF_PROJECT_" + name.upper()


def _parse_size(raw: str) -> int:
    text = raw.strip().upper().removesuffix("B").removesuffix("I")
    scale = {"K": KIB, "M": MIB, "G": 1 << 30}.get(text[-1:], 1)
    if scale != 1:
        text = text[:-1]
    value = int(text) * scale
    if value <= 0:
        raise ValueError(raw)
    return value


def role_of(member: str) -> str:
    """The role of an archive member, by its normalised path."""
    for role, prefixes in _ROLE_PREFIXES:
        if any(member == p or (p.endswith("/") and member.startswith(p)) for p in prefixes):
            return role
    return "source"


def _raise_hint(field_name: str) -> str:
    return f"for a legitimate archive this large, set {env_variable(field_name)}"


class CappedTarInfo(tarfile.TarInfo):
    """Refuses a long-name or pax record larger than 1 MiB before tarfile reads it whole."""

    def _proc_member(self, tar: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type in _HEADER_RECORD_TYPES and self.size > _HEADER_RECORD_CAP:
            raise ArchiveLimitError(
                f"a tar header record of {self.size:,} bytes (long name or pax attributes; "
                f"the cap is {_HEADER_RECORD_CAP:,})"
            )
        return super()._proc_member(tar)  # type: ignore[misc]


def check_directory(root: Path, limits: ReadLimits) -> None:
    """An extracted archive directory held to the caps (member count, sizes by role and in
    total) and to the extraction rules (:func:`.extract.check_directory_entry`), in one walk."""
    real_root = Path(os.path.realpath(root))
    count = 0
    total = 0
    for dirpath, dirnames, filenames in os.walk(root):  # never follows a link to a directory
        dirnames.sort()
        linked_directories = set(dirnames)  # real ones are skipped below, links stay
        for name in sorted(dirnames + filenames):
            path = Path(dirpath, name)
            member = path.relative_to(root).as_posix()
            if not check_directory_entry(path, member, real_root):
                continue  # a directory: walked, not counted
            count += 1
            if count > limits.max_members:
                raise limits.too_many_members()
            if name in linked_directories:
                continue  # a link to a directory: os.walk does not enter it, nor do sizes
            try:
                size = path.stat().st_size
            except OSError:
                continue  # a dangling link: the reader says what is missing, if it matters
            limits.check_member(member, size)
            total += size
            if total > limits.max_total_bytes:
                raise limits.too_much_content(member)
