"""What the benchmark scripts share: paths, the corpus, progress lines, the coding step,
and the cache and measures of bench_sparsity.py and reproduce_paper.py.

Everything here goes through stc's public API (the estimators' parameters and
fitted attributes, ``stc._learning.coding``, ``stc.losses``, ``stc.datasets``).
"""
import hashlib
import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np
import scipy.sparse as sp

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The paper's parameterisation: rho = 0.01 in absolute units and, for STC, the l2 penalty
# on theta. These were the estimators' defaults until the defaults moved to the knee of
# the measured sparsity-accuracy frontier (results_sparsity.md); the scripts whose results
# files were measured at the old defaults pass them explicitly, so that a re-run measures
# what those files report.
# The paper starts from random topics: init="random" (the default "auto" starts from NNDSVD
# at K >= 50).
PAPER_STC = dict(rho=0.01, rho_units="absolute", theta_penalty="l2",
                 sweeps_per_iteration=None, init="random")
PAPER_MEDSTC = dict(rho=0.01, rho_units="absolute", sweeps_per_iteration=None, tol=1e-4,
                    init="random")
# The full corpus sits beside the repository: ../shared/data/20news from its root.
CORPUS_FROM_ROOT = os.path.join("..", "shared", "data", "20news")


def main_checkout_root():
    """Root of the checkout whose .git this one uses (itself, unless it is a git worktree)."""
    try:
        common = subprocess.run(["git", "-C", REPO_ROOT, "rev-parse", "--path-format=absolute",
                                 "--git-common-dir"], capture_output=True, text=True,
                                check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return REPO_ROOT
    return os.path.dirname(common) if os.path.basename(common) == ".git" else REPO_ROOT


def default_data():
    """``../shared/data/20news`` from the repository root.

    A git worktree of the repository may live elsewhere; its corpus is then
    the one beside the main checkout.
    """
    for root in (REPO_ROOT, main_checkout_root()):
        path = os.path.normpath(os.path.join(root, CORPUS_FROM_ROOT))
        if os.path.isdir(path):
            return path
    return os.path.normpath(os.path.join(REPO_ROOT, CORPUS_FROM_ROOT))


def repo_relative(path):
    """``path`` relative to the repository root (results files name no machine's paths)."""
    return os.path.relpath(os.path.abspath(path), REPO_ROOT)


def shown_path(path):
    """``path`` from the repository root if it lies inside it, else as given."""
    relative = repo_relative(path)
    return path if relative.startswith("..") else relative


def log(message):
    """A time-stamped progress line on stderr (tables go to stdout)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def add_setting_option(parser, default, outputs):
    """``--setting paper|defaults`` and ``--output`` (its default depends on the setting).

    ``outputs`` maps each setting to its results file; after parsing, call
    `resolve_setting` for the STC parameters and the output path.
    """
    parser.add_argument("--setting", choices=("paper", "defaults"), default=default,
                        help="STC's sparsity parameters: the paper's (rho=0.01 absolute, "
                        "theta l2) or the package's defaults (default: %(default)s)")
    parser.add_argument("--output", default=None,
                        help="default: " + ", ".join(f"{repo_relative(path)} ({name})"
                                                     for name, path in outputs.items()))
    parser.set_defaults(setting_outputs=outputs)


def resolve_setting(args):
    """(STC parameters of ``args.setting``, its description); sets ``args.output``."""
    from stc import STC

    if args.output is None:
        args.output = args.setting_outputs[args.setting]
    if args.setting == "paper":
        return dict(PAPER_STC), ("rho=0.01, rho_units='absolute', theta_penalty='l2' (the "
                                 "paper's setting)")
    defaults = STC().get_params()
    return {}, ("STC's defaults (rho={rho}, rho_units='{rho_units}', theta_penalty="
                "'{theta_penalty}')".format(**defaults))


def add_data_option(parser):
    parser.add_argument("--data", "--data-home", dest="data", default=None, metavar="DIR",
                        help="directory of the 20 Newsgroups SVMlight files (default: "
                             "../shared/data/20news from the repository root)")


def load_corpus(data):
    """Train and test bunches of the full corpus (stop words removed) and a summary line."""
    from stc.datasets import load_20newsgroups_split

    data = default_data() if data is None else data
    log(f"loading {repo_relative(data)}")
    train, test = load_20newsgroups_split(data)
    Xtr, Xte = train.data, test.data
    summary = (f"`{repo_relative(data)}` (paths from the repository root): train "
               f"{Xtr.shape[0]} docs, test {Xte.shape[0]} docs, {Xtr.shape[1]} terms (stop "
               f"words removed), nnz train {Xtr.nnz}, nnz test {Xte.nnz}, tokens train "
               f"{int(Xtr.sum())}, {np.unique(train.target).size} classes.")
    return train, test, summary


# ---------------------------------------------------------------------------
# The coding step of a fitted model, called through stc._learning.coding
# ---------------------------------------------------------------------------

def count_matrix(X):
    """``X`` as the estimators code it: CSR float64, duplicates summed, sorted int32
    indices, no stored zeros (so row i of ``word_codes(X)`` is the i-th stored entry)."""
    X = sp.csr_matrix(X, dtype=np.float64, copy=True)
    X.sum_duplicates()
    X.sort_indices()
    X.eliminate_zeros()
    X.indices = X.indices.astype(np.int32, copy=False)
    X.indptr = X.indptr.astype(np.int32, copy=False)
    return X


def known_entries(model, X):
    """Mask of the stored entries of ``count_matrix`` X whose term has weight in some topic."""
    return (model.components_.sum(axis=0) > 0)[X.indices]


def known_terms_only(model, X):
    """``count_matrix`` X without the terms the fitted topics give no weight.

    ``transform`` codes documents without them (their word codes are zero).
    """
    X = count_matrix(X)
    keep = known_entries(model, X)
    if np.all(keep):
        return X
    X.data = np.where(keep, X.data, 0.0)
    return count_matrix(X)


def coding_problem(model):
    """The `stc._learning.coding.CodingProblem` that fitted ``model`` codes documents with."""
    from stc._learning.coding import CodingProblem
    from stc.losses import get_loss

    params = model.get_params()
    gamma = params["lambda_"] if params["gamma"] is None else params["gamma"]
    # the rho of objective (2), from the current parameters (set_params may have changed rho
    # or gamma since fit set effective_rho_) and, in relative units, the training w_bar
    rho = params["rho"]
    if params.get("rho_units", "absolute") == "relative":
        rho *= np.sqrt(2.0 * gamma * model.count_scale_)
    return CodingProblem(get_loss(params["loss"]), params["lambda_"], gamma, rho,
                         params["theta_penalty"], params["code_penalty"],
                         params["inner_max_iter"], params["inner_tol"])


def code_as_transform(model, X, n_jobs=None):
    """Code ``X`` as ``model.transform`` does; returns (theta, `stc._learning.coding.CodingResult`).

    Each document starts at its best common code value, the word codes are
    not kept; ``result.word_code_updates(X)`` counts each document's
    word-code updates. The benchmarks check that theta equals
    ``transform``'s, so they count the work of the coding they time.
    """
    from stc._learning.coding import code_new_documents

    X = known_terms_only(model, X)
    theta, _, result = code_new_documents(
        coding_problem(model), X, model.components_,
        n_jobs=model.n_jobs if n_jobs is None else n_jobs)
    return theta, result


# ---------------------------------------------------------------------------
# The corpus and the cache of bench_sparsity.py and reproduce_paper.py
# ---------------------------------------------------------------------------

def corpus_key(quick, subset):
    """What a cache key holds of the corpus: which one, and which share of its documents."""
    return dict(name="embedded" if quick else "20news", subset=subset)


def corpus_name(quick):
    """The corpus as figure titles name it."""
    return "embedded corpus (quick)" if quick else "20 Newsgroups"


class Corpus:
    """Train and test counts and labels, and the test entries whose term occurs in training."""

    def __init__(self, name, train, test, summary):
        self.name, self.summary = name, summary
        self.vocabulary = np.asarray(train.vocabulary, dtype=object)
        self.target_names = list(train.target_names)
        self.Xtr, self.ytr = count_matrix(train.data), np.asarray(train.target)
        self.Xte, self.yte = count_matrix(test.data), np.asarray(test.target)
        seen = np.asarray(self.Xtr.sum(axis=0)).ravel() > 0
        self.seen_entries = seen[self.Xte.indices]
        self.mean_count = float(self.Xtr.data.mean())  # w_bar: sum of counts / nnz

    @property
    def fingerprint(self):
        """What the cache key needs to tell this corpus from another."""
        return dict(name=self.name, train=[int(self.Xtr.shape[0]), int(self.Xtr.nnz)],
                    test=[int(self.Xte.shape[0]), int(self.Xte.nnz)],
                    tokens=float(self.Xtr.sum() + self.Xte.sum()))


def read_corpus(quick, data, subset=None):
    """The embedded three-group corpus (``quick``, every ``subset``-th document) or
    20 Newsgroups from ``data``."""
    if quick:
        from stc.datasets import load_newsgroups_split

        train, test = load_newsgroups_split()
        if subset is not None:
            for bunch in (train, test):
                bunch.data, bunch.target = bunch.data[::subset], bunch.target[::subset]
        summary = (f"the embedded three-group corpus: train {train.data.shape[0]} docs, test "
                   f"{test.data.shape[0]} docs, {train.data.shape[1]} terms")
        return Corpus("embedded", train, test, summary)
    train, test, summary = load_corpus(data)
    return Corpus("20news", train, test, summary)


class Cache:
    """One JSON file per measured point, named by a hash of the point, corpus and protocol.

    ``protocol`` is the script's: bumping it when a measurement changes meaning
    makes every point cached under the old one missing.
    """

    def __init__(self, directory, corpus_key, protocol, refresh=False):
        self.directory, self.corpus_key, self.refresh = directory, corpus_key, refresh
        self.protocol = protocol
        os.makedirs(directory, exist_ok=True)

    def _path(self, point):
        key = json.dumps(dict(point=point, corpus=self.corpus_key, protocol=self.protocol),
                         sort_keys=True)
        return os.path.join(self.directory, hashlib.sha256(key.encode()).hexdigest()[:20] + ".json")

    def model_path(self, point):
        """Where the fitted model of ``point`` is kept (an stc model file)."""
        return self._path(point)[:-len(".json")] + ".stc"

    def get(self, point):
        path = self._path(point)
        if self.refresh or not os.path.exists(path):
            return None
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)["record"]

    def put(self, point, record):
        path = self._path(point)
        with open(path + ".part", "w", encoding="utf-8") as handle:
            json.dump(dict(point=point, corpus=self.corpus_key, protocol=self.protocol,
                           record=record), handle, indent=1)
        os.replace(path + ".part", path)  # a killed run leaves no half-written point


# ---------------------------------------------------------------------------
# Measures of the codes shared by bench_sparsity.py and reproduce_paper.py
# ---------------------------------------------------------------------------

LDA_THRESHOLDS = (1e-3, 1e-6)
SVM_C_GRID = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0)
SVM_NORMALISATIONS = ("none", "l1", "standardised")


def word_zero_share(word_codes, seen_entries):
    """Share of zero entries of the word codes (CSR, one row per entry) of seen terms."""
    active = np.diff(word_codes.indptr)[seen_entries]
    return 1.0 - active.sum() / max(active.size * word_codes.shape[1], 1)


def lda_exp_log_theta(doc_topic):
    """exp(E[log theta_dk]) from LDA's unnormalised variational parameters ``doc_topic``."""
    from scipy.special import psi

    return np.exp(psi(doc_topic) - psi(doc_topic.sum(axis=1))[:, np.newaxis])


def lda_word_zero_shares(lda, X, doc_topic, seen_entries, thresholds, chunk=200_000):
    """Shares of per-word topic posteriors under each threshold (the paper's measure).

    phi_dnk is proportional to exp(E[log theta_dk]) exp(E[log beta_kn]), with
    E[log theta_dk] from the unnormalised variational parameters ``doc_topic`` and
    exp(E[log beta]) = ``lda.exp_dirichlet_component_`` (the update of scikit-learn's
    E-step), normalised over k for every observed entry of CSR ``X``.
    """
    exp_theta = lda_exp_log_theta(doc_topic)
    exp_beta = np.asarray(lda.exp_dirichlet_component_)
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))[seen_entries]
    cols = X.indices[seen_entries]
    zeros = np.zeros(len(thresholds), dtype=np.int64)
    for lo in range(0, rows.size, chunk):
        phi = exp_theta[rows[lo:lo + chunk]] * exp_beta[:, cols[lo:lo + chunk]].T
        phi /= phi.sum(axis=1, keepdims=True)
        for i, threshold in enumerate(thresholds):
            zeros[i] += np.count_nonzero(phi < threshold)
    total = max(rows.size * exp_beta.shape[0], 1)
    return [float(z / total) for z in zeros]


