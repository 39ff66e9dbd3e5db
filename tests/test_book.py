"""The book builds with warnings as errors, and the rendered pages hold what they should."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        for chapter in part.get("chapters", []):
            files.append(chapter["file"])
            files += [s["file"] for s in chapter.get("sections", [])]
    return files


@pytest.fixture(scope="session")
def built_book(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("book")
    jb = shutil.which("jupyter-book") or str(Path(sys.executable).parent / "jupyter-book")
    result = subprocess.run(
        [jb, "build", str(ROOT), "-W", "-n", "--keep-going", "--path-output", str(out)],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, f"book build failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return out / "_build" / "html"


def test_every_toc_entry_is_rendered(built_book):
    for name in toc_files():
        assert (built_book / f"{name}.html").exists(), f"{name} missing from the built book"


def test_no_page_shows_an_error_or_an_unfilled_glue(built_book):
    for name in toc_files():
        html = (built_book / f"{name}.html").read_text(encoding="utf-8")
        assert "Traceback (most recent call last)" not in html or "raises-exception" in html, name
        # An unresolved {glue:} role leaves its raw markup or a "glue" warning box behind.
        assert "{glue" not in html, f"{name}: unfilled glue reference"
        for img in re.findall(r'<img[^>]+src="([^"]+)"', html):
            if not img.startswith(("http", "data:")):
                assert (built_book / Path(name).parent / img).resolve().exists(), f"{name}: missing image {img}"
