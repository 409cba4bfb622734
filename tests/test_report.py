"""stc.report: the HTML page's content, and the page opened in a real (headless) browser.

The browser test drives Chromium through the DevTools protocol over a pipe
(``--remote-debugging-pipe``: JSON messages separated by NUL bytes on file
descriptors 3 and 4), so it needs no Python package besides the standard
library. Without a Chromium on PATH it is skipped, except in CI (CI=true),
where .ci/run installs Debian's ``chromium`` and a missing browser fails.
"""
import base64
import fcntl
import html.parser
import json
import os
import queue
import shutil
import subprocess
import threading
import time

import numpy as np
import pytest

import stc
from stc import MedSTC, STC
from stc import inspection
from stc.datasets import load_newsgroups_split

from conftest import brief_fit, optional
from test_images import load_make_images

IN_CI = os.environ.get("CI") == "true"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")



@pytest.fixture(scope="module")
def data():
    optional("matplotlib")
    train, test = load_newsgroups_split()
    rows = np.arange(0, train.data.shape[0], 6)
    return train.data[rows], train.target[rows], test.data[::6], test.target[::6], train


@pytest.fixture(scope="module")
def stc_page(data, tmp_path_factory):
    X, y, _, _, train = data
    model = STC(n_topics=6, max_iter=8, random_state=0).fit(X)
    path = stc.report(model, X, tmp_path_factory.mktemp("report") / "stc.html", y,
                      vocabulary=train.vocabulary, class_names=train.target_names)
    return model, path


@pytest.fixture(scope="module")
def medstc_page(data, tmp_path_factory):
    X, y, X_test, y_test, train = data
    model = MedSTC(n_topics=6, max_iter=3, random_state=0).fit(X, y)
    path = stc.report(model, X_test, tmp_path_factory.mktemp("report") / "medstc.html", y_test,
                      vocabulary=train.vocabulary, class_names=train.target_names)
    return model, path


@pytest.mark.parametrize("which", ["stc_page", "medstc_page"])
@brief_fit
def test_parameter_table_lists_exactly_the_estimators_parameters(which, request):
    model, page = request.getfixturevalue(which)
    rows = load_make_images().parameter_rows(page)
    assert [name for name, _ in rows] == sorted(model.get_params())
    assert all(value for _, value in rows)


