#!/usr/bin/env python3
"""Look at the built book in headless Chromium: are the formulas typeset, does any display
formula overflow its column, and which addresses does each page request?

    .venv/bin/python tools/render_check.py                 # every page of _build/html
    .venv/bin/python tools/render_check.py --width 800 _build/html/book/04_correction.html
    .venv/bin/python tools/render_check.py --screenshot shots/ _build/html/book/00_overview.html

The browser runs with every host name unresolvable, so a page that needs the network for its
math shows untypeset TeX here, as it would offline.  It is driven through the DevTools
protocol (a small websocket client below, standard library only), which reports every request
a page makes and lets a script wait until MathJax has typeset the page before measuring.

Needs Chromium (Debian: ``apt-get install chromium``); ``find_chromium`` says how to get it.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
REDIRECT = re.compile(r"<meta[^>]+http-equiv=.refresh", re.I)
INSTALL_HINT = ("headless Chromium is needed to check the rendered pages: on Debian or Ubuntu, "
                "`apt-get install -y chromium` (as root); or set CHROMIUM to a Chromium binary")

# Runs in the page once it has loaded: waits for MathJax, then measures every formula.
MEASURE_JS = r"""
(async () => {
  const mj = window.MathJax;
  const result = {mathjax: !!(mj && mj.startup), formulas: [], untypeset: []};
  if (result.mathjax) {
    await mj.startup.promise;
    await document.fonts.ready;
    for (const item of mj.startup.document.math) {
      const box = item.typesetRoot;
      if (!box || !box.isConnected) continue;
      const math = box.querySelector('mjx-math') || box;
      const parent = box.parentElement;
      const style = getComputedStyle(parent);
      const room = parent.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
      result.formulas.push({
        tex: item.math, display: !!item.display,
        width: Math.max(math.getBoundingClientRect().width, box.scrollWidth),
        room: Math.min(room, box.clientWidth || room),
      });
    }
  }
  // Math that Sphinx marked for MathJax but that holds no typeset output.
  for (const el of document.querySelectorAll('div.math, span.math')) {
    if (!el.querySelector('mjx-container')) result.untypeset.push(el.textContent.slice(0, 80));
  }
  // Output blocks that the reader would have to scroll sideways.  A listing (code, not what
  // code printed) keeps every line whole and may scroll: it is collected apart.
  const isListing = (pre) => !pre.closest('div.cell_output, div.output');
  result.scrolling = [];
  result.scrolling_listings = [];
  for (const pre of document.querySelectorAll('article pre')) {
    if (pre.scrollWidth > pre.clientWidth + 1) {
      (isListing(pre) ? result.scrolling_listings : result.scrolling).push(pre.textContent.slice(0, 80));
    }
  }
  // Lines that wrap inside their block: each line of every block laid out alone, at the
  // block's width and in its style; a line taller than one line of text wrapped.
  result.wrapped = [];
  for (const pre of document.querySelectorAll('article pre')) {
    if (getComputedStyle(pre).whiteSpace === 'pre') continue;  // lines never wrap there
    const probe = pre.cloneNode(false);
    probe.style.position = 'absolute';
    probe.style.visibility = 'hidden';
    probe.style.width = pre.getBoundingClientRect().width + 'px';
    probe.style.boxSizing = 'border-box';
    const one = document.createElement('span');
    one.style.display = 'block';
    one.textContent = 'x';
    probe.appendChild(one);
    const lines = pre.textContent.replace(/\n$/, '').split('\n');
    const spans = lines.map((line) => {
      const span = document.createElement('span');
      span.style.display = 'block';
      span.textContent = line || ' ';
      probe.appendChild(span);
      return span;
    });
    pre.parentElement.appendChild(probe);
    const height = one.getBoundingClientRect().height;
    spans.forEach((span, i) => {
      if (span.getBoundingClientRect().height > 1.5 * height) {
        result.wrapped.push({listing: isListing(pre), indent: lines[i].length - lines[i].trimStart().length,
                             line: lines[i].slice(0, 80)});
      }
    });
    probe.remove();
  }
  // Tables wider than the room their container gives them (they would scroll sideways).
  result.tables = [];
  for (const table of document.querySelectorAll('article table')) {
    result.tables.push({width: Math.max(table.getBoundingClientRect().width, table.scrollWidth),
                        room: table.parentElement.clientWidth,
                        head: table.textContent.trim().replace(/\s+/g, ' ').slice(0, 60)});
  }
  const article = document.querySelector('article.bd-article') || document.body;
  result.column = article.clientWidth;
  return result;
})()
"""


def find_chromium() -> str:
    """Path of a Chromium binary (the CHROMIUM variable, else the usual names); raise if none."""
    env = os.environ.get("CHROMIUM")
    if env:
        if shutil.which(env):
            return shutil.which(env)
        raise FileNotFoundError(f"CHROMIUM={env!r} is not an executable; {INSTALL_HINT}")
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    raise FileNotFoundError(INSTALL_HINT)


class WebSocket:
    """Just enough of RFC 6455 for the DevTools protocol: text frames over a local socket."""

    def __init__(self, url: str, timeout: float):
        m = re.match(r"ws://([^:/]+):(\d+)(/.*)", url)
        if not m:
            raise ValueError(f"url: not a ws:// address: {url!r}")
        host, port, path = m.group(1), int(m.group(2)), m.group(3)
        self.sock = socket.create_connection((host, port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("the browser closed the DevTools connection")
            head += chunk
        head, self.buffer = head.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError(f"DevTools refused the websocket: {head[:200]!r}")

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("the browser closed the DevTools connection")
            self.buffer += chunk
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def send(self, text: str) -> None:
        data = text.encode()
        header = bytearray([0x81])
        if len(data) < 126:
            header.append(0x80 | len(data))
        elif len(data) < 1 << 16:
            header += bytes([0x80 | 126]) + struct.pack(">H", len(data))
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", len(data))
        mask = os.urandom(4)
        self.sock.sendall(bytes(header) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def receive(self) -> str:
        message = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            mask = self._read(4) if b1 & 0x80 else None
            payload = self._read(n)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            opcode = b0 & 0x0F
            if opcode == 0x8:
                raise ConnectionError("the browser closed the DevTools connection")
            if opcode in (0x0, 0x1, 0x2):
                message += payload
                if b0 & 0x80:
                    return message.decode()

    def close(self) -> None:
        self.sock.close()


@dataclass
class PageReport:
    """What one page did in the browser."""

    url: str
    mathjax: bool
    formulas: list[dict]
    untypeset: list[str]
    requests: list[str]
    column: float
    console_errors: list[str] = field(default_factory=list)
    scrolling: list[str] = field(default_factory=list)  #: output blocks wider than the column
    scrolling_listings: list[str] = field(default_factory=list)  #: listings wider than the column (they scroll)
    wrapped: list[dict] = field(default_factory=list)  #: lines that wrap: {listing, indent, line}
    tables: list[dict] = field(default_factory=list)  #: every table: {width, room, head}

    def overflowing(self, tolerance: float = 1.0) -> list[dict]:
        """Display formulas wider than the room their container gives them."""
        return [f for f in self.formulas if f["display"] and f["width"] > f["room"] + tolerance]

    def lost_indentation(self) -> list[dict]:
        """Lines that wrap and so lose their indentation: any line of a listing, and an indented
        line of printed output (prose in an output may wrap; structure may not)."""
        return [w for w in self.wrapped if w["listing"] or w["indent"] > 0]

    def wide_tables(self, tolerance: float = 1.0) -> list[dict]:
        """Tables wider than their container (they scroll sideways)."""
        return [t for t in self.tables if t["width"] > t["room"] + tolerance]

    def remote_requests(self) -> list[str]:
        return [u for u in self.requests if not u.startswith(("file:", "data:", "blob:", "about:"))]


def describe(details: dict) -> str:
    """One line for an uncaught exception reported by the DevTools protocol."""
    exc = details.get("exception", {})
    where = f"{details.get('url', '')}:{details.get('lineNumber', '')}"
    return f"{details.get('text', '')} {exc.get('description', exc.get('value', ''))} at {where}".strip()


class Chromium:
    """One headless Chromium with no name resolution, driven over the DevTools protocol."""

    def __init__(self, width: int = 1200, height: int = 900, timeout: float = 60.0):
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="render-check-")
        self.proc = subprocess.Popen(
            [find_chromium(), "--headless", "--no-sandbox", "--disable-gpu",
             "--disable-background-networking", "--disable-extensions", "--no-first-run",
             "--host-resolver-rules=MAP * ~NOTFOUND", f"--window-size={width},{height}",
             "--remote-debugging-port=0", f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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
        self.call("Network.enable")
        self.call("Runtime.enable")
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def call(self, method: str, params: dict | None = None) -> dict:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params or {}}))
        while True:
            msg = json.loads(self.ws.receive())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def wait_for(self, method: str) -> None:
        deadline = time.monotonic() + self.timeout
        while not any(e["method"] == method for e in self.events):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {method} within {self.timeout} s")
            msg = json.loads(self.ws.receive())
            if "method" in msg:
                self.events.append(msg)

    def load(self, path: Path) -> PageReport:
        """Open a built page, wait until it is typeset, and report what it did."""
        url = path.resolve().as_uri()
        self.events = []
        self.call("Page.navigate", {"url": url})
        self.wait_for("Page.loadEventFired")
        return self.measure(path)

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page that is open."""
        value = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in value:
            raise RuntimeError(f"the expression failed: {value['exceptionDetails']}")
        return value["result"].get("value")

    def measure(self, path: Path) -> PageReport:
        """Report on the page that is open (``load`` opens it): measured again as it is now."""
        url = path.resolve().as_uri()
        value = self.call("Runtime.evaluate", {"expression": MEASURE_JS, "awaitPromise": True,
                                               "returnByValue": True, "timeout": self.timeout * 1000})
        if "exceptionDetails" in value:
            raise RuntimeError(f"{path}: the measuring script failed: {value['exceptionDetails']}")
        data = value["result"]["value"]
        requests = [e["params"]["request"]["url"] for e in self.events
                    if e["method"] == "Network.requestWillBeSent"]
        errors = [describe(e["params"]["exceptionDetails"]) for e in self.events
                  if e["method"] == "Runtime.exceptionThrown"]
        return PageReport(url, data["mathjax"], data["formulas"], data["untypeset"], requests,
                          data["column"], errors, data["scrolling"], data["scrolling_listings"],
                          data["wrapped"], data["tables"])

    def screenshot(self, path: Path, out: Path, full_page: bool = True) -> None:
        self.load(path)
        params = {"format": "png"}
        if full_page:
            size = self.call("Page.getLayoutMetrics")["cssContentSize"]
            params |= {"captureBeyondViewport": True,
                       "clip": {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 12000),
                                "scale": 1}}
        data = self.call("Page.captureScreenshot", params)["data"]
        out.write_bytes(base64.b64decode(data))

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

    def __enter__(self) -> "Chromium":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def built_pages(html_root: Path) -> list[Path]:
    """Every content page of a built book (not Sphinx's index and search pages, nor redirects)."""
    skip = {"genindex.html", "search.html", "prf-prf.html"}
    return sorted(p for p in html_root.rglob("*.html")
                  if "_static" not in p.parts and "_sources" not in p.parts and p.name not in skip
                  and not REDIRECT.search(p.read_text(encoding="utf-8", errors="replace")[:2000]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, help="pages or a built html folder (default _build/html)")
    parser.add_argument("--width", type=int, default=1200, help="window width in CSS pixels (default 1200, the narrowest column of the wide layout)")
    parser.add_argument("--screenshot", type=Path, help="write a full-page PNG of each page into this folder")
    args = parser.parse_args(argv)
    pages = []
    for p in args.paths or [ROOT / "_build" / "html"]:
        pages += built_pages(p) if p.is_dir() else [p]
    bad = 0
    with Chromium(width=args.width) as browser:
        for page in pages:
            if args.screenshot:
                args.screenshot.mkdir(parents=True, exist_ok=True)
                browser.screenshot(page, args.screenshot / f"{page.stem}.png")
            report = browser.load(page)
            over = report.overflowing()
            remote = report.remote_requests()
            lost, wide = report.lost_indentation(), report.wide_tables()
            bad += bool(over or remote or report.untypeset or report.scrolling or lost or wide)
            print(f"{page.name}: column {report.column:.0f} px, {len(report.formulas)} formulas, "
                  f"{len(over)} too wide, {len(report.untypeset)} untypeset, {len(remote)} remote requests, "
                  f"{len(report.scrolling)} output blocks scroll sideways, {len(lost)} lines wrap and lose "
                  f"their indentation, {len(wide)} tables wider than the column")
            for w in lost:
                print(f"    wraps: {w['line']!r}")
            for t in wide:
                print(f"    table {t['width']:.0f} px in {t['room']:.0f} px: {t['head']!r}")
            for f in over:
                print(f"    {f['width']:.0f} px in {f['room']:.0f} px: {f['tex'].strip()[:100]!r}")
            for u in remote:
                print(f"    requests {u}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
