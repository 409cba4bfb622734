"""Sphinx configuration: python -m sphinx -W -b html docs docs/_build/html"""
import stc

project = "stc"
author = "the stc developers"
copyright = "the stc developers"
release = stc.__version__
version = release

extensions = [
    "myst_parser",  # the pages are Markdown (MyST)
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",  # docstrings use the numpydoc format
    "sphinxarg.ext",  # the command-line reference, from stc.cli.build_parser
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "generated/*.md", "examples/**", "README.md"]

myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3

autosummary_generate = True
autodoc_default_options = {"members": True, "inherited-members": False}
numpydoc_show_class_members = False  # autosummary lists the members
numpydoc_class_members_toctree = False
default_role = "py:obj"  # `name` links to the API reference when it can

html_theme = "pydata_sphinx_theme"
html_title = f"stc {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}
html_static_path = []


def skip_scikit_learn_members(app, what, name, obj, skip, options):
    """Leave out what the estimators inherit from scikit-learn (documented there)."""
    module = getattr(obj, "__module__", None) or ""
    if module.startswith("sklearn") or (name.startswith("set_") and name.endswith("_request")):
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", skip_scikit_learn_members)
