"""The source distribution: what `python -m build --sdist` puts in it, and its version.

Needs the source checkout (it builds from it) and the `build` package; the check of an
installed wheel (tools/check_wheel.sh) runs the tests without a checkout and skips it.
"""
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import stc
from conftest import optional

ROOT = Path(__file__).resolve().parent.parent
needs_checkout = pytest.mark.skipif(
    not (ROOT / "pyproject.toml").exists() or not (ROOT / "stc").is_dir(),
    reason="builds the sdist from the source checkout (not there: tests run from a copy)")


@pytest.fixture(scope="module")
def sdist(tmp_path_factory):
    """(names inside the top folder, PKG-INFO text) of a freshly built sdist."""
    optional("build")
    # From a copy of the checkout with what a build leaves in it (.c and compiled modules,
    # which must stay out) but without an old *.egg-info, whose file list setuptools reuses.
    source = tmp_path_factory.mktemp("source") / "checkout"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", "*.egg-info", "dist", ".ci-venv", "_build", ".cache", ".hypothesis"))
    out = tmp_path_factory.mktemp("sdist")
    # Without isolation: the build requirements of an sdist are setuptools (Cython and
    # numpy are imported by setup.py, so they are needed too), all in the test extra.
    done = subprocess.run([sys.executable, "-m", "build", "--sdist", "--no-isolation",
                           "--skip-dependency-check", "--outdir", str(out), str(source)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    (archive,) = out.glob("*.tar.gz")
    with tarfile.open(archive) as tar:
        top = f"sparse_topical_coding-{stc.__version__}/"
        names = {m.name[len(top):] for m in tar.getmembers() if m.isfile()}
        assert all(m.name.startswith(top) or m.name == top[:-1] for m in tar.getmembers())
        info = tar.extractfile(top + "PKG-INFO").read().decode()
    return names, info


@needs_checkout
def test_sdist_holds_the_sources_data_tests_and_examples(sdist):
    names, _ = sdist
    extensions = ["stc/losses/_base", "stc/losses/_builtin", "stc/losses/_testing",
                  "stc/_core/_coding", "stc/_core/_simplex", "stc/_core/_sparse_ops",
                  "stc/_core/_segments", "stc/_core/_openmp", "stc/_simd/_dispatch",
                  "stc/_simd/_throughput"]
    required = {module + ".pyx" for module in extensions} | {
        "stc/losses/_base.pxd", "setup.py", "pyproject.toml", "README.md", "CHANGELOG.md",
        "LICENSE", "stc/_simd/_levels.h", "stc/_simd/_dispatch.pxd",
        "stc/_simd/_throughput.h", "stc/_core/_coding_vectors.h", "stc/_core/_coding.pxd",
        "stc/losses/_builtin_vectors.h",
        "stc/datasets/data/newsgroups3.npz", "stc/datasets/data/stopwords.txt",
        "tests/conftest.py", "tests/fuzz_fit_worker.py", "tests/fuzz_profile.py",
        "docs/examples/python_loss.py", "docs/examples/compiled_loss/setup.py",
        "docs/examples/compiled_loss/pseudo_huber.pyx",
        "docs/examples/compiled_loss/use_compiled_loss.py"}
    assert required <= names, sorted(required - names)
    # every test module of the checkout
    assert {f"tests/{p.name}" for p in (ROOT / "tests").glob("test_*.py")} <= names


@needs_checkout
def test_sdist_holds_nothing_generated(sdist):
    names, _ = sdist
    generated = [name for name in names
                 if name.endswith((".c", ".so", ".pyd", ".pyc", ".html"))
                 or name.startswith("build/") or "/build/" in name or "__pycache__" in name]
    assert generated == []


@needs_checkout
def test_sdist_metadata_has_the_distribution_name_and_stc_version(sdist):
    _, info = sdist
    assert "\nName: sparse-topical-coding\n" in info
    assert f"\nVersion: {stc.__version__}\n" in info
    # PEP 639: the SPDX expression and the license file it ships
    assert "\nLicense-Expression: BSD-3-Clause\n" in info
    assert "\nLicense-File: LICENSE\n" in info
    assert "\nAuthor: the stc developers\n" in info
    assert "\nProject-URL: Paper, https://arxiv.org/abs/1202.3778\n" in info