class PageParts(html.parser.HTMLParser):
    """Collects what the tests check: images, scripts, links, section ids, text."""

    def __init__(self):
        super().__init__()
        self.images, self.scripts, self.links, self.sections, self.text = [], [], [], [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img":
            self.images.append(attrs)
        elif tag == "script":
            self.scripts.append(attrs)
        elif tag == "link":
            self.links.append(attrs)
        elif tag == "section":
            self.sections.append(attrs.get("id"))

    def handle_data(self, data):
        self.text.append(data)


def parse(path):
    parts = PageParts()
    parts.feed(path.read_text(encoding="utf-8"))
    parts.text = " ".join(parts.text)
    return parts


@brief_fit
def test_page_is_self_contained(stc_page):
    _, path = stc_page
    parts = parse(path)
    assert parts.scripts == [] and parts.links == []
    assert parts.images, "no image on the page"
    for image in parts.images:
        assert image["src"].startswith("data:image/png;base64,")
        png = base64.b64decode(image["src"].split(",", 1)[1])
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        assert image.get("alt")
    page = path.read_text(encoding="utf-8")
    assert "http://" not in page and "https://" not in page


def test_stc_page_holds_the_fit_topics_and_sparsity(stc_page, data):
    model, path = stc_page
    X, y, _, _, train = data
    parts = parse(path)
    assert parts.sections == ["fit", "topics", "sparsity", "word-codes", "classes"]
    umass = inspection.coherence(model, X, "u_mass")
    npmi = inspection.coherence(model, X, "npmi")
    for k, topic in enumerate(inspection.top_words(model, train.vocabulary)):
        assert f"Topic {k}" in parts.text
        assert f"UMass {umass[k]:.3f} · NPMI {npmi[k]:.3f}" in parts.text
        for term, weight in topic:
            assert f"{term} {weight:.4f}" in parts.text
    sparsity = inspection.code_sparsity(model, X)
    assert f"{100 * sparsity['word_zero_share']:.1f} %" in parts.text
    assert f"{100 * sparsity['document_zero_share']:.1f} %" in parts.text
    assert f"{model.objective_[-1]:.6g}" in parts.text
    assert f"{model.fit_time_:.2f} s" in parts.text
    # objective, active topics, word codes, class codes: no confusion matrix for STC
    assert [image["alt"] for image in parts.images] == [
        "objective after each outer iteration",
        "number of non-zero topics per word code and per document code",
        "average word codes of chosen words", "average document code per class"]


def test_medstc_page_adds_the_confusion_matrix(medstc_page, data):
    model, path = medstc_page
    _, _, X_test, y_test, _ = data
    parts = parse(path)
    assert parts.images[-1]["alt"] == "confusion matrix"
    assert f"{model.refit_train_accuracy_:.3f}" in parts.text


def test_report_refuses_bad_labels(stc_page, data, tmp_path):
    model, _ = stc_page
    X, y, _, _, _ = data
    with pytest.raises(ValueError, match="one label per document"):
        stc.report(model, X, tmp_path / "r.html", y[:-1])
    with pytest.raises(ValueError, match="one name per class"):
        stc.report(model, X, tmp_path / "r.html", y, class_names=["a"])


@pytest.mark.parametrize("n_docs, described", [(3, "3 documents"), (1, "1 document")])
@brief_fit
def test_a_page_on_empty_documents_says_so(stc_page, data, tmp_path, n_docs, described):
    # it showed "nan topics per word code", with numpy's RuntimeWarnings
    model, _ = stc_page
    empty = data[0][:n_docs] * 0
    page = stc.report(model, empty, tmp_path / "empty.html").read_text(encoding="utf-8")
    assert (f"No word of the model&#x27;s terms occurs in the {described} described: there "
            "are no word codes, and the document codes are zero." in page)
    assert "topics per word code" not in page  # the stat that was NaN


@brief_fit
def test_class_names_name_the_labels_of_y_when_y_lacks_a_class(data, tmp_path):
    # the confusion matrix wanted a name per class of the model, the page one per label of
    # y: no class_names satisfied both
    X, y, _, _, train = data
    model = MedSTC(n_topics=3, max_iter=2, random_state=0).fit(X, y)
    present = y != y.max()
    path = stc.report(model, X[present], tmp_path / "r.html", y[present],
                      class_names=train.target_names[:-1])
    assert parse(path).images[-1]["alt"] == "confusion matrix"


# ---------------------------------------------------------------------------
# In a real browser
# ---------------------------------------------------------------------------

def find_browser():
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def _high_fd(fd):
    """A close-on-exec copy of ``fd`` numbered 10 or above; ``fd`` is closed."""
    copy = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return copy


class DevToolsPipe:
    """A headless Chromium driven over the DevTools protocol on a pipe."""

    def __init__(self, executable, profile_dir):
        # Parent ends above fd 10, so that the child can place its ends on 3 and 4
        # without overwriting one with the other.
        to_browser_read, to_browser_write = (_high_fd(fd) for fd in os.pipe())
        from_browser_read, from_browser_write = (_high_fd(fd) for fd in os.pipe())
        self._to_browser, self._from_browser = to_browser_write, from_browser_read

        def map_pipes():  # in the child, before exec: the browser reads fd 3, writes fd 4
            os.dup2(to_browser_read, 3)
            os.dup2(from_browser_write, 4)

        self.process = subprocess.Popen(
            [executable, "--headless", "--remote-debugging-pipe", "--no-sandbox",
             "--disable-gpu", "--no-first-run", "--no-default-browser-check",
             "--disable-extensions", "--hide-scrollbars", f"--user-data-dir={profile_dir}",
             "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=map_pipes, pass_fds=(3, 4))
        os.close(to_browser_read)
        os.close(from_browser_write)
        self._messages = queue.Queue()
        self._next_id = 0
        self.events = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        buffer = b""
        while True:
            chunk = os.read(self._from_browser, 65536)
            if not chunk:
                self._messages.put(None)
                return
            buffer += chunk
            *complete, buffer = buffer.split(b"\0")
            for message in complete:
                self._messages.put(json.loads(message))

    def _next_message(self, deadline):
        try:
            message = self._messages.get(timeout=max(deadline - time.monotonic(), 0.01))
        except queue.Empty:
            raise TimeoutError("the browser did not answer in time") from None
        if message is None:
            raise RuntimeError("the browser closed the DevTools pipe")
        return message

    def call(self, method, session=None, timeout=60, **params):
        self._next_id += 1
        request = {"id": self._next_id, "method": method, "params": params}
        if session:
            request["sessionId"] = session
        os.write(self._to_browser, json.dumps(request).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            message = self._next_message(deadline)
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]
            self.events.append(message)

    def wait_for(self, method, timeout=60):
        deadline = time.monotonic() + timeout
        for event in self.events:
            if event.get("method") == method:
                return event
        while True:
            message = self._next_message(deadline)
            self.events.append(message)
            if message.get("method") == method:
                return message

    def close(self):
        try:
            self.call("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)


IMAGES_SCRIPT = """JSON.stringify(Array.from(document.images).map(image => ({
    alt: image.alt, complete: image.complete,
    width: image.naturalWidth, height: image.naturalHeight})))"""


def open_in_browser(page, screenshot, width=1280):
    """Load ``page``; return (console errors, images, requested URLs) and save a screenshot."""
    executable = find_browser()
    if executable is None:
        message = (f"no Chromium found on PATH (looked for {', '.join(BROWSERS)}); "
                   "install Debian's chromium package to run the browser test")
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    browser = DevToolsPipe(executable, screenshot.parent / "browser-profile")
    try:
        target = browser.call("Target.createTarget", url="about:blank")["targetId"]
        session = browser.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            browser.call(f"{domain}.enable", session=session)
        browser.call("Emulation.setDeviceMetricsOverride", session=session, width=width,
                     height=900, deviceScaleFactor=1, mobile=False)
        browser.call("Page.navigate", session=session, url=page.resolve().as_uri())
        browser.wait_for("Page.loadEventFired")
        images = json.loads(browser.call("Runtime.evaluate", session=session,
                                         expression=IMAGES_SCRIPT)["result"]["value"])
        shot = browser.call("Page.captureScreenshot", session=session, format="png",
                            captureBeyondViewport=True)
        screenshot.write_bytes(base64.b64decode(shot["data"]))
    finally:
        browser.close()
    errors = []
    for event in browser.events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            errors.append(f"console.{params['type']}: {params.get('args')}")
        elif method == "Runtime.exceptionThrown":
            errors.append(f"exception: {params.get('exceptionDetails')}")
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            errors.append(f"log: {params['entry'].get('text')} {params['entry'].get('url', '')}")
        elif method == "Network.loadingFailed":
            errors.append(f"failed to load: {params.get('errorText')}")
    requested = [event["params"]["request"]["url"] for event in browser.events
                 if event.get("method") == "Network.requestWillBeSent"]
    return errors, images, requested


@pytest.mark.parametrize("which", ["stc_page", "medstc_page"])
def test_page_renders_in_chromium(which, request, tmp_path):
    _, page = request.getfixturevalue(which)
    screenshot = tmp_path / f"{page.stem}.png"
    errors, images, requested = open_in_browser(page, screenshot)
    assert errors == []
    assert len(images) == len(parse(page).images) >= 4
    for image in images:
        assert image["complete"] and image["width"] > 100 and image["height"] > 100, image
    # nothing but the page itself (and its inline data) was fetched: it works offline
    assert all(url == page.resolve().as_uri() or url.startswith("data:") for url in requested), \
        requested
    png = screenshot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert width == 1280 and height > 2000  # the whole page, not only the first screen
    keep = os.environ.get("STC_REPORT_SCREENSHOT_DIR")
    if keep:  # to look at the page: STC_REPORT_SCREENSHOT_DIR=/some/dir pytest ...
        shutil.copy(screenshot, os.path.join(keep, screenshot.name))
