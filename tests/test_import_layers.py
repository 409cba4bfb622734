"""The package's layers: no import cycle, and nothing below the estimators imports them.

The import graph is read from the sources (every import statement, function-level ones
included; the compiled modules' Python imports by their ``from stc... import`` lines),
so an import made only on some code path counts too. Importing ``a.b.c`` runs the
package ``a.b`` first: from outside that package the graph has an edge to it as well.
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
ESTIMATORS = {"stc._stc", "stc.supervised.medstc"}
# The estimators themselves and the layers above them (the package's lazy public names,
# the command line, the supervised package's namespace): the only importers of the estimators.
ABOVE_THE_ESTIMATORS = {"stc", "stc.__main__", "stc.cli", "stc.supervised"} | ESTIMATORS
PYX_IMPORT = re.compile(r"^\s*from\s+(stc[\w.]*)\s+import\s+([\w, ()]+)|^\s*import\s+(stc[\w.]*)",
                        re.MULTILINE)


def module_name(path):
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_modules():
    """{module name: path} of every .py and .pyx file of the package."""
    paths = sorted(PACKAGE.rglob("*.py")) + sorted(PACKAGE.rglob("*.pyx"))
    return {module_name(path): path for path in paths if "build" not in path.parts}


MODULES = source_modules()


def is_package(name):
    return MODULES.get(name, pathlib.Path()).name == "__init__.py"


def imported_names(name, path):
    """(module, [names imported from it]) for every import statement of a module."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".pyx":
        for match in PYX_IMPORT.finditer(text):
            if match.group(3):
                yield match.group(3), []
            else:
                yield match.group(1), re.findall(r"\w+", match.group(2))
        return
    package = name if is_package(name) else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            yield base, [alias.name for alias in node.names]


def import_graph():
    """{module: set of the package's modules its import statements run}."""
    graph = {}
    for name, path in MODULES.items():
        targets = set()
        for module, names in imported_names(name, path):
            if module != "stc" and not module.startswith("stc."):
                continue
            found = {f"{module}.{n}" for n in names if f"{module}.{n}" in MODULES}
            if module == "stc":  # the package's public names load their module on first use
                found |= {stc._PUBLIC[n] for n in names if n in stc._PUBLIC}
            targets |= found or {module}
            if len(found) < len(names) or not names:
                targets.add(module)
        for target in list(targets):
            parts = target.split(".")
            for i in range(1, len(parts)):
                parent = ".".join(parts[:i])
                if is_package(parent) and not (name == parent or name.startswith(parent + ".")):
                    targets.add(parent)
        graph[name] = {t for t in targets if t in MODULES and t != name}
    return graph


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
    assert "stc._stc" in graph["stc.supervised.medstc"]
    assert "stc.supervised.medstc" in graph["stc.supervised"]
    assert "stc._persistence" in graph["stc._stc"]  # a function-level import would count too
    assert "stc._stc" in graph["stc.cli"]           # through the package's public names


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
    lower = sorted(name for name in MODULES if name not in ABOVE_THE_ESTIMATORS
                   and not name.startswith("stc.supervised."))
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
    from stc._persistence import ESTIMATORS as registered

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
