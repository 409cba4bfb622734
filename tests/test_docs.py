"""Every code example of the documentation runs, and prints what the page says.

The pages are Markdown (MyST). In each page of docs/*.md:

* every ``python`` code block runs, in order, in one namespace per page: a
  block of ``>>>`` examples as a doctest (output compared with ELLIPSIS and
  whitespace normalisation), any other block with ``exec``;
* a ``text`` block right after an ``<!-- output of: COMMAND -->`` comment is
  the output of COMMAND, run from the repository root in a temporary copy of
  docs/examples (``python`` is this interpreter), compared the same way;
* a block right after a ``<!-- file: PATH -->`` comment shows the file PATH
  (relative to the repository root) and must equal it; it is not run itself
  (the file runs through an ``output of`` command);
* no ``>>>`` example hides outside a ``python`` block, and code blocks use
  only the languages listed in LANGUAGES, so none escapes these checks;
* every warning an example or command gives is shown on its page (its
  message, numbers aside), so a reader sees what a run prints.
"""
import doctest
import importlib
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from conftest import brief_fit

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").glob("*.md"))
# languages of blocks that are not run: shell sessions, Cython, program output, and the
# Sphinx directives of the site's index and API pages (a table of contents, autosummary)
LANGUAGES = {"python", "console", "cython", "text", "{toctree}", "{eval-rst}"}
MARKER = re.compile(r"<!--\s*(?P<kind>output of|file):\s*(?P<value>.+?)\s*-->")
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def code_blocks(path):
    """(language, code, first line number, marker) of each fenced block.

    marker is None, ("output of", command) or ("file", path).
    """
    blocks, lines = [], path.read_text(encoding="utf-8").splitlines()
    fence, start, language, body, command, pending = None, 0, "", [], None, None
    for number, line in enumerate(lines, 1):
        if fence is None:
            opening = re.match(r"^(```+|~~~+)\s*(\{?[\w-]*\}?)", line)
            marker = MARKER.search(line)
            if marker:
                pending = (marker.group("kind"), marker.group("value"))
            elif opening:
                fence, start, language, body = opening.group(1), number, opening.group(2), []
                command, pending = pending, None
            elif line.strip():
                pending = None
        elif line.startswith(fence) and not line[len(fence):].strip():
            blocks.append((language, "\n".join(body) + "\n", start, command))
            fence = None
        else:
            body.append(line)
    assert fence is None, f"{path.name}: code block opened on line {start} is never closed"
    return blocks


