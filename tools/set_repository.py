#!/usr/bin/env python3
"""Set the book's repository address, the one setting behind every launch path.

    python3 tools/set_repository.py https://github.com/OWNER/REPO   # set it everywhere
    python3 tools/set_repository.py --check                          # verify all agree

The address lives in `_config.yml` (`repository.url`).  From it come: the Binder and Colab
launch buttons and the repository button of the rendered book, and the set-up cell at the
top of every chapter notebook, which installs the companion package from that repository
when it is missing (as in Colab).  `speclib` on the public package index is an unrelated
project, so the cell never runs `pip install speclib`.

With no address (the default until the project has a public one) the launch buttons are
off and the set-up cell explains how to install from a local clone instead.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "_config.yml"
MARKER = "# speclib set-up cell"

SETUP_CELL = '''# speclib set-up cell (written by tools/set_repository.py): in Colab or any environment
# without the companion package, install it from the book's repository. Binder and a local
# clone (python3 dev.py ...) already have it. Never `pip install speclib`: that name on the
# package index belongs to an unrelated project.
import importlib.util, subprocess, sys
REPOSITORY = "{url}"
if importlib.util.find_spec("speclib") is None:
    if not REPOSITORY:
        raise RuntimeError("speclib is not installed: clone the book's repository and run "
                           "`python3 dev.py test` there, or `pip install -e .` in the clone")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", f"git+{{REPOSITORY}}"], check=True)'''


def config_url() -> str:
    match = re.search(r'^repository:\s*\n(?:[ \t]+.*\n)*?[ \t]+url:\s*"?([^"\n]*)"?\s*$', CONFIG.read_text(), re.M)
    if not match:
        raise SystemExit("_config.yml: no repository.url entry")
    return match.group(1).strip()


def set_config(url: str) -> None:
    text = CONFIG.read_text()
    binder = "https://mybinder.org" if url else ""
    colab = "https://colab.research.google.com" if url else ""
    button = "true" if url else "false"
    text = re.sub(r'^(repository:\s*\n(?:[ \t]+.*\n)*?[ \t]+url:).*$', rf'\1 "{url}"', text, count=1, flags=re.M)
    text = re.sub(r'^([ \t]+binderhub_url:).*$', rf'\1 "{binder}"', text, count=1, flags=re.M)
    text = re.sub(r'^([ \t]+colab_url:).*$', rf'\1 "{colab}"', text, count=1, flags=re.M)
    text = re.sub(r'^([ \t]+use_repository_button:).*$', rf"\1 {button}", text, count=1, flags=re.M)
    CONFIG.write_text(text)


def notebooks() -> list[Path]:
    return sorted(p for p in (ROOT / "book").glob("*.ipynb"))


def setup_cell_source(url: str) -> str:
    return SETUP_CELL.format(url=url)


def first_code_cell(nb: dict) -> dict | None:
    return next((c for c in nb["cells"] if c["cell_type"] == "code"), None)


def set_notebook(path: Path, url: str) -> bool:
    """Make the notebook's first code cell the set-up cell for ``url``; True if changed."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    cell = first_code_cell(nb)
    source = setup_cell_source(url)
    if cell is not None and "".join(cell["source"]).startswith(MARKER):
        if "".join(cell["source"]) == source:
            return False
        cell["source"] = source
    else:
        new = {"cell_type": "code", "execution_count": None, "id": "speclib-setup",
               "metadata": {"tags": ["remove-cell"]}, "outputs": [], "source": source}
        index = nb["cells"].index(cell) if cell is not None else len(nb["cells"])
        nb["cells"].insert(index, new)
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return True


def check() -> list[str]:
    """Every notebook starts with the set-up cell for the configured address."""
    url, problems = config_url(), []
    for path in notebooks():
        cell = first_code_cell(json.loads(path.read_text(encoding="utf-8")))
        if cell is None or "".join(cell["source"]) != setup_cell_source(url):
            problems.append(f"{path.relative_to(ROOT)}: first code cell is not the set-up cell for {url!r}")
    return problems


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        problems = check()
        print("\n".join(problems) or "All notebooks use the configured repository address.")
        return 1 if problems else 0
    if len(argv) != 1 or argv[0].startswith("-"):
        print(__doc__)
        return 2
    url = argv[0].strip()
    if url and not re.fullmatch(r"https://[\w.-]+/[\w.-]+/[\w.-]+", url):
        print(f"URL: expected https://HOST/OWNER/REPO, got {url!r}")
        return 2
    set_config(url)
    changed = [p.name for p in notebooks() if set_notebook(p, url)]
    print(f"repository.url = {url!r}; set-up cell updated in {len(changed)} notebook(s).")
    if changed:
        print("Re-execute them: .venv/bin/python tools/execute_notebooks.py " + " ".join(f"book/{n}" for n in changed))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
