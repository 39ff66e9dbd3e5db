"""The repository address is one setting, and every launch path follows it."""

import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import set_repository  # noqa: E402


def test_every_notebook_starts_with_the_setup_cell_for_the_configured_address():
    assert set_repository.check() == []


def test_setup_cell_never_installs_the_unrelated_pypi_speclib():
    source = set_repository.setup_cell_source("https://github.com/example/book")
    assert "pip install speclib" not in source.replace("`pip install speclib`", "")
    assert 'f"git+{REPOSITORY}"' in source


def test_setting_an_address_updates_config_and_notebooks(tmp_path, monkeypatch):
    shutil.copy(ROOT / "_config.yml", tmp_path / "_config.yml")
    (tmp_path / "book").mkdir()
    nb = {"cells": [{"cell_type": "code", "execution_count": 1, "id": "a", "metadata": {}, "outputs": [],
                     "source": "import speclib"}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "book" / "x.ipynb").write_text(json.dumps(nb))
    monkeypatch.setattr(set_repository, "ROOT", tmp_path)
    monkeypatch.setattr(set_repository, "CONFIG", tmp_path / "_config.yml")

    assert set_repository.check() != []  # the notebook lacks the set-up cell
    assert set_repository.main(["https://github.com/example/book"]) == 0
    assert set_repository.config_url() == "https://github.com/example/book"
    text = (tmp_path / "_config.yml").read_text()
    assert 'binderhub_url: "https://mybinder.org"' in text and "use_repository_button: true" in text
    assert set_repository.check() == []
    cells = json.loads((tmp_path / "book" / "x.ipynb").read_text())["cells"]
    assert cells[0]["metadata"]["tags"] == ["remove-cell"] and cells[1]["source"] == "import speclib"
    assert set_repository.main(["not a url"]) == 2
