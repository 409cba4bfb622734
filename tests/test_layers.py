"""The package's layers: folders in one declared order, no cycle, no import upwards.

Each folder of ``stc/`` is a layer, bottom first in `LAYERS`: the vector levels, the
losses (which own their vector code), the coding and dictionary kernels, the shared checks, learning (coding, the dictionary, the learners, MedSTC's learning
steps), the estimators; the package's own modules (the public face and the user's tools:
readers, inspection, plotting, report, the command line) are the top. A module may import
from its own layer and the layers below, never above, so no two folders import each other.

The import graph is read from the sources: every import statement of the .py files
(function-level ones included) and the ``import`` and ``cimport`` lines of the Cython
.pyx and .pxd files, so an import made only on some code path counts too. Importing
``a.b.c`` runs the package ``a.b`` first: from outside that package the graph has an edge
to it as well.
"""
import ast
import importlib
import pathlib
import re
import subprocess
import sys
import warnings

import pytest

import stc

PACKAGE = pathlib.Path(stc.__file__).parent
# The folders of stc/, bottom first; "" is the package's own modules, on top.
LAYERS = ["_simd", "losses", "_core", "_utils", "_learning", "_learning/learners",
          "_learning/supervised", "_estimators", "datasets", ""]
# The version is a literal of stc/__init__.py, which Python runs before any module of the
# package: reading it depends on no layer above.
PACKAGE_LITERALS = {"__version__"}
ESTIMATORS = {"stc._estimators.stc", "stc._estimators.medstc"}
# The estimators themselves and the layers above them (the package's lazy public names,
# the command line): the only importers of the estimators.
ABOVE_THE_ESTIMATORS = {"stc", "stc.__main__", "stc.cli"} | ESTIMATORS
CYTHON_IMPORT = re.compile(r"^[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+c?import[ \t]+(\([^)]*\)|[\w, \t]+)"
                           r"|^[ \t]*c?import[ \t]+([\w.]+)", re.MULTILINE)


def module_name(path):
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_files():
    """Every .py, .pyx and .pxd file of the package."""
    paths = [path for suffix in ("*.py", "*.pyx", "*.pxd") for path in PACKAGE.rglob(suffix)]
    return sorted(path for path in paths if "build" not in path.relative_to(PACKAGE).parts)


def source_modules():
    """{module name: path} of every .py and .pyx file of the package."""
    return {module_name(path): path for path in source_files() if path.suffix != ".pxd"}


MODULES = source_modules()


def is_package(name):
    return MODULES.get(name, pathlib.Path()).name == "__init__.py"


def absolute(base, level, package):
    if not level:
        return base
    anchor = package.split(".")
    anchor = anchor[:len(anchor) - (level - 1)]
    return ".".join(anchor + ([base] if base else []))


def imported_names(name, path):
    """(module, [names imported from it]) for every import statement of a source file."""
    text = path.read_text(encoding="utf-8")
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    if path.suffix in (".pyx", ".pxd"):
        for match in CYTHON_IMPORT.finditer(text):
            if match.group(3):
                yield match.group(3), []
            else:
                dots = len(match.group(1)) - len(match.group(1).lstrip("."))
                base = absolute(match.group(1).lstrip("."), dots, package)
                yield base, re.findall(r"\w+", match.group(2))
        return
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []
        elif isinstance(node, ast.ImportFrom):
            yield absolute(node.module or "", node.level, package), [a.name for a in node.names]


def targets_of(name, path):
    """The package's modules the import statements of one source file run."""
    targets = set()
    for module, names in imported_names(name, path):
        if module != "stc" and not module.startswith("stc."):
            continue
        found = {f"{module}.{n}" for n in names if f"{module}.{n}" in MODULES}
        if module == "stc":  # the package's public names load their module on first use
            found |= {stc._PUBLIC[n] for n in names if n in stc._PUBLIC}
            names = [n for n in names if n not in PACKAGE_LITERALS]
            if not names:
                continue
        targets |= found or {module}
        if len(found) < len(names) or not names:
            targets.add(module)
    for target in list(targets):
        parts = target.split(".")
        for i in range(1, len(parts)):
            parent = ".".join(parts[:i])
            if is_package(parent) and not (name == parent or name.startswith(parent + ".")):
                targets.add(parent)
    return {t for t in targets if t in MODULES and t != name}


def import_graph():
    """{module: set of the package's modules its import statements run}."""
    graph = {name: set() for name in MODULES}
    for path in source_files():
        graph[module_name(path)] |= targets_of(module_name(path), path)
    return graph


def layer_of(module):
    """The folder of a module, relative to stc/ ("" for the package's own modules)."""
    folder = MODULES[module].parent.relative_to(PACKAGE).as_posix()
    return "" if folder == "." else folder


