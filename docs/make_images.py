"""The pictures of the README and the documentation, made from the current code.

Usage (from the repository root, with the ``[plot]`` extra and a Chromium on PATH)::

    python docs/make_images.py                  # docs/images/report.png
    python docs/make_images.py --reproduction   # and docs/reproduction/*.png

``docs/images/report.png`` is the top of the page ``stc.report`` writes for a small MedSTC
(6 topics, 3 outer iterations) fitted to every 6th training document of the embedded
corpus and described on every 6th test document, as a headless Chromium shows it. The
picture carries, as PNG text chunks, the rows of the page's parameter table and the stc
version that drew it; ``tests/test_images.py`` checks those rows against the estimator's
current parameters, so a picture that shows a parameter that no longer exists fails the
test suite.

The figures of ``docs/reproduction/`` are drawn by ``benchmarks/reproduce_paper.py``
from its cache of fits on the full 20 Newsgroups corpus (about ten hours of fitting on a
2-core machine from an empty cache, see ``docs/reproduction.md``). ``--reproduction``
re-draws them, and ``docs/reproduction.md`` with them, from that cache
(``reproduce_paper.py --cached-only``: seconds) and refuses when there is no cache.
"""
import argparse
import html.parser
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import warnings
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPORT_PNG = ROOT / "docs" / "images" / "report.png"
REPRODUCTION_FIGURES = tuple(ROOT / "docs" / "reproduction" / f"fig{n}.png" for n in range(2, 7))
REPRODUCTION_CACHE = ROOT / "benchmarks" / ".cache" / "reproduction"
# What the picture shows: MedSTC with these settings, fitted to every STEP-th training
# document, its report on every STEP-th test document; the top WIDTH x HEIGHT pixels of
# the page in a window of WIDTH / SCALE x HEIGHT / SCALE CSS pixels.
REPORT_SETTINGS = dict(n_topics=6, max_iter=3, random_state=0)
STEP = 6
WIDTH, HEIGHT, SCALE = 960, 1200, 0.75
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PARAMETERS_KEY = "stc:parameters"  # the PNG text chunk holding the parameter table's rows
VERSION_KEY = "stc:version"


def report_page(folder):
    """Fit the pictured model and write its report into ``folder``; return (model, page)."""
    import numpy as np

    import stc
    from stc import MedSTC
    from stc.datasets import load_newsgroups_split

    train, test = load_newsgroups_split()
    rows = np.arange(0, train.data.shape[0], STEP)
    with warnings.catch_warnings():  # 3 outer iterations are all the picture needs
        warnings.filterwarnings("ignore", message="MedSTC stopped at max_iter")
        model = MedSTC(**REPORT_SETTINGS).fit(train.data[rows], train.target[rows])
    page = stc.report(model, test.data[::STEP], Path(folder) / "report.html",
                      test.target[::STEP], vocabulary=train.vocabulary,
                      class_names=train.target_names)
    return model, page


class _ParameterTable(html.parser.HTMLParser):
    """The (name, value) rows of the table under the page's "Parameters" heading."""

    def __init__(self):
        super().__init__()
        self.rows, self._heading, self._state, self._cell = [], None, None, None

    def handle_starttag(self, tag, attrs):
        if tag == "h3":
            self._heading = ""
        elif tag == "table" and self._state == "after-heading":
            self._state = "table"
        elif tag in ("th", "td") and self._state == "table":
            self._cell = ""

    def handle_endtag(self, tag):
        if tag == "h3":
            self._state = "after-heading" if self._heading.strip() == "Parameters" else None
            self._heading = None
        elif tag == "table" and self._state == "table":
            self._state = "done"
        elif tag == "th" and self._cell is not None:
            self.rows.append([self._cell, None])
            self._cell = None
        elif tag == "td" and self._cell is not None:
            if self.rows and self.rows[-1][1] is None:
                self.rows[-1][1] = self._cell
            self._cell = None

    def handle_data(self, data):
        if self._heading is not None:
            self._heading += data
        if self._cell is not None:
            self._cell += data


def parameter_rows(page):
    """The rows of the parameter table of a report page, as [name, value] lists."""
    parser = _ParameterTable()
    parser.feed(Path(page).read_text(encoding="utf-8"))
    parser.close()
    return parser.rows


def find_browser():
    for name in BROWSERS:
        executable = shutil.which(name)
        if executable:
            return executable
    return None