def test_pages_are_found():
    names = {page.name for page in PAGES}
    assert {"quickstart.md", "user_guide.md", "inspecting.md", "custom_losses.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_no_example_escapes_the_checks(page):
    blocks = code_blocks(page)
    for language, code, line, marker in blocks:
        assert language in LANGUAGES, \
            f"{page.name}:{line}: code block in {language!r} (run it or list the language)"
        if marker and marker[0] == "output of":
            assert language == "text", f"{page.name}:{line}: an output marker must precede a text block"
        if marker and marker[0] == "file":
            source = (ROOT / marker[1]).read_text(encoding="utf-8")
            assert code.strip() == source.strip(), \
                f"{page.name}:{line}: the block differs from {marker[1]}"
    inside = set()
    for _, code, line, _ in blocks:
        inside.update(range(line, line + code.count("\n") + 2))
    for number, text in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if text.lstrip().startswith(">>>"):
            assert number in inside, f"{page.name}:{number}: a >>> example outside a code block"
    for language, code, line, _ in blocks:
        if ">>>" in code:
            assert language == "python", f"{page.name}:{line}: >>> examples in a {language} block"


def run_python_blocks(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    namespace = {"__name__": "__docs__"}
    parser, runner = doctest.DocTestParser(), doctest.DocTestRunner(optionflags=FLAGS)
    ran = 0
    for language, code, line, marker in code_blocks(page):
        if language != "python" or marker:  # a file's copy runs as that file
            continue
        ran += 1
        if ">>>" in code:
            test = parser.get_doctest(code, namespace, f"{page.name}:{line}", str(page), line)
            output = []
            result = runner.run(test, out=output.append, clear_globs=False)
            namespace.update(test.globs)  # the doctest ran on a copy
            assert result.failed == 0, "".join(output)
        else:
            exec(compile(code, f"{page.name}:{line}", "exec"), namespace)
    return ran


def without_numbers(text):
    """``text`` with its whitespace normalised and each number replaced by #."""
    return re.sub(r"\d+(\.\d+)?(e-?\d+)?", "#", " ".join(text.split()))


def assert_shown(page, messages):
    """Each warning message is on ``page`` (the numbers may differ: one note covers a loop)."""
    text = without_numbers(page.read_text(encoding="utf-8"))
    for message in messages:
        assert without_numbers(message) in text, \
            f"{page.name}: an example warns, and the page does not show it: {message}"


# Pages and commands whose examples take more than ten seconds (fits of the embedded corpus,
# a pure-Python loss, compiling an extension): slow. What they run is tested in the
# default run too (test_cli.py, test_persistence.py, test_custom_losses.py, ...).
SLOW_PAGES = {"user_guide.md"}
SLOW_COMMANDS = ("cli_walkthrough.sh", "model_files.py", "python_loss.py", "build_ext")


def slow_if(condition):
    return pytest.mark.slow if condition else ()


@pytest.mark.parametrize("page", [
    pytest.param(p, marks=slow_if(p.name in SLOW_PAGES), id=p.name) for p in PAGES
    if any(language == "python" and not marker for language, _, _, marker in code_blocks(p))])
def test_python_examples_run(page, tmp_path, monkeypatch):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert run_python_blocks(page, tmp_path, monkeypatch) > 0
    assert_shown(page, {str(warning.message) for warning in caught})


OUTPUTS = [pytest.param(page, line, marker[1], expected, id=f"{page.name}:{line}",
                        marks=slow_if(any(slow in marker[1] for slow in SLOW_COMMANDS)))
           for page in PAGES for language, expected, line, marker in code_blocks(page)
           if marker and marker[0] == "output of"]


@pytest.mark.parametrize("page, line, command, expected", OUTPUTS)
def test_printed_output_is_what_the_command_prints(page, line, command, expected, tmp_path):
    if "build_ext" in command and not any(shutil.which(cc) for cc in ("cc", "gcc")):
        pytest.skip("building the compiled example needs a C compiler")
    shutil.copytree(ROOT / "docs" / "examples", tmp_path / "docs" / "examples",
                    ignore=shutil.ignore_patterns("build", "*.so", "*.c", "__pycache__"))
    environment = dict(os.environ, PYTHONDONTWRITEBYTECODE="1",
                       PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    result = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True,
                            text=True, timeout=600, env=environment)
    assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
    checker = doctest.OutputChecker()
    assert checker.check_output(expected, result.stdout, FLAGS), (
        f"{page.name}:{line}: the page shows\n{expected}\nbut `{command}` prints\n"
        f"{result.stdout}")
    assert_shown(page, re.findall(r"\w+Warning: (.*)", result.stderr))


# The README is the front page: short, its two commands verbatim (.ci/run runs them), its
# Python example runs, and what it leaves to the documentation is on pages of the site.
README = ROOT / "README.md"
DEMO_COMMAND = "pip install -e . && python -m stc"
TEST_COMMAND = "pip install -e '.[test]' && pytest"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def heading_anchors(page):
    """The anchors of a Markdown page's headings, as GitHub and MyST name them."""
    anchors = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^#{1,6}\s+(.*?)\s*$", line)
        if heading:
            text = re.sub(r"[^\w\- ]", "", heading.group(1).lower().replace("`", ""))
            anchors.add(text.replace(" ", "-"))
    return anchors


def test_readme_is_a_front_page():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 120, f"README.md has {len(lines)} lines; the rest belongs in docs/"
    # the demo and test commands, each alone on an indented line, as .ci/run runs them
    assert f"    {DEMO_COMMAND}" in lines and f"    {TEST_COMMAND}" in lines
    assert f"({TEST_COMMAND})" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    blocks = code_blocks(README)
    assert [language for language, *_ in blocks] == ["python", "console"]
    assert len(blocks[0][1].splitlines()) <= 10 and len(blocks[1][1].splitlines()) <= 5


def test_readme_links_lead_to_pages_of_the_site():
    toctree = re.search(r"```\{toctree\}\n(.*?)```", (ROOT / "docs" / "index.md").read_text(
        encoding="utf-8"), re.S).group(1).split()
    for target in LINK.findall(README.read_text(encoding="utf-8")):
        assert "://" not in target, f"README.md links outside the repository: {target}"
        path, _, anchor = target.partition("#")
        file = ROOT / path
        assert file.exists(), f"README.md links to {path}, which does not exist"
        if file.parent == ROOT / "docs" and file.suffix == ".md" and file.stem != "index":
            assert file.stem in toctree, f"README.md links to {path}, which is not in the site"
        if anchor:
            assert anchor in heading_anchors(file), f"README.md links to {target}: no such heading"


@brief_fit
def test_readme_python_example_runs(tmp_path, monkeypatch, capsys):
    assert run_python_blocks(README, tmp_path, monkeypatch) == 1
    printed = capsys.readouterr().out.splitlines()
    assert 0.0 <= float(printed[-1]) <= 1.0  # the MedSTC accuracy


# A dotted name starting with "stc." in a page (not part of a path or a file name).
STC_NAME = re.compile(r"(?<![\w/.\-])stc(?:\.[A-Za-z_]\w*)+")


def resolve(name):
    """The object a dotted ``stc.`` name names: the longest importable module, then attributes."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            target = getattr(target, attribute)
        return target
    raise ImportError(name)


@pytest.mark.parametrize("page", PAGES + [README], ids=lambda page: page.name)
def test_every_stc_name_a_page_mentions_exists(page):
    names = sorted(set(STC_NAME.findall(page.read_text(encoding="utf-8"))))
    missing = []
    for name in names:
        try:
            resolve(name)
        except (ImportError, AttributeError):
            missing.append(name)
    assert not missing, f"{page.name} names what stc does not have: {missing}"


@pytest.mark.filterwarnings("error::sklearn.exceptions.ConvergenceWarning")
def test_the_quick_start_does_not_warn(tmp_path, monkeypatch):
    """The quick start's fits converge: they print nothing the page does not show."""
    assert run_python_blocks(ROOT / "docs" / "quickstart.md", tmp_path, monkeypatch) > 0
