"""The pictures of the README and the docs: made by docs/make_images.py, never stale.

docs/images/report.png records, as PNG text chunks, the rows of the parameter table it
shows. They must be the parameters the estimator has today, with the values a report
drawn today shows; every picture the README and the docs pages show must be one that
docs/make_images.py makes (the report) or re-draws (the reproduction's figures).
"""
import importlib.util
import os
import re
from pathlib import Path

import pytest

from stc import MedSTC

from conftest import optional

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
IN_CI = os.environ.get("CI") == "true"
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")


def load_make_images():
    spec = importlib.util.spec_from_file_location("make_images", ROOT / "docs" / "make_images.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def make_images():
    return load_make_images()


def shown_images():
    """(page, image file) of every picture a README or docs page shows."""
    for page in PAGES:
        for target in IMAGE.findall(page.read_text(encoding="utf-8")):
            yield page, (page.parent / target).resolve()


def test_every_picture_shown_is_made_by_the_script(make_images):
    made = {make_images.REPORT_PNG.resolve()} | {p.resolve() for p in make_images.REPRODUCTION_FIGURES}
    shown = list(shown_images())
    assert {image for _, image in shown} >= {make_images.REPORT_PNG.resolve()}
    for page, image in shown:
        assert image.is_file(), f"{page.name} shows {image}, which does not exist"
        assert image in made, f"{page.name} shows {image}, which docs/make_images.py does not make"


def test_report_picture_shows_exactly_the_estimators_parameters(make_images):
    rows = make_images.pictured_parameters()
    names = [name for name, _ in rows]
    model = MedSTC(**make_images.REPORT_SETTINGS)
    assert names == sorted(model.get_params()), (
        "docs/images/report.png shows other parameters than MedSTC has: "
        "run python docs/make_images.py")


def test_report_picture_shows_the_values_of_a_report_drawn_now(make_images, tmp_path):
    """The picture's parameter table is the table of a page written by the current code."""
    optional("matplotlib")
    _, page = make_images.report_page(tmp_path)
    assert make_images.pictured_parameters() == make_images.parameter_rows(page), (
        "docs/images/report.png shows another parameter table than stc.report writes "
        "today: run python docs/make_images.py")


def test_the_script_makes_the_picture(make_images, tmp_path):
    """docs/make_images.py end to end, into a temporary file: fit, report, browser."""
    optional("matplotlib")
    if make_images.find_browser() is None:
        message = "no Chromium found on PATH: docs/make_images.py needs one"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    output = tmp_path / "report.png"
    rows = make_images.make_report_png(output)
    data = output.read_bytes()
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (make_images.WIDTH, make_images.HEIGHT)
    assert make_images.pictured_parameters(output) == rows == make_images.pictured_parameters()


def test_png_text_chunks_round_trip(make_images, tmp_path):
    data = make_images.REPORT_PNG.read_bytes()
    path = tmp_path / "copy.png"
    path.write_bytes(make_images.with_text(data, {"stc:test": "[1, 2]"}))
    texts = make_images.read_text(path)
    assert texts["stc:test"] == "[1, 2]"
    assert texts[make_images.PARAMETERS_KEY] == make_images.read_text(
        make_images.REPORT_PNG)[make_images.PARAMETERS_KEY]