def svm_accuracy(Ftr, ytr, Fte, yte, threads, with_times=False):
    """Test accuracy of a LinearSVC whose normalisation and C are cross-validated together.

    3-fold stratified CV on the training features only, over the normalisations
    none / per-document l1 / standardised (zero mean, unit variance per topic) and
    ``SVM_C_GRID``. ``with_times`` adds the time of the final fit on all training
    features (``svm_refit_time``) and of predicting the test features
    (``svm_predict_time``).
    """
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import Normalizer, StandardScaler
    from sklearn.svm import LinearSVC

    normalisers = {"none": "passthrough", "l1": Normalizer(norm="l1"),
                   "standardised": StandardScaler()}
    pipeline = Pipeline([("normalise", "passthrough"),
                         ("svm", LinearSVC(dual=False, max_iter=5000))])
    grid = {"normalise": [normalisers[name] for name in SVM_NORMALISATIONS],
            "svm__C": list(SVM_C_GRID)}
    search = GridSearchCV(pipeline, grid, cv=StratifiedKFold(3, shuffle=True, random_state=0),
                          n_jobs=threads)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LinearSVC convergence at the largest C values
        search.fit(Ftr, ytr)
    chosen = search.best_params_["normalise"]
    name = next(n for n in SVM_NORMALISATIONS if normalisers[n] is chosen)
    start = time.perf_counter()
    accuracy = float(search.score(Fte, yte))
    result = dict(accuracy=accuracy, svm_normalisation=name,
                  svm_C=float(search.best_params_["svm__C"]),
                  svm_cv_score=float(search.best_score_))
    if with_times:
        result.update(svm_refit_time=float(search.refit_time_),
                      svm_predict_time=time.perf_counter() - start)
    return result


def predicted_classes(model, theta, coef):
    """MedSTC's labels of documents coded ``theta``: the class whose row of ``coef`` scores
    highest (``coef`` the model's own, or a classifier refitted on other codes)."""
    return model.classes_[np.argmax(theta @ coef.T, axis=1)]


def new_figure(width, height):
    """A matplotlib figure without pyplot (no window, no global state)."""
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")