def folder_imports(graph):
    """{(importing folder, imported folder): [module -> module, ...]} across folders."""
    edges = {}
    for name, targets in graph.items():
        for target in targets:
            pair = (layer_of(name), layer_of(target))
            if pair[0] != pair[1]:
                edges.setdefault(pair, []).append(f"{name} -> {target}")
    return edges


def reachable(graph, start):
    seen, todo = set(), [start]
    while todo:
        for target in graph[todo.pop()]:
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_the_graph_sees_the_estimators_importers():
    graph = import_graph()
    assert "stc._estimators.stc" in graph["stc._estimators.medstc"]
    # a function-level import counts too
    assert "stc._estimators.persistence" in graph["stc._estimators.stc"]
    assert "stc._estimators.stc" in graph["stc.cli"]  # through the package's public names


def test_the_graph_sees_cython_cimports():
    graph = import_graph()
    assert "stc._core._dense" in graph["stc._learning.supervised._qp"]
    assert "stc.losses._base" in graph["stc._core._coding"]
    assert "stc._core._word_codes" in graph["stc._core._sparse_ops"]  # a parenthesised cimport


def test_the_api_page_documents_the_public_face_only():
    """docs/api.md lists every public name of the package and nothing from a private module."""
    page = (pathlib.Path(__file__).resolve().parent.parent / "docs" / "api.md").read_text()
    documented = []
    for block in re.findall(r"```\{eval-rst\}(.*?)```", page, re.DOTALL):
        module = re.search(r"currentmodule:: ([\w.]+)", block).group(1)
        names = re.findall(r"^   (\w[\w.]*)$", block.split(":nosignatures:")[-1], re.MULTILINE)
        documented += [f"{module}.{name}" for name in names]
    private = [name for name in documented
               if any(part.startswith("_") for part in name.split(".")[:-1])]
    assert not private, f"private names on the API page: {private}"
    assert {f"stc.{name}" for name in stc.__all__} <= set(documented)
    assert all(not name.startswith("_") for name in stc._SUBMODULES)


def test_every_folder_has_its_layer():
    folders = {layer_of(name) for name in MODULES}
    assert folders == set(LAYERS), "declare each folder of stc/ in LAYERS, bottom first"


def test_no_two_folders_import_each_other():
    edges = folder_imports(import_graph())
    graph = {}
    for source, target in edges:
        graph.setdefault(source, set()).add(target)
        graph.setdefault(target, set())
    cycles = sorted(folder for folder in graph if folder in reachable(graph, folder))
    assert not cycles, f"folders that import themselves back: {cycles}"


def test_no_folder_imports_a_layer_above_it():
    edges = folder_imports(import_graph())
    upwards = {f"{source or 'stc'} imports {target or 'stc'}": found
               for (source, target), found in edges.items()
               if LAYERS.index(target) > LAYERS.index(source)}
    assert not upwards


def test_no_import_cycle():
    graph = import_graph()
    cycles = sorted(name for name in graph if name in reachable(graph, name))
    assert not cycles, f"modules that import themselves back: {cycles}"


def test_nothing_below_the_estimators_imports_them():
    graph = import_graph()
    offenders = {name: sorted(reachable(graph, name) & ESTIMATORS) for name in graph
                 if name not in ABOVE_THE_ESTIMATORS}
    assert not {name: found for name, found in offenders.items() if found}


@pytest.mark.parametrize("name", sorted(name for name, path in MODULES.items()
                                        if path.suffix == ".py" and name != "stc.__main__"))
def test_every_module_imports(name):
    importlib.import_module(name)


@pytest.mark.slow  # imports every module in a fresh process
def test_the_lower_modules_run_without_the_estimators():
    """Importing every module below the estimators (all at once) loads neither of them."""
    lower = sorted(name for name in MODULES if name not in ABOVE_THE_ESTIMATORS)
    code = (f"import importlib, sys\nfor name in {lower!r}:\n    importlib.import_module(name)\n"
            f"print(sorted(set(sys.modules) & {ESTIMATORS!r}))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "[]"


def test_load_finds_the_estimators_in_a_fresh_process(tmp_path):
    """The model-file code knows the estimators only once they registered: `stc.load` sees to it."""
    import numpy as np
    import scipy.sparse as sp

    from stc import MedSTC
    from stc._estimators.persistence import ESTIMATORS as registered

    assert registered["STC"] is stc.STC and registered["MedSTC"] is MedSTC
    rng = np.random.RandomState(0)
    X = sp.csr_matrix(rng.poisson(1.0, size=(20, 12)).astype(float))
    path = tmp_path / "medstc.npz"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a two-iteration fit does not converge
        model = MedSTC(n_topics=2, max_iter=2, random_state=0).fit(X, np.arange(20) % 2)
    model.save(path)
    code = f"import stc; print(type(stc.load({str(path)!r})).__name__)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "MedSTC"
