"""The hint for a missing extra names an install that works for this installation.

Issue 35: it said `pip install 'peagle-deploy[local]'`, which is not published on PyPI
(and a package of that name there would be someone else's). A clone installed with
`pip install -e` is told the clone's command; a wheel file, that file; a package from an
index, its name. PEP 610's direct_url.json says which.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from peagle_deploy import extras
from peagle_deploy.extras import MissingExtraError, install_command


class FakeDist:
    def __init__(self, files: dict[str, str]) -> None:
        self.files_ = files

    def read_text(self, name: str) -> str | None:
        return self.files_.get(name)


def _installed(monkeypatch: pytest.MonkeyPatch, *dists: FakeDist) -> None:
    def distributions(**kwargs: Any) -> list[FakeDist]:
        assert kwargs == {"name": "peagle-deploy"}
        return list(dists)

    monkeypatch.setattr(extras.importlib.metadata, "distributions", distributions)


def test_an_editable_clone_is_told_the_clones_command(monkeypatch: pytest.MonkeyPatch) -> None:
    origin = {"url": "file:///home/me/peagle%20deploy", "dir_info": {"editable": True}}
    # the clone's own egg-info (no origin) is found first from its root
    _installed(monkeypatch, FakeDist({}), FakeDist({"direct_url.json": json.dumps(origin)}))
    assert install_command("local") == "cd '/home/me/peagle deploy' && pip install -e '.[local]'"


def test_a_wheel_file_is_told_that_file(monkeypatch: pytest.MonkeyPatch) -> None:
    wheel = "/tmp/dist/peagle_deploy-0.1.0-py3-none-any.whl"
    origin = {"url": f"file://{wheel}", "archive_info": {}}
    _installed(monkeypatch, FakeDist({"direct_url.json": json.dumps(origin), "INSTALLER": "pip"}))
    assert install_command("bench") == f"pip install 'peagle-deploy[bench] @ file://{wheel}'"


def test_an_index_install_and_a_bare_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    _installed(monkeypatch, FakeDist({"INSTALLER": "pip"}))
    assert install_command("cdk").startswith("pip install 'peagle-deploy[cdk]'")
    _installed(monkeypatch)  # run from a checkout, nothing installed
    assert install_command("cdk") == "pip install -e '.[cdk]' (in the clone)"


def test_this_checkout_is_not_told_an_unpublished_name() -> None:
    text = str(MissingExtraError("moto", "the emulator"))
    assert "pip install 'peagle-deploy[local]'" not in text
    assert "-e '.[local]'" in text and "\n" not in text
