"""The ``url`` resolver: download a tar (any compression) or zip archive and extract it safely.

Sources: ``http://``, ``https://`` and ``file://`` urls, or a plain local path (absolute or
relative to the archive's directory). Redirects may go to http or https only. The download is
hashed while it streams; the expected SHA-256 comes from the entry's ``sha256`` field or a
``#sha256=<hex>`` suffix on the url (both are accepted, see :mod:`.spec`) and a mismatch is
an error naming both digests. Without one, the digest of what was downloaded is recorded (cache
meta, lock file) so later runs with the lock insist on the same bytes.

The archive is extracted with :func:`.extract.safe_extract` (MLF extraction rules) and a single
top-level folder (``foo-1.2/``) is stripped.
"""

from __future__ import annotations

import hashlib
import shutil
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import IO, Callable, Optional

from ..errors import ArchiveError, DependencyError, UnsafeArchiveError
from .extract import safe_extract, strip_single_top
from .spec import DependencySpec

DOWNLOAD_TIMEOUT_S = 60
MAX_DOWNLOAD_BYTES = 1 << 30
_CHUNK = 1 << 20
_USER_AGENT = "mlf-project-api (external_dependencies resolver)"


RedirectCheck = Callable[[str], bool]


class _HttpOnlyRedirects(urllib.request.HTTPRedirectHandler):
    """Redirects to http(s) only, and with ``allowed`` only to the urls it accepts (an
    archive's dependency stays on the hosts the user allows, see :mod:`.trust`)."""

    def __init__(self, allowed: Optional[RedirectCheck] = None) -> None:
        super().__init__()
        self.allowed = allowed

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        scheme = urllib.parse.urlsplit(newurl).scheme.lower()
        if scheme not in ("http", "https"):
            raise urllib.error.HTTPError(
                newurl, code, f"redirect to a {scheme!r} url refused", headers, fp
            )
        if self.allowed is not None and not self.allowed(newurl):
            raise urllib.error.HTTPError(
                newurl, code, f"redirect to {newurl} refused (not an allowed host)", headers, fp
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def url_source(spec: DependencySpec, base_dir: Path) -> str:
    """The url to download: http(s) and file urls as given, a local path as a file url."""
    url = spec.url.strip()
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme in ("http", "https", "file"):
        return url
    if scheme and len(scheme) > 1:
        raise DependencyError(
            f"{spec.short_name}: url scheme {scheme!r} is not supported (http, https, file, "
            "or a local path)"
        )
    local = Path(url).expanduser()
    if not local.is_absolute():
        local = base_dir / local
    if not local.is_file():
        raise DependencyError(f"{spec.short_name}: archive {url!r} does not exist ({local})")
    return local.resolve().as_uri()


def _open(url: str, what: str, allowed: Optional[RedirectCheck]) -> IO[bytes]:
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    try:
        if scheme == "file":
            path = urllib.request.url2pathname(urllib.parse.urlsplit(url).path)
            return open(path, "rb")
        opener = urllib.request.build_opener(_HttpOnlyRedirects(allowed))
        request = urllib.request.Request(url, headers={"User-Agent": _USER_AGENT})
        return opener.open(request, timeout=DOWNLOAD_TIMEOUT_S)
    except urllib.error.HTTPError as err:
        raise DependencyError(
            f"{what}: download of {url} failed: HTTP {err.code} {err.reason}"
        ) from None
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", err)
        raise DependencyError(f"{what}: cannot download {url}: {reason}") from None


def download(
    url: str,
    dest: Path,
    *,
    what: str,
    max_bytes: int = MAX_DOWNLOAD_BYTES,
    redirects: Optional[RedirectCheck] = None,
) -> str:
    """Stream ``url`` into ``dest`` and return its SHA-256 (hex); ``redirects`` judges where
    a redirect may lead (default: any http or https url)."""
    digest = hashlib.sha256()
    size = 0
    with _open(url, what, redirects) as source, open(dest, "wb") as out:
        while True:
            try:
                chunk = source.read(_CHUNK)
            except OSError as err:
                raise DependencyError(f"{what}: download of {url} broke off: {err}") from None
            if not chunk:
                break
            size += len(chunk)
            if size > max_bytes:
                raise DependencyError(f"{what}: {url} is larger than {max_bytes} bytes")
            digest.update(chunk)
            out.write(chunk)
    return digest.hexdigest()


def fetch_url(
    source: str,
    work: Path,
    tree: Path,
    *,
    expected_sha256: Optional[str] = None,
    what: str = "url",
    progress: Optional[Callable[[str], None]] = None,
    redirects: Optional[RedirectCheck] = None,
) -> str:
    """Download ``source``, check its digest, extract it into ``tree``; return the digest."""
    archive = work / "download"
    sha256 = download(source, archive, what=what, redirects=redirects)
    if expected_sha256 is not None and sha256 != expected_sha256.lower():
        raise DependencyError(
            f"{what}: {source} has sha256 {sha256}, expected {expected_sha256.lower()}",
            hint="the file changed or was tampered with; check the url and the expected digest",
        )
    if progress:
        progress(f"{what}: downloaded {archive.stat().st_size} bytes, sha256 {sha256[:12]}")
    extracted = work / "extracted"
    try:
        safe_extract(archive, extracted)
    except ArchiveError as err:
        kind = "refused, unsafe" if isinstance(err, UnsafeArchiveError) else "unusable"
        raise DependencyError(f"{what}: archive {source} {kind}: {err.message}") from None
    archive.unlink()
    if not any(extracted.iterdir()):
        raise DependencyError(f"{what}: {source} is an empty archive")
    strip_single_top(extracted, tree)
    shutil.rmtree(work / "extracted", ignore_errors=True)
    return sha256
