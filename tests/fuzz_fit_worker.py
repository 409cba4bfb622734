"""Run fuzz cases of STC/MedSTC fits and report each as one JSON line (used by test_fuzz_fits.py).

Usage: python fuzz_fit_worker.py CASES.json

Every case builds its data from a seed, fits, and checks what must hold for
any fit: topics on the simplex, finite non-negative codes, objective_ never
rising, and the same fit bit for bit with 2 threads as with 1. A case of
bad input must raise ValueError or TypeError. Before each case the worker
prints {"start": i}, so that a parent that kills it on a time limit knows
which case hung.
"""
import json
import sys
import traceback
import warnings

import numpy as np
import scipy.sparse as sp


def make_data(case):
    rng = np.random.default_rng(case["seed"])
    n_docs, n_features = case["n_docs"], case["n_features"]
    counts = rng.poisson(case["rate"], (n_docs, n_features)).astype(np.float64)
    counts[:, 0] += counts.sum(axis=1) == 0  # no empty document
    loss = case["params"].get("loss", "poisson")
    if loss == "bernoulli":
        counts = np.sign(counts)
    elif loss == "gaussian":
        counts = counts * rng.uniform(0.5, 1.5, counts.shape)
    X = sp.csr_matrix(counts * case.get("data_scale", 1.0))
    y = rng.integers(0, case.get("n_classes", 2), n_docs)
    y[:2] = [0, 1]
    return X, y


def corrupt(X, y, how):
    """Bad input of kind ``how``; the fit must refuse it with ValueError or TypeError."""
    dense = X.toarray()
    if how == "nan":
        dense[0, 0] = np.nan
        return sp.csr_matrix(dense), y
    if how == "inf":
        dense[0, 0] = np.inf
        return sp.csr_matrix(dense), y
    if how == "negative":
        dense[0, 0] = -1.0
        return sp.csr_matrix(dense), y
    if how == "three_d":
        return dense[None], y
    if how == "no_rows":
        return sp.csr_matrix((0, X.shape[1])), y[:0]
    if how == "strings":
        return [["a"] * X.shape[1]] * X.shape[0], y
    if how == "labels_short":
        return X, y[:-1]
    if how == "one_class":
        return X, np.zeros_like(y)
    raise ValueError(how)


def check_fit(model, X, case, failures):
    from stc import MedSTC

    beta = model.components_
    if not (np.all(np.isfinite(beta)) and np.all(beta >= 0)):
        failures.append("topics not finite and non-negative")
    if not np.allclose(beta.sum(axis=1), 1.0, rtol=0, atol=1e-10):
        failures.append(f"topics off the simplex: sums {beta.sum(axis=1)}")
    objective = np.asarray(model.objective_)
    if not np.all(np.isfinite(objective)):
        failures.append(f"objective not finite: {objective}")
    rising = np.diff(objective) > 1e-9 * np.abs(objective[:-1])
    if np.any(rising):
        failures.append(f"objective rose: {objective}")
    theta = model.transform(X)
    if not (np.all(np.isfinite(theta)) and np.all(theta >= 0)):
        failures.append("codes not finite and non-negative")
    if isinstance(model, MedSTC):
        if not np.all(np.isfinite(model.coef_)):
            failures.append("coef_ not finite")
        model.predict(X)


def run_case(case):
    from sklearn.base import clone

    from stc import STC, MedSTC

    X, y = make_data(case)
    cls = MedSTC if case["kind"] == "medstc" else STC
    params = dict(case["params"], n_jobs=1)
    model = cls(**params)
    supervised = cls is MedSTC
    if case.get("corrupt"):
        X, y = corrupt(X, y, case["corrupt"])
        try:
            model.fit(X, y) if supervised else model.fit(X)
        except (ValueError, TypeError) as exc:
            return {"status": "refused", "error": f"{type(exc).__name__}: {exc}"}
        return {"status": "accepted bad input", "failures": [f"{case['corrupt']} was accepted"]}
    try:
        model.fit(X, y) if supervised else model.fit(X)
    except (ValueError, TypeError) as exc:
        return {"status": "refused", "error": f"{type(exc).__name__}: {exc}"}
    failures = []
    check_fit(model, X, case, failures)
    if case.get("threads"):
        twin = clone(model).set_params(n_jobs=2)
        twin.fit(X, y) if supervised else twin.fit(X)
        if not (np.array_equal(twin.objective_, model.objective_)
                and np.array_equal(twin.components_, model.components_)):
            failures.append("2 threads gave a different fit than 1")
    return {"status": "fitted", "failures": failures, "n_iter": int(model.n_iter_)}


def main(path):
    warnings.simplefilter("ignore")
    with open(path) as handle:
        cases = json.load(handle)
    for i, case in enumerate(cases):
        print(json.dumps({"start": i}), flush=True)
        try:
            result = run_case(case)
        except Exception as exc:  # anything but a clear refusal is a failure
            result = {"status": "crashed", "failures": [
                f"{type(exc).__name__}: {exc}", traceback.format_exc(limit=4)]}
        result["case"] = i
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
