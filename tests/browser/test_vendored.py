"""The web UI's vendored chart library is the published package, byte for byte: each file
under src/opennua/web/vendor/ equals the same file in the npm registry's tarball of the
pinned version, fetched here with `npm pack` into a temporary directory."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

VENDOR = Path(__file__).resolve().parents[2] / "src" / "opennua" / "web" / "vendor"
PACKAGE = "uplot"
VERSION = "1.6.32"
#: vendored file → its path inside the package tarball.
FILES = {
    "uPlot.esm.js": "package/dist/uPlot.esm.js",
    "uPlot.min.css": "package/dist/uPlot.min.css",
    "uPlot.LICENSE": "package/LICENSE",
}


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.mark.slow
def test_the_vendored_uplot_is_the_published_package(tmp_path: Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set but npm is not installed")
        pytest.skip("npm is not installed")
    packed = subprocess.run(
        [npm, "pack", f"{PACKAGE}@{VERSION}", "--silent", "--pack-destination", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert packed.returncode == 0, packed.stderr
    tarball = tmp_path / packed.stdout.strip().splitlines()[-1]
    with tarfile.open(tarball) as archive:
        for vendored, inside in FILES.items():
            member = archive.extractfile(inside)
            assert member is not None, inside
            published = _sha256(member.read())
            assert _sha256((VENDOR / vendored).read_bytes()) == published, vendored
    # Nothing else is vendored unchecked.
    assert sorted(p.name for p in VENDOR.iterdir()) == sorted(FILES)
