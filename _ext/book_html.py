"""The built pages: MathJax served from the book itself, and each script included once.

Sphinx loads MathJax from a CDN by default; a book opened offline (a classroom without
internet, a saved copy) then shows raw TeX.  This extension copies the MathJax 3 files of
the pinned ``django-static-mathjax`` package (import name ``mathjax``; it needs no Django
to be installed) into ``_static/mathjax`` of the HTML output, and ``_config.yml`` points
``mathjax_path`` at ``mathjax/tex-chtml.js`` there.

Only what the TeX-to-HTML component can load is copied: the combined ``tex-chtml.js``, the
TeX extensions it loads on demand, the CHTML fonts, the menu, and the accessibility and
speech modules the menu offers.  A build without the package fails with a message that
says what to install, rather than producing pages whose math cannot render.

sphinx-thebe registers its inline configuration script once per reading of the sources, and
Jupyter Book reads them twice, so every page declared ``THEBE_JS_URL`` twice: a script error
in the browser console.  ``one_copy_of_each_script`` drops the repeats from each page.
"""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

ENTRY = "tex-chtml.js"
# Paths under the package's es5/ folder that tex-chtml.js may load, relative to itself.
NEEDED = (ENTRY, "input/tex/extensions", "output/chtml/fonts/woff-v2", "ui", "a11y", "sre", "adaptors")


def mathjax_source() -> Path:
    """The folder of MathJax's browser components in the installed package."""
    try:
        root = Path(str(resources.files("mathjax"))) / "static" / "mathjax"
    except ModuleNotFoundError:
        root = None
    if root is None or not (root / "es5" / ENTRY).is_file():
        raise ExtensionError(
            "book_html: MathJax 3 is not installed; install the pinned requirements "
            "(`pip install -r requirements.txt`, which holds django-static-mathjax)")
    return root


def check_config(app: Sphinx, config) -> None:
    mathjax_source()
    if config.mathjax_path != f"mathjax/{ENTRY}":
        raise ExtensionError(f"book_html: set mathjax_path to 'mathjax/{ENTRY}' (it is {config.mathjax_path!r})")


def copy_mathjax(app: Sphinx, exc: Exception | None) -> None:
    if exc is not None or app.builder.format != "html":
        return
    root = mathjax_source()
    dest = Path(app.outdir) / "_static" / "mathjax"
    for rel in NEEDED:
        src = root / "es5" / rel
        if src.is_dir():
            shutil.copytree(src, dest / rel, dirs_exist_ok=True)
        else:
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    shutil.copy2(root / "LICENSE", dest / "LICENSE")


def one_copy_of_each_script(app: Sphinx, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, kept = set(), []
    for js in scripts:
        # An inline script comes with a filename of None or '' depending on who added it.
        key = (str(getattr(js, "filename", js) or ""),
               tuple(sorted((k, str(v)) for k, v in getattr(js, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            kept.append(js)
    scripts[:] = kept


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", check_config)
    app.connect("build-finished", copy_mathjax)
    app.connect("html-page-context", one_copy_of_each_script, priority=999)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
