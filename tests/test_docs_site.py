"""The documentation site, built and opened in headless Chromium.

Builds the project's site with the no-Quarto builder (`python -m fedlearn_nb.tools.docs`), serves it on 127.0.0.1 and
drives Debian's `chromium` through the Chrome DevTools Protocol: the home page loads, every sidebar link resolves,
an executed chapter's figures are loaded images, a displayed equation is typeset by the MathJax the site ships
(the browser reaches no other host), and a screenshot is saved (also into $FEDLEARN_SCREENSHOT_DIR when set). Skips when chromium is not installed
(`apt-get install chromium`; CI's .ci/run installs it).
"""
import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)

pytestmark = [pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install -y chromium; "
                                                           ".ci/run installs it)"),
              pytest.mark.xdist_group("sites")]  # the sites (conftest.py) are built once, on the worker of test_links.py


# ---------------------------------------------------------------- a tiny web server and a headless browser
@pytest.fixture(scope="module")
def serve():
    "Serve folders on 127.0.0.1 (a thread per server); yields a function folder -> base URL."
    servers = []

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args): pass

    class Server(http.server.ThreadingHTTPServer):
        def handle_error(self, request, client_address):  # a browser that drops a connection is not an error
            if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
                super().handle_error(request, client_address)

    def start(folder: Path) -> str:
        server = Server(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


class Chromium:
    "Headless Chromium driven over the DevTools protocol (websocket-client); every wait is bounded."

    def __init__(self, profile: Path, timeout: float = 60):
        import websocket
        profile.mkdir(parents=True, exist_ok=True)
        (profile / "DevToolsActivePort").unlink(missing_ok=True)  # a stale one would point to a dead browser
        self.log = open(profile.parent / "chromium.log", "wb")
        self.process = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
             "--disable-extensions", "--disable-default-apps", "--no-default-browser-check", "--mute-audio",
             "--hide-scrollbars", "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",  # nothing off-machine
             f"--user-data-dir={profile}", "--remote-debugging-port=0", "--remote-allow-origins=*",
             "--window-size=1280,900", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=self.log)
        port_file, deadline = profile / "DevToolsActivePort", time.monotonic() + timeout
        while not (port_file.exists() and port_file.read_text().strip()):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"chromium did not start: see {profile.parent / 'chromium.log'}")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as reply:
                    pages = [t for t in json.load(reply) if t.get("type") == "page"]
                if pages: break
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.close()
                raise RuntimeError("chromium's DevTools endpoint did not answer")
            time.sleep(0.2)
        self.socket = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=timeout, suppress_origin=True)
        self.next_id, self.events = 0, []
        self.send("Page.enable")
        self.send("Runtime.enable")
        self.send("Emulation.setDeviceMetricsOverride", {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False})

    def send(self, method: str, params: dict | None = None, timeout: float = 60) -> dict:
        "Call a DevTools method and wait (at most `timeout` s) for its reply; events that arrive meanwhile are kept."
        self.next_id += 1
        self.socket.send(json.dumps({"id": self.next_id, "method": method, "params": params or {}}))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.socket.settimeout(max(0.1, deadline - time.monotonic()))
            message = json.loads(self.socket.recv())
            if message.get("id") == self.next_id:
                if "error" in message: raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)
        raise TimeoutError(f"{method}: no reply within {timeout}s")

    def open(self, url: str, timeout: float = 60) -> None:
        "Navigate to `url` and wait for its load event."
        self.events.clear()
        self.send("Page.navigate", {"url": url})
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            if time.monotonic() > deadline: raise TimeoutError(f"{url} did not finish loading within {timeout}s")
            self.socket.settimeout(max(0.1, deadline - time.monotonic()))
            self.events.append(json.loads(self.socket.recv()))

    def evaluate(self, expression: str):
        "The value of a JavaScript expression in the current page."
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result: raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path) -> Path:
        "Save a PNG of the viewport."
        import base64
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        if getattr(self, "socket", None) is not None:
            try: self.socket.close()
            except Exception: pass
        if self.process.poll() is None:
            self.process.terminate()
            try: self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)
        self.log.close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    chromium = Chromium(tmp_path_factory.mktemp("chromium") / "profile")
    yield chromium
    chromium.close()


