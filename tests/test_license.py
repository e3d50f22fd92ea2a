"""The project's license file is the Apache License 2.0 that pyproject.toml declares."""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# sha256 of https://www.apache.org/licenses/LICENSE-2.0.txt, the text the Apache Software
# Foundation publishes (the same file ships, byte for byte, with s3transfer, propcache,
# jsonpath-ng and aws-cdk-asset-* on PyPI, where it was taken from).
APACHE_2_0_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"


def test_license_file_is_the_apache_2_0_text_pyproject_declares() -> None:
    assert (
        tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] == "Apache-2.0"
    )
    text = (ROOT / "LICENSE").read_bytes()
    assert hashlib.sha256(text).hexdigest() == APACHE_2_0_SHA256
    assert b"Apache License" in text and b"Version 2.0, January 2004" in text