def screenshot(page, width=WIDTH, height=HEIGHT, scale=SCALE):
    """The top ``width`` x ``height`` pixels of ``page`` in headless Chromium, as PNG bytes.

    The page is laid out in a window of ``width / scale`` x ``height / scale`` CSS pixels.
    """
    executable = find_browser()
    if executable is None:
        raise RuntimeError(f"no Chromium found on PATH (looked for {', '.join(BROWSERS)})")
    with tempfile.TemporaryDirectory() as profile:
        shot = Path(profile) / "shot.png"
        subprocess.run(
            [executable, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--no-default-browser-check", "--disable-extensions", "--hide-scrollbars",
             f"--user-data-dir={profile}", f"--force-device-scale-factor={scale}",
             f"--window-size={round(width / scale)},{round(height / scale)}",
             f"--screenshot={shot}", Path(page).resolve().as_uri()],
            check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, timeout=120)
        data = shot.read_bytes()
    if data[:8] != PNG_SIGNATURE:
        raise RuntimeError("the browser did not write a PNG")
    return data


def _chunks(data):
    """(type, body) of each chunk of PNG bytes."""
    if data[:8] != PNG_SIGNATURE:
        raise ValueError("not a PNG file")
    position = 8
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        yield kind, data[position + 8:position + 8 + length]
        position += 12 + length


def with_text(data, texts):
    """PNG bytes with a tEXt chunk for each (keyword, text) of ``texts`` after the header."""
    first = 8 + 12 + struct.unpack(">I", data[8:12])[0]  # signature, then the IHDR chunk
    extra = b""
    for keyword, text in texts.items():
        body = keyword.encode("latin-1") + b"\0" + text.encode("latin-1")
        extra += (struct.pack(">I", len(body)) + b"tEXt" + body
                  + struct.pack(">I", zlib.crc32(b"tEXt" + body)))
    return data[:first] + extra + data[first:]


def read_text(path):
    """The tEXt chunks of a PNG file as a {keyword: text} dict."""
    texts = {}
    for kind, body in _chunks(Path(path).read_bytes()):
        if kind == b"tEXt":
            keyword, _, text = body.partition(b"\0")
            texts[keyword.decode("latin-1")] = text.decode("latin-1")
    return texts


def pictured_parameters(path=REPORT_PNG):
    """The parameter rows a report picture shows, as recorded when it was made."""
    texts = read_text(path)
    if PARAMETERS_KEY not in texts:
        raise ValueError(f"{path} records no parameters: make it with docs/make_images.py")
    return json.loads(texts[PARAMETERS_KEY])


def make_report_png(output=REPORT_PNG):
    """Fit, report, screenshot: write the report picture to ``output``; return its rows."""
    import stc

    with tempfile.TemporaryDirectory() as folder:
        model, page = report_page(folder)
        rows = parameter_rows(page)
        names = [name for name, _ in rows]
        if sorted(names) != sorted(model.get_params()):
            raise RuntimeError(f"the report's parameter table lists {names}, "
                               f"the estimator has {sorted(model.get_params())}")
        data = screenshot(page)
    data = with_text(data, {PARAMETERS_KEY: json.dumps(rows), VERSION_KEY: stc.__version__})
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_bytes(data)
    return rows


def make_reproduction_figures():
    """Re-draw docs/reproduction/*.png (and docs/reproduction.md) from the cached fits."""
    if not REPRODUCTION_CACHE.is_dir():
        raise RuntimeError(
            f"no cached fits under {REPRODUCTION_CACHE.relative_to(ROOT)}: run "
            "python benchmarks/bench_sparsity.py && python benchmarks/reproduce_paper.py "
            "first (about ten hours on a 2-core machine, the full 20 Newsgroups corpus)")
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "reproduce_paper.py"),
                    "--cached-only"], check=True, cwd=ROOT)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python docs/make_images.py",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--reproduction", action="store_true",
                        help="also re-draw docs/reproduction/*.png from "
                             "benchmarks/reproduce_paper.py's cached fits")
    args = parser.parse_args(argv)
    rows = make_report_png()
    print(f"wrote {REPORT_PNG.relative_to(ROOT)} ({len(rows)} parameters: "
          f"{', '.join(name for name, _ in rows)})")
    if args.reproduction:
        try:
            make_reproduction_figures()
        except RuntimeError as error:
            print(f"python docs/make_images.py: {error}", file=sys.stderr)
            return 1
        print(f"re-drew {', '.join(str(p.relative_to(ROOT)) for p in REPRODUCTION_FIGURES)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