def _keep_screenshot(path: Path) -> None:
    "Copy a screenshot into $FEDLEARN_SCREENSHOT_DIR when it is set."
    folder = os.environ.get("FEDLEARN_SCREENSHOT_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, Path(folder) / path.name)


def _assert_png(path: Path, min_bytes: int = 10_000) -> None:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > min_bytes, f"{path} is not a real screenshot ({len(data)} bytes)"


IMAGES = """Array.from(document.querySelectorAll('main img')).map(i => ({src: i.src.slice(0, 40), complete: i.complete,
    width: i.naturalWidth, height: i.naturalHeight, shown: i.getBoundingClientRect().width}))"""
SIDEBAR = "Array.from(document.querySelectorAll('#sidebar a')).map(a => a.href)"
HEADING = "[document.title, (document.querySelector('main h1') || {}).textContent || '']"


# ---------------------------------------------------------------- the project's own site
def test_project_site_in_chromium(project_site, figure_chapter, serve, browser, tmp_path):
    from fedlearn_nb.tools.docs import MATHJAX_FILE, read_sidebar
    site, report = project_site
    base = serve(site)
    failed = [p for p in report["pages"] if p["executed"] == "failed"]
    assert not failed, f"chapters failed to execute for the docs: {failed}"

    # the home page loads, with the site's title, a heading and its sidebar
    browser.open(base + "index.html")
    title, heading = browser.evaluate(HEADING)
    assert "fedlearn_nb" in title and heading.strip(), (title, heading)
    links = browser.evaluate(SIDEBAR)
    screenshot = browser.screenshot(tmp_path / "docs_home.png")
    _assert_png(screenshot)
    _keep_screenshot(screenshot)

    # the sidebar is the one of _quarto.yml (entries whose notebook exists), in its order
    _, sections = read_sidebar(ROOT / "_quarto.yml")
    built = {p["source"]: p["page"] for p in report["pages"]}
    expected = [built[e.source] for s in sections for e in s.walk() if e.source in built]
    assert [link[len(base):] for link in links] == expected
    assert len(expected) >= 3

    # every sidebar link resolves: HTTP 200, a title and a heading, and the same sidebar on every page. These pages open
    # without MathJax (typesetting every page's equations was half of Chromium's CPU time here); one page's typesetting is
    # checked below, with MathJax loaded.
    browser.send("Network.enable")
    browser.send("Network.setBlockedURLs", {"urls": [f"*/{MATHJAX_FILE}"]})
    try:
        for link in links:
            with urllib.request.urlopen(link, timeout=30) as reply: assert reply.status == 200, link
            browser.open(link)
            title, heading = browser.evaluate(HEADING)
            assert title.strip() and heading.strip(), f"{link} has no title or heading"
            assert browser.evaluate(SIDEBAR) == links, f"{link} shows a different sidebar"
            assert browser.evaluate("document.querySelectorAll('#sidebar a.active').length") == 1, link
        assert browser.evaluate("typeof MathJax === 'undefined' || !MathJax.startup"), "MathJax was not blocked"
    finally:
        browser.send("Network.setBlockedURLs", {"urls": []})
        browser.send("Network.disable")

    # the executed chapter's figures are there: loaded images of non-zero size
    chapter = next((p for p in report["pages"] if Path(p["source"]).stem == figure_chapter), None)
    if chapter is None: pytest.skip(f"nbs/{figure_chapter}.ipynb does not exist yet: no figures to check on the project's site")
    assert chapter["executed"] in ("yes", "cached"), chapter
    browser.open(base + chapter["page"])
    images = browser.evaluate(IMAGES)
    assert images, f"{chapter['page']} has no figures"
    assert all(i["complete"] and i["width"] > 50 and i["height"] > 50 and i["shown"] > 0 for i in images), images
    browser.evaluate("document.querySelector('main img').scrollIntoView()")
    screenshot = browser.screenshot(tmp_path / "docs_figure.png")
    _assert_png(screenshot)
    _keep_screenshot(screenshot)

    # a paper page opens with its committed results: a result table above the first code cell, and that code folded
    browser.open(base + "papers/fedccl.html")
    order = browser.evaluate("(() => { const t = document.querySelector('main table.fl-table'), c = document.querySelector('main .code_cell'); "
                             "return [!!t, !!c, !!(t && c && (t.compareDocumentPosition(c) & Node.DOCUMENT_POSITION_FOLLOWING)), "
                             "!!(c && c.querySelector('details.fl-fold') && !c.querySelector('details.fl-fold').open)]; })()")
    assert order == [True, True, True, True], f"papers/fedccl.html: [a table, a code cell, the table first, the code folded] = {order}"

    # the reproduction status page shows its tables and its chart, from the committed CSVs, in a build that executed it not
    status = next(p for p in report["pages"] if p["source"] == "nbs/92_reproduction_status.ipynb")
    assert status["executed"] == "no", status
    browser.open(base + status["page"])
    rows = browser.evaluate("document.querySelectorAll('main table tbody tr').length")
    assert rows >= 10, f"{status['page']}: {rows} table rows"
    charts = browser.evaluate(IMAGES)
    assert charts and all(i["complete"] and i["width"] > 100 for i in charts), charts

    # a chapter that this build did not execute still shows its figures: the committed cache (nbs/_outputs)
    unexecuted = next(p for p in report["pages"] if p["source"] == "nbs/24_fedccl.ipynb")
    assert unexecuted["executed"] == "no", unexecuted
    browser.open(base + unexecuted["page"])
    figures = browser.evaluate(IMAGES)
    assert len(figures) >= 2 and all(i["complete"] and i["width"] > 50 and i["height"] > 50 for i in figures), figures

    # the search box finds a word on another page, offline (its index is a script of the site)
    browser.open(base + "index.html")
    hits = browser.evaluate("new Promise(done => { const box = document.getElementById('fl-search'); box.value = 'FINCH'; "
                            "box.dispatchEvent(new Event('input')); const t0 = Date.now(); (function wait() { "
                            "const links = Array.from(document.querySelectorAll('#fl-search-results a')).map(a => a.getAttribute('href')); "
                            "if (links.length || Date.now() - t0 > 20000) done(links); else setTimeout(wait, 100); })(); })")
    assert any(h.startswith("clustering.html") for h in hits), hits
    screenshot = browser.screenshot(tmp_path / "docs_search.png")
    _keep_screenshot(screenshot)
    pager = browser.evaluate("Array.from(document.querySelectorAll('main .fl-pager a')).map(a => a.getAttribute('rel'))")
    assert pager == ["next"], pager  # the home page: no previous page
    assert browser.evaluate("document.querySelector('header a.fl-repository').href").startswith("https://github.com/")

    # the equations are typeset, offline (the browser reaches no other host): MathJax comes with the site
    content = lambda page: (site / page).read_text().split('<main class="fl-content"', 1)[1]  # not the MathJax config
    with_math = [p for p in report["pages"] if p["kind"] == "chapter" and "$$" in content(p["page"])]
    assert with_math, "no chapter page has a displayed equation"
    browser.open(base + with_math[0]["page"])
    source = browser.evaluate("document.getElementById('MathJax-script').getAttribute('src')")
    assert source.startswith(("site_libs/", "../site_libs/")), source
    assert browser.evaluate("new Promise(done => { const t0 = Date.now(); (function wait() { if (window.MathJax && MathJax.startup "
                            "&& MathJax.startup.promise) MathJax.startup.promise.then(() => done(true)); else if (Date.now() - t0 > 30000) "
                            "done(false); else setTimeout(wait, 100); })(); })"), "MathJax did not start"
    displayed = browser.evaluate("document.querySelectorAll('main mjx-container[display=\"true\"] svg').length")
    assert displayed > 0, f"{with_math[0]['page']}: no displayed equation was typeset"
    left = browser.evaluate("(() => { const m = document.querySelector('main').cloneNode(true); "
                            "m.querySelectorAll('pre, code, script').forEach(e => e.remove()); return m.innerText; })()")
    assert "$$" not in left, f"{with_math[0]['page']}: LaTeX left untypeset: {left[left.find('$$') - 80:left.find('$$') + 80]!r}"
    screenshot = browser.screenshot(tmp_path / "docs_math.png")
    _keep_screenshot(screenshot)

    # (every link of the site leading somewhere is test_links.py's check of this same site, which runs without Chromium too)

    # the API reference lists the library and links into the chapters
    browser.open(base + "api.html")
    assert browser.evaluate("document.querySelectorAll('dl.fl-api dt').length") > 10
    target = browser.evaluate("document.querySelector('dl.fl-api dt a').getAttribute('href')")
    browser.open(base + target)
    assert browser.evaluate(f"!!document.getElementById({json.dumps(target.split('#')[1])})"), target


# ---------------------------------------------------------------- the example project: figures, papers, results
def test_example_site_in_chromium(example_site, serve, browser, tmp_path):
    site, report = example_site
    base = serve(site)
    browser.open(base + "plots.html")
    images = browser.evaluate(IMAGES)
    assert len(images) == 1 and images[0]["complete"] and images[0]["width"] > 100, images
    assert browser.evaluate("MathJax.startup.promise.then(() => document.querySelectorAll('main mjx-container svg').length)") == 1
    assert "$y = 2x$" not in browser.evaluate("document.querySelector('main').innerText")  # typeset, offline

    # a paper page shows its committed table and figure (copied into the site), never a re-run
    browser.open(base + "papers/alpha.html")
    cells = browser.evaluate("Array.from(document.querySelectorAll('table.fl-table td')).map(td => td.textContent)")
    assert cells == ["FedAvg", "0.81", "Alpha", "0.87", "FedAvg", "0.52", "Alpha", "0.55"], cells  # quick, then smoke
    images = browser.evaluate(IMAGES)
    assert [(i["width"], i["height"]) for i in images] == [(3, 2)], images
    assert "All committed results" in browser.evaluate("document.querySelector('main').innerText")  # the summary on top, the rest at the end
    assert browser.evaluate("document.querySelectorAll('main .output_area').length") == 0  # the paper's code did not run
    screenshot = browser.screenshot(tmp_path / "docs_paper.png")
    _assert_png(screenshot, min_bytes=5_000)
    _keep_screenshot(screenshot)

    browser.open(base + "papers/beta.html")
    assert "No committed results yet" in browser.evaluate("document.querySelector('main').innerText")

    # links between pages work: the API reference into the chapter, the home page to a notebook's page
    browser.open(base + "shapes.html#square_area")
    assert browser.evaluate("!!document.getElementById('square_area')")
    browser.open(base + "index.html")
    href = browser.evaluate("Array.from(document.querySelectorAll('main a')).find(a => a.textContent === 'shapes chapter').href")
    assert href == base + "shapes.html"
