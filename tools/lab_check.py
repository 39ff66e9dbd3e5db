#!/usr/bin/env python3
"""Open notebooks in JupyterLab, in headless Chromium, and report what the reader sees.

    .venv/bin/python tools/lab_check.py student/03_verification.ipynb --screenshot shots/
    .venv/bin/python tools/lab_check.py student/01_why_slow.ipynb student/03_verification.ipynb

JupyterLab runs from this environment (the one requirements.txt, and so Binder, sets up) on a
free local port, without a token, with its home, settings and workspaces in a temporary
folder, so nothing of the user's own JupyterLab set-up takes part.  Chromium is the one
tools/render_check.py uses, driven over the DevTools protocol; it resolves no host name but
the local address, so a page that needs the network shows it here.  For each notebook it
reports the rendered text of every Markdown cell, what MyST rendered (exercises, proofs,
cross-references) and any MyST error, and can save a screenshot.

Notebooks are shown with JupyterLab's windowing off (every cell in the page, not only those
scrolled into view) so that the whole notebook can be read; the rendering is the same.  The
application is exposed to the page (``--LabApp.expose_app_in_browser``) so that a check can
run JupyterLab's own commands: ``Browser.run_all`` clicks Run All as a reader would and reads
each cell's execution count and outputs from the notebook's model.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from render_check import WebSocket, find_chromium  # noqa: E402

#: Runs in the page: how far JupyterLab has got with the notebook, and what it shows.
READ_JS = r"""
(() => {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook');
  if (!panel) return {ready: false, why: 'no notebook panel yet'};
  const cells = [...panel.querySelectorAll('.jp-MarkdownCell')];
  // jupyterlab-myst renders a Markdown cell into div.myst; JupyterLab's own renderer into
  // .jp-MarkdownOutput (a notebook without MyST support would show that one).
  const shown = cells.map(c => c.querySelector('.jp-Cell-inputArea > .myst, .jp-MarkdownOutput'));
  const rendered = shown.filter(o => o);
  const selectors = {
    exercises: 'aside.myst-exercise',
    proofs: 'aside.myst-proof',
    links: 'a[href]:not([title^="Link to this"])',
    // What jupyterlab-myst marks as unresolved (a citation or label it cannot find) or wrong.
    problems: '[title$="Not Found"], [title*="not found"], [title*="rror"], .text-yellow-600, .text-red-500',
  };
  const found = {};
  for (const [name, sel] of Object.entries(selectors)) {
    found[name] = [...panel.querySelectorAll('.jp-MarkdownCell ' + sel.split(', ').join(', .jp-MarkdownCell '))]
      .map(e => ((e.getAttribute('title') || '') + ' ' + e.innerText.slice(0, 120) + ' '
                 + (e.getAttribute('href') || '')).trim());
  }
  const math = panel.querySelectorAll('.jp-MarkdownCell .katex, .jp-MarkdownCell mjx-container').length;
  return {ready: cells.length > 0 && rendered.length === cells.length, cells: cells.length, math,
          rendered: rendered.length, text: shown.map(o => o ? o.innerText : ''),
          renderer: shown.map(o => o ? (o.classList.contains('myst') ? 'myst' : 'markdown') : 'none'), found};
})()
"""


#: Finds the notebook on show: the visible panel of the main area (shell.currentWidget follows
#: the keyboard focus, which a headless page does not have).
SHOWN_PANEL_JS = "var shownPanel = (app) => [...app.shell.widgets('main')].find(w => w.isVisible && w.sessionContext && w.content);\n"

#: Runs in the page: start JupyterLab's Run All on the open notebook once its kernel is ready.
RUN_ALL_JS = SHOWN_PANEL_JS + r"""
(async () => {
  const app = window.jupyterapp;
  const panel = shownPanel(app);
  await panel.sessionContext.ready;
  window.__runAllDone = null;
  app.shell.activateById(panel.id);
  app.commands.execute('notebook:run-all-cells').then(
    ok => { window.__runAllDone = {ok: ok}; },
    err => { window.__runAllDone = {error: String(err)}; });
  return true;
})()
"""

#: Runs in the page: whether Run All has settled, and the kernel's status.
RUN_STATE_JS = SHOWN_PANEL_JS + r"""
(() => {
  const panel = shownPanel(window.jupyterapp);
  const kernel = panel && panel.sessionContext.session && panel.sessionContext.session.kernel;
  const done = window.__runAllDone;
  return {done: !!done, error: done && done.error, kernel: kernel ? kernel.status : 'none'};
})()
"""

#: Runs in the page: the open notebook's code cells, read from its model.
CELLS_JS = SHOWN_PANEL_JS + r"""
(() => {
  const panel = shownPanel(window.jupyterapp);
  return panel.content.widgets.filter(w => w.model.type === 'code').map(w => ({
    source: w.model.sharedModel.getSource(),
    count: w.model.executionCount,
    tags: w.model.getMetadata('tags') || [],
    outputs: w.model.outputs.toJSON(),
  }));
})()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JupyterLab:
    """A JupyterLab server over ``root`` on a free local port, in a throw-away home folder."""

    def __init__(self, root: Path = ROOT, python: str = sys.executable, timeout: float = 60.0,
                 env: dict[str, str] | None = None):
        self.home = Path(tempfile.mkdtemp(prefix="lab-check-"))
        settings = self.home / "settings" / "@jupyterlab" / "notebook-extension"
        settings.mkdir(parents=True)
        (settings / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
        # No "get notified about Jupyter news?" toast (it would ask the network, and hide the page).
        apputils = self.home / "settings" / "@jupyterlab" / "apputils-extension"
        apputils.mkdir(parents=True)
        (apputils / "notification.jupyterlab-settings").write_text(
            json.dumps({"fetchNews": "false", "checkForUpdates": False}))
        env = {**os.environ, "HOME": str(self.home), "JUPYTER_CONFIG_DIR": str(self.home / "config"),
               "JUPYTER_DATA_DIR": str(self.home / "data"), "JUPYTER_RUNTIME_DIR": str(self.home / "runtime"),
               "JUPYTERLAB_SETTINGS_DIR": str(self.home / "settings"),
               "JUPYTERLAB_WORKSPACES_DIR": str(self.home / "workspaces"), "IPYTHONDIR": str(self.home / "ipython"),
               **(env or {})}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(self.home / "jupyterlab.log", "w")
        self.proc = subprocess.Popen(
            [python, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ip=127.0.0.1", f"--port={self.port}",
             "--ServerApp.token=", "--ServerApp.password=", "--ServerApp.disable_check_xsrf=True",
             f"--ServerApp.root_dir={root}", "--LabApp.news_url=", "--ServerApp.port_retries=0",
             "--LabApp.expose_app_in_browser=True"],
            cwd=root, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/api/status", timeout=5):
                    break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    log = (self.home / "jupyterlab.log").read_text(errors="replace")[-2000:]
                    self.close()
                    raise RuntimeError(f"JupyterLab did not start within {timeout:g} s; its log ends:\n{log}")
                time.sleep(0.3)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.home, ignore_errors=True)

    def __enter__(self) -> "JupyterLab":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass
class NotebookView:
    """What JupyterLab showed for one notebook."""

    path: str
    cells: int  #: Markdown cells in the notebook
    rendered: int  #: of them, those that show rendered text
    text: list[str]  #: each Markdown cell's text as shown
    found: dict[str, list[str]] = field(default_factory=dict)  #: exercises, proofs, links, problems
    errors: list[str] = field(default_factory=list)  #: uncaught exceptions in the page
    math: int = 0  #: typeset formulas in the Markdown cells

    @property
    def all_text(self) -> str:
        return "\n".join(self.text)


class Browser:
    """Headless Chromium that resolves only the local address, over the DevTools protocol."""

    def __init__(self, width: int = 1200, height: int = 900, timeout: float = 60.0):
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="lab-check-chromium-")
        self.proc = subprocess.Popen(
            [find_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-extensions", "--no-first-run", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
             f"--window-size={width},{height}", "--remote-debugging-port=0", f"--user-data-dir={self.profile}",
             "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while not (port_file.exists() and port_file.read_text().strip()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("Chromium did not start (no DevTools port)")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=timeout) as r:
            pages = [t for t in json.load(r) if t["type"] == "page"]
        self.ws = WebSocket(pages[0]["webSocketDebuggerUrl"], timeout)
        self.next_id = 0
        self.events: list[dict] = []
        self.call("Page.enable")
        self.call("Runtime.enable")
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def call(self, method: str, params: dict | None = None) -> dict:
        self.next_id += 1
        wanted = self.next_id
        self.ws.send(json.dumps({"id": wanted, "method": method, "params": params or {}}))
        while True:
            msg = json.loads(self.ws.receive())
            if msg.get("id") == wanted:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if msg.get("method") == "Page.javascriptDialogOpening":
                # "Leave the page? Changes may not be saved" after a run: leave (the copy served is a
                # throw-away one); the dialog would otherwise hold the navigation forever.
                self.next_id += 1
                self.ws.send(json.dumps({"id": self.next_id, "method": "Page.handleJavaScriptDialog",
                                         "params": {"accept": True}}))
            if "method" in msg:
                self.events.append(msg)

    def evaluate(self, expression: str):
        answer = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in answer:
            raise RuntimeError(f"the page script failed: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def open_notebook(self, lab: JupyterLab, path: str, settle: float = 1.0) -> NotebookView:
        """Open ``path`` (relative to the server's root) in JupyterLab and read it once rendered."""
        self.events = []
        self.call("Page.navigate", {"url": f"{lab.url}/lab/tree/{quote(path)}?reset"})
        deadline = time.monotonic() + self.timeout
        state: dict = {}
        while time.monotonic() < deadline:
            state = self.evaluate(READ_JS) or {}
            if state.get("ready"):
                break
            time.sleep(0.5)
        else:
            raise TimeoutError(f"{path}: JupyterLab did not render the notebook within {self.timeout:g} s "
                               f"({state.get('why') or state.get('rendered', 0)} of {state.get('cells', '?')} "
                               "Markdown cells rendered)")
        time.sleep(settle)  # MathJax and late renderers
        state = self.evaluate(READ_JS)
        errors = [json.dumps(e["params"]["exceptionDetails"].get("exception", {}).get("description", ""))[:300]
                  for e in self.events if e["method"] == "Runtime.exceptionThrown"]
        return NotebookView(path, state["cells"], state["rendered"], state["text"], state["found"], errors,
                            state["math"])

    def evaluate_async(self, expression: str, timeout: float | None = None):
        """Evaluate ``expression`` (a promise) in the page and return its value once it settles."""
        answer = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True,
                                                "timeout": int(1000 * (timeout or self.timeout))})
        if "exceptionDetails" in answer:
            raise RuntimeError(f"the page script failed: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def run_all(self, timeout: float = 300.0) -> list[dict]:
        """Run All in the open notebook, with JupyterLab's own command, as a reader clicks it; wait
        until the run has finished (or stopped) and the kernel is idle, and return
        :meth:`code_cells`."""
        self.evaluate_async(RUN_ALL_JS, timeout=60)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.evaluate(RUN_STATE_JS) or {}
            if state.get("done") and state.get("kernel") == "idle":
                if state.get("error"):
                    raise RuntimeError(f"Run All failed in the page: {state['error']}")
                return self.code_cells()
            time.sleep(1.0)
        raise TimeoutError(f"Run All did not finish within {timeout:g} s")

    def code_cells(self) -> list[dict]:
        """Each code cell of the open notebook, from its model: ``source``, ``count`` (the
        execution count, None for a cell that did not run), ``tags`` and ``outputs`` (as nbformat
        writes them)."""
        return self.evaluate(CELLS_JS)

    def links(self, selector: str = ".jp-OutputArea-output a[href]") -> list[dict]:
        """Text and target of the links in the open notebook that match ``selector``."""
        return self.evaluate(f"[...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) "
                             f"{selector}')].map(a => ({{text: a.innerText, href: a.getAttribute('href'), "
                             "resolved: a.href}))")

    def click_link(self, text: str, selector: str = ".jp-OutputArea-output a[href]", settle: float = 3.0) -> str:
        """Click the first link reading ``text`` as a reader does; return the path of the document
        JupyterLab shows afterwards ("" when none)."""
        found = self.evaluate(f"(() => {{ const a = [...document.querySelectorAll("
                              f"'.jp-NotebookPanel:not(.lm-mod-hidden) {selector}')]"
                              f".find(e => e.innerText.trim() === {json.dumps(text)}); if (!a) return false; "
                              "a.scrollIntoView({block: 'center'}); a.click(); return true; })()")
        if not found:
            raise LookupError(f"no link reads {text!r}")
        time.sleep(settle)
        return self.evaluate(SHOWN_PANEL_JS + "(() => { const w = shownPanel(window.jupyterapp); "
                             "return (w && w.context) ? w.context.path : ''; })()") or ""

    def scroll_to(self, selector: str) -> bool:
        """Scroll the first element matching ``selector`` into view; False if there is none."""
        found = self.evaluate(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); "
                              "if (!e) return false; e.scrollIntoView({block: 'start'}); return true; })()")
        time.sleep(0.3)
        return bool(found)

    def screenshot(self, out: Path) -> Path:
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        out.write_bytes(base64.b64decode(data))
        return out

    def close(self) -> None:
        if getattr(self, "ws", None):
            self.ws.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", help="notebooks, relative to the repository root")
    parser.add_argument("--screenshot", type=Path, help="save a PNG of each notebook's first screen in this folder")
    parser.add_argument("--dump", type=Path, help="save each notebook's rendered Markdown text in this folder")
    parser.add_argument("--root", type=Path, default=ROOT, help="the folder JupyterLab serves (default: the repository)")
    args = parser.parse_args(argv)
    with JupyterLab(args.root) as lab, Browser() as browser:
        for path in args.notebooks:
            start = time.monotonic()
            view = browser.open_notebook(lab, path)
            print(f"{path}: {view.rendered} of {view.cells} Markdown cells rendered in "
                  f"{time.monotonic() - start:.1f} s; {view.math} formulas, "
                  f"{len(view.found.get('exercises', []))} exercise elements, "
                  f"{len(view.found.get('proofs', []))} proofs, {len(view.found.get('problems', []))} unresolved or wrong, {len(view.errors)} page errors")
            for kind, items in view.found.items():
                for item in items[:5]:
                    print(f"    {kind}: {item.strip()[:100]!r}")
            if args.dump:
                args.dump.mkdir(parents=True, exist_ok=True)
                (args.dump / f"{Path(path).stem}.txt").write_text(view.all_text)
            if args.screenshot:
                args.screenshot.mkdir(parents=True, exist_ok=True)
                print(f"    screenshot: {browser.screenshot(args.screenshot / f'{Path(path).stem}.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
