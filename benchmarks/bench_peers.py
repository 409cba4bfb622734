"""STC against the topic models a user would pick instead, on 20 Newsgroups, in one run.

Usage::

    python benchmarks/bench_peers.py [--data DIR] [--topics 20 50 100] [--seeds 2]
        [--threads 2] [--models NAME ...] [--subsample N] [--quick]
        [--output benchmarks/results_peers.md]

Every model runs at its documented defaults with K topics and random_state =
the round's seed (0, 1, ...): STC (batch), STC online (``learning_method=
"online"``), MedSTC (fitted with the training labels), scikit-learn
LatentDirichletAllocation, scikit-learn NMF (``beta_loss="kullback-leibler",
solver="mu", init="nndsvda"``), tomotopy LDAModel (``train`` for 1000 Gibbs
sweeps, in steps of 100), gensim LdaMulticore and BigARTM (``ARTM(seed=...)``,
``fit_offline`` for 20 collection passes) with ``DecorrelatorPhiRegularizer(tau=1e5)``
alone ("bigartm") or with the sparsing ``SmoothSparsePhiRegularizer(tau=-0.1)`` and
``SmoothSparseThetaRegularizer(tau=-0.5)`` too ("bigartm-sparse"). Threads: ``n_jobs`` /
``workers`` / ``num_processors`` = ``--threads`` and OMP/BLAS pools of that size. Rounds
are interleaved: for each K, round 1 runs every model, then round 2 every model again,
and so on.

Every (model, K, round) runs in a fresh subprocess, which loads the corpus,
fits on the training split and codes the test split; so thread pools and
memory are not shared between runs. Measured (see ``PROTOCOL`` for details):
fit and transform time, LinearSVC accuracy on the document codes, held-out
document-completion log-likelihood per token and perplexity (the rule of
``STC.score``, applied to every model through `stc._learning.completion`), NPMI and
UMass coherence of the top 10 words over the training split
(`stc.inspection.coherence`), shares of zero document and word codes, and the
peak resident memory of fit + transform.

``--quick`` is a check of the pipeline, not a measurement: every 10th
document, K = 10, one round. The table goes to ``--output`` after every run
(an interrupted run keeps what it finished) and is printed at the end.
Needs ``pip install -e '.[bench]'`` (tomotopy, gensim, psutil); the BigARTM models
need ``pip install -e '.[bigartm]'`` (kept apart for its pin of protobuf < 3.21) and
are skipped, with a message, where ``artm`` does not import.
"""
import argparse
import functools
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import REPO_ROOT, count_matrix, known_terms_only, load_corpus, log  # noqa: E402
from stc._learning.completion import TOPIC_PSEUDO_COUNT  # noqa: E402

DEFAULT_OUTPUT = os.path.join(REPO_ROOT, "benchmarks", "results_peers.md")
# l1-normalised codes have entries ~1/K: the quick check chose C at both ends of 1e-2..1e4
SVM_C_GRID = (1e-3, 1e-2, 0.1, 1.0, 10.0, 100.0, 1e3, 1e4, 1e5)
SMALL_CODE = 1e-3  # "near zero": an l1-normalised document code entry under this
TOMOTOPY_ITERATIONS, TOMOTOPY_STEP = 1000, 100
BIGARTM_PASSES = 20
BIGARTM_MODELS = ("bigartm", "bigartm-sparse")
BIGARTM_INSTALL = "pip install -e '.[bigartm]'"
MODELS = ("stc", "stc-online", "medstc", "sklearn-lda", "sklearn-nmf", "tomotopy-lda",
          "gensim-lda") + BIGARTM_MODELS
PROTOCOL = """\
Protocol (the same for every model):

- fit on the training split (MedSTC with its labels); the fit time includes turning the
  count matrix into the library's input (tomotopy: token lists; gensim: a streamed corpus;
  BigARTM: UCI bag-of-words files in a temporary directory, parsed by BigARTM into its
  batches and dictionary);
- transform: the codes of the test split (STC, MedSTC: `transform`; scikit-learn:
  `transform`; tomotopy: `infer` with its defaults (100 iterations), an empty document
  gets 1/K; gensim: `get_document_topics(minimum_probability=0)`, which still drops
  probabilities under 1e-8: they count as zeros; BigARTM: `transform`, theta, its time
  including writing the test split's input as for the fit, an empty document gets 1/K;
  its topics are phi transposed, in the corpus's term order). NMF's codes are W times each
  topic's mass (row sum of H), so that with the row-normalised topics they give the same
  product W H (for KL-NMF, the document-topic proportions of PLSA);
- accuracy: LinearSVC (`dual=False`) on the l1-normalised codes of the training and test
  splits, C chosen by 3-fold stratified CV on the training codes from {c_grid}. MedSTC
  also has its own classifier (argmax_y eta_y . theta, what `predict` does): "own";
- held-out completion: the rule of `STC.score` (`stc._learning.completion`): every second stored
  entry of each test document held out, the other half coded by the model's transform,
  p(n|d) = 0.99 pi_d . beta_n + 0.01 u_n with pi_d = (theta_d / sum_k theta_dk + {pseudo:g})
  / (1 + {pseudo:g} K) (a pseudo-count per topic, chosen on the training split for all models
  alike), beta each model's topic-word matrix, every row normalised to sum 1, and u the
  add-one smoothed training term frequencies; log-likelihood per held-out token and
  perplexity exp(-it);
- coherence: mean over the topics of NPMI and UMass of the top 10 words, whole-document
  co-occurrence over the training split (`stc.inspection.coherence`);
- zero codes: share of exactly zero entries of the test document codes, and of the
  l1-normalised codes under {small:g}; word codes (STC, MedSTC only: the other models
  have none) share of zero entries over the test entries whose term the topics know;
- peak memory: resident set size of the run's process tree (the subprocess and its
  children: joblib/loky and gensim workers), sampled every 0.1 s during fit + transform,
  summed over processes (pages a forked worker shares are counted in each, so an upper
  bound for gensim); in brackets the main process's own peak (`ru_maxrss`), which
  includes loading the corpus. The run table gives the tree's RSS as the fit starts
  (the loaded corpus).
""".format(c_grid=", ".join(f"{c:g}" for c in SVM_C_GRID), small=SMALL_CODE,
           pseudo=TOPIC_PSEUDO_COUNT)


# ---------------------------------------------------------------------------
# The models: fit(X, y), codes(X) and topics() (row-normalised, shape (K, n_terms))
# ---------------------------------------------------------------------------

def row_normalised(matrix):
    matrix = np.asarray(matrix, dtype=np.float64)
    mass = matrix.sum(axis=1, keepdims=True)
    return np.divide(matrix, mass, out=np.zeros_like(matrix), where=mass > 0)


class STCModel:
    word_codes = True

    def __init__(self, K, seed, threads, supervised=False, **params):
        from stc import STC
        from stc import MedSTC

        estimator = MedSTC if supervised else STC
        self.model = estimator(n_topics=K, random_state=seed, n_jobs=threads, **params)
        self.supervised = supervised

    def fit(self, X, y):
        self.model.fit(X, y) if self.supervised else self.model.fit(X)

    def codes(self, X):
        return self.model.transform(X)

    def topics(self):
        return self.model.components_


class SklearnModel:
    word_codes = False

    def __init__(self, K, seed, threads, nmf=False, **params):
        from sklearn.decomposition import NMF, LatentDirichletAllocation

        if nmf:
            self.model = NMF(n_components=K, beta_loss="kullback-leibler", solver="mu",
                             init="nndsvda", random_state=seed, **params)
        else:
            self.model = LatentDirichletAllocation(n_components=K, random_state=seed,
                                                   n_jobs=threads, **params)
        self.nmf = nmf

    def fit(self, X, y):
        self.model.fit(X)

    def codes(self, X):
        codes = self.model.transform(X)
        # NMF: W H = (W mass) (H / mass); LDA's transform already gives proportions
        return codes * self.model.components_.sum(axis=1) if self.nmf else codes

    def topics(self):
        return row_normalised(self.model.components_)


def token_lists(X):
    """Each row of a count matrix as a list of its tokens (column numbers as strings)."""
    X = count_matrix(X)
    tokens = np.repeat(X.indices, X.data.astype(np.int64)).astype(str)
    ends = np.cumsum(np.asarray(X.sum(axis=1), dtype=np.int64).ravel())
    return [list(doc) for doc in np.split(tokens, ends[:-1])]


class TomotopyModel:
    word_codes = False

    def __init__(self, K, seed, threads, iterations=TOMOTOPY_ITERATIONS, **params):
        import tomotopy

        self.model = tomotopy.LDAModel(k=K, seed=seed, **params)
        self.K, self.threads, self.iterations = K, threads, iterations

    def fit(self, X, y):
        self.n_terms = X.shape[1]
        for doc in token_lists(X):
            if doc:  # tomotopy skips empty documents anyway
                self.model.add_doc(doc)
        for done in range(0, self.iterations, TOMOTOPY_STEP):
            self.model.train(min(TOMOTOPY_STEP, self.iterations - done), workers=self.threads)

    def codes(self, X):
        docs = token_lists(X)
        # make_doc([]) aborts the interpreter: an empty document gets the prior's mean
        codes = np.full((len(docs), self.K), 1.0 / self.K)
        rows = [i for i, doc in enumerate(docs) if doc]
        if rows:
            inferred, _ = self.model.infer([self.model.make_doc(docs[i]) for i in rows],
                                           workers=self.threads)
            codes[rows] = np.asarray(inferred, dtype=np.float64)
        return codes

    def topics(self):
        beta = np.zeros((self.K, self.n_terms))
        columns = np.asarray(list(self.model.used_vocabs), dtype=np.int64)
        for k in range(self.K):
            beta[k, columns] = self.model.get_topic_word_dist(k)
        return row_normalised(beta)


class GensimModel:
    word_codes = False

    def __init__(self, K, seed, threads, **params):
        self.K, self.seed, self.threads, self.params = K, seed, threads, params

    def fit(self, X, y):
        from gensim.matutils import Sparse2Corpus
        from gensim.models import LdaMulticore

        self.model = LdaMulticore(Sparse2Corpus(X, documents_columns=False), num_topics=self.K,
                                  id2word={n: str(n) for n in range(X.shape[1])},
                                  workers=self.threads, random_state=self.seed, **self.params)

    def codes(self, X):
        from gensim.matutils import Sparse2Corpus

        codes = np.zeros((X.shape[0], self.K))
        for d, bow in enumerate(Sparse2Corpus(X, documents_columns=False)):
            for k, p in self.model.get_document_topics(bow, minimum_probability=0):
                codes[d, k] = p
        return codes

    def topics(self):
        return row_normalised(self.model.get_topics())


@functools.lru_cache(maxsize=None)
def import_artm():
    """BigARTM's module, imported without the deprecation warnings of its protobuf code,
    its log set up before the library's first call."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import artm
    # by default it writes log files into the working directory (the repository): errors
    # go to stderr instead; its warnings, on every run, are about the terms a split lacks
    artm.wrapper.LibArtm(logging_config=artm.messages.ConfigureLoggingArgs(
        logtostderr=True, minloglevel=2))
    return artm


def bigartm_batches(X, folder, dictionary=True):
    """``X`` as BigARTM batches in ``folder``: document d is item d + 1, term n token "n".

    Written as UCI bag-of-words files for BigARTM's own parser: its in-memory route
    (``data_format="bow_n_wd"``) loops over the whole vocabulary for every document in
    Python, minutes on the full training split. An empty document gets no item.
    """
    X = count_matrix(X)
    docs = np.repeat(np.arange(1, X.shape[0] + 1), np.diff(X.indptr))
    with open(os.path.join(folder, "docword.corpus.txt"), "w", encoding="ascii") as handle:
        handle.write(f"{X.shape[0]}\n{X.shape[1]}\n{X.nnz}\n")
        # .17g: a fractional count survives the round trip
        handle.writelines(f"{d} {n} {count:.17g}\n" for d, n, count in
                          zip(docs.tolist(), (X.indices + 1).tolist(), X.data.tolist()))
    with open(os.path.join(folder, "vocab.corpus.txt"), "w", encoding="ascii") as handle:
        handle.writelines(f"{n}\n" for n in range(X.shape[1]))
    return import_artm().BatchVectorizer(data_format="bow_uci", collection_name="corpus",
                                         data_path=folder,
                                         target_folder=os.path.join(folder, "batches"),
                                         gather_dictionary=dictionary)


class BigARTMModel:
    word_codes = False

    def __init__(self, K, seed, threads, sparse=False, passes=BIGARTM_PASSES, **params):
        artm = import_artm()
        regularizers = [artm.DecorrelatorPhiRegularizer(tau=1e5)]
        if sparse:
            regularizers += [artm.SmoothSparsePhiRegularizer(tau=-0.1),
                             artm.SmoothSparseThetaRegularizer(tau=-0.5)]
        self.model = artm.ARTM(num_topics=K, num_processors=threads, seed=seed,
                               regularizers=regularizers, **params)
        self.K, self.passes = K, passes

    def fit(self, X, y):
        self.n_terms = X.shape[1]
        # the batches live only for the fit: the model keeps its own copy of phi
        with tempfile.TemporaryDirectory(prefix="bench-peers-bigartm-") as folder:
            batches = bigartm_batches(X, folder)
            self.model.initialize(batches.dictionary)
            self.model.fit_offline(batches, num_collection_passes=self.passes)

    def codes(self, X):
        # BigARTM drops an empty document: it gets the uniform code, as in TomotopyModel
        codes = np.full((X.shape[0], self.K), 1.0 / self.K)
        if X.count_nonzero() == 0:  # no batch at all to transform
            return codes
        with tempfile.TemporaryDirectory(prefix="bench-peers-bigartm-") as folder:
            theta = self.model.transform(bigartm_batches(X, folder, dictionary=False))
        rows = np.asarray(theta.columns, dtype=np.int64) - 1
        codes[rows] = theta.loc[self.model.topic_names].to_numpy(dtype=np.float64).T
        return codes

    def topics(self):
        # phi is indexed by token name, in BigARTM's order: back to the corpus's columns
        phi = self.model.get_phi().reindex([str(n) for n in range(self.n_terms)],
                                           fill_value=0.0)
        return row_normalised(phi[self.model.topic_names].to_numpy(dtype=np.float64).T)


def bigartm_unavailable():
    """Why ``artm`` does not import here, or None if it does."""
    try:
        import_artm()
    except Exception as error:  # protobuf >= 3.21 fails with a TypeError, not an ImportError
        return f"{type(error).__name__}: {error}"
    return None


def make_model(name, K, seed, threads, **params):
    """The model ``name`` at its defaults (``params`` override them: tests use few iterations)."""
    return {
        "stc": lambda: STCModel(K, seed, threads, **params),
        "stc-online": lambda: STCModel(K, seed, threads, learning_method="online", **params),
        "medstc": lambda: STCModel(K, seed, threads, supervised=True, **params),
        "sklearn-lda": lambda: SklearnModel(K, seed, threads, **params),
        "sklearn-nmf": lambda: SklearnModel(K, seed, threads, nmf=True, **params),
        "tomotopy-lda": lambda: TomotopyModel(K, seed, threads, **params),
        "gensim-lda": lambda: GensimModel(K, seed, threads, **params),
        "bigartm": lambda: BigARTMModel(K, seed, threads, **params),
        "bigartm-sparse": lambda: BigARTMModel(K, seed, threads, sparse=True, **params),
    }[name]()


# ---------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------

class TreeMemory:
    """Peak summed RSS of this process and its descendants, sampled in a thread."""

    def __init__(self, interval=0.1):
        import psutil

        self.process, self.interval, self.peak, self.start = psutil.Process(), interval, 0, None
        self.stop = threading.Event()

    def sample(self):
        import psutil

        total = 0
        for process in [self.process] + self.process.children(recursive=True):
            try:
                total += process.memory_info().rss
            except psutil.Error:  # a worker that just ended
                pass
        self.peak = max(self.peak, total)
        self.start = total if self.start is None else self.start

    def run(self):
        while not self.stop.wait(self.interval):
            self.sample()

    def __enter__(self):
        self.sample()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        self.sample()
        return False


def svm_accuracy(train_codes, y_train, test_codes, y_test, threads):
    """LinearSVC on l1-normalised codes, C by 3-fold stratified CV on the training codes."""
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.preprocessing import normalize
    from sklearn.svm import LinearSVC

    search = GridSearchCV(LinearSVC(dual=False, max_iter=5000), {"C": list(SVM_C_GRID)},
                          cv=StratifiedKFold(3, shuffle=True, random_state=0), n_jobs=threads)
    search.fit(normalize(train_codes, norm="l1"), y_train)
    return float(search.score(normalize(test_codes, norm="l1"), y_test)), search.best_params_["C"]


def completion_score(peer, X_test, term_counts):
    """Held-out log-likelihood per token, by the rule of `STC.score`, for any model."""
    from stc._learning.completion import held_out_score, split_entries
    from stc.losses import get_loss

    observed, held_out = split_entries(count_matrix(X_test))
    return held_out_score(get_loss("poisson"), peer.topics(), term_counts,
                          peer.codes(observed), held_out)


def mean_coherence(beta, X_train, measure):
    """Mean coherence of the topics with some weight (a dead NMF topic has no top words)."""
    from stc.inspection import coherence

    alive = beta.sum(axis=1) > 0
    return float(np.mean(coherence(SimpleNamespace(components_=beta[alive]), X_train,
                                   measure=measure, top_n=10)))


def measure(name, K, seed, threads, train, test, **params):
    """Every column of the table for one (model, K, seed); a JSON-ready dict."""
    from _machine import load1

    peer = make_model(name, K, seed, threads, **params)
    record = dict(model=name, K=K, seed=seed, load=load1())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with TreeMemory() as memory:
            start = time.perf_counter()
            peer.fit(train.data, train.target)
            record["fit_time"] = time.perf_counter() - start
            start = time.perf_counter()
            theta = peer.codes(test.data)
            record["transform_time"] = time.perf_counter() - start
        record["peak_tree_mib"] = memory.peak / 2 ** 20
        record["start_tree_mib"] = memory.start / 2 ** 20
        record["peak_self_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 10
        record["accuracy"], record["C"] = svm_accuracy(peer.codes(train.data), train.target,
                                                       theta, test.target, threads)
        if name == "medstc":
            model = peer.model
            own = model.classes_[np.argmax(theta @ model.coef_.T, axis=1)]
            record["own_accuracy"] = float(np.mean(own == test.target))
        term_counts = np.asarray(train.data.sum(axis=0), dtype=np.float64).ravel()
        record["log_lik"] = completion_score(peer, test.data, term_counts)
        beta = peer.topics()
        record["npmi"] = mean_coherence(beta, train.data, "npmi")
        record["umass"] = mean_coherence(beta, train.data, "u_mass")
        record["doc_zero"] = float(np.mean(theta == 0))
        proportions = theta / np.maximum(theta.sum(axis=1, keepdims=True), 1e-300)
        record["doc_small"] = float(np.mean(proportions < SMALL_CODE))
        if peer.word_codes:
            from stc.inspection import code_sparsity

            known = known_terms_only(peer.model, test.data)
            record["word_zero"] = float(code_sparsity(peer.model, known)["word_zero_share"])
    record["warnings"] = sorted({f"{w.category.__name__}: {str(w.message)[:200]}"
                                 for w in caught})
    return record


def subsampled(bunch, step):
    """Every ``step``-th document of a corpus bunch."""
    return SimpleNamespace(data=bunch.data[::step], target=bunch.target[::step])


def worker(spec):
    """One (model, K, seed) in this process: load the corpus, measure, print JSON."""
    train, test, _ = load_corpus(spec["data"])
    train, test = subsampled(train, spec["subsample"]), subsampled(test, spec["subsample"])
    log(f"{spec['model']} K={spec['K']} seed={spec['seed']}: fit {train.data.shape[0]} docs")
    record = measure(spec["model"], spec["K"], spec["seed"], spec["threads"], train, test)
    log(f"{spec['model']} K={spec['K']} seed={spec['seed']}: fit {record['fit_time']:.1f} s, "
        f"accuracy {record['accuracy']:.3f}, log-lik {record['log_lik']:.3f}")
    print(json.dumps(record))


def run_in_subprocess(spec):
    """`worker` in a fresh interpreter whose thread pools have ``threads`` threads."""
    env = dict(os.environ)
    for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[variable] = str(spec["threads"])
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker",
                           json.dumps(spec)], env=env, stdout=subprocess.PIPE, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------

LABELS = {
    "stc": "STC (batch)", "stc-online": "STC (online)", "medstc": "MedSTC",
    "sklearn-lda": "scikit-learn LDA", "sklearn-nmf": "scikit-learn NMF (KL, mu)",
    "tomotopy-lda": "tomotopy LDA (Gibbs)", "gensim-lda": "gensim LdaMulticore",
    "bigartm": "BigARTM (decorrelator)", "bigartm-sparse": "BigARTM (sparsing + decorrelator)",
}
COLUMNS = (  # (header, value of a record, format)
    ("fit (s)", lambda r: r["fit_time"], "{:.1f}"),
    ("transform test (s)", lambda r: r["transform_time"], "{:.2f}"),
    ("LinearSVC accuracy", lambda r: r["accuracy"], "{:.3f}"),
    ("own accuracy", lambda r: r.get("own_accuracy"), "{:.3f}"),
    ("held-out log-lik / token", lambda r: r["log_lik"], "{:.3f}"),
    ("perplexity", lambda r: np.exp(-r["log_lik"]), "{:.0f}"),
    ("NPMI", lambda r: r["npmi"], "{:.3f}"),
    ("UMass", lambda r: r["umass"], "{:.2f}"),
    ("zero doc codes", lambda r: r["doc_zero"], "{:.3f}"),
    (f"doc codes < {SMALL_CODE:g}", lambda r: r["doc_small"], "{:.3f}"),
    ("zero word codes", lambda r: r.get("word_zero"), "{:.3f}"),
    ("peak RSS MiB: tree (main)", lambda r: r["peak_tree_mib"], "{:.0f}"),
)


def cell(records, value, fmt):
    """Mean over the rounds, then +- half their range (n/a where a model has no such value)."""
    values = [value(r) for r in records]
    if any(v is None for v in values):
        return "n/a"
    values = np.asarray(values, dtype=float)
    text = fmt.format(values.mean())
    if values.size > 1:
        text += " ±" + fmt.format((values.max() - values.min()) / 2)
    return text


def table(records):
    """One markdown table per K: a row per model, a column per measurement."""
    lines = []
    for K in sorted({r["K"] for r in records}):
        lines += [f"### K = {K}", "", "| model | " + " | ".join(c[0] for c in COLUMNS) + " |",
                  "|---" * (len(COLUMNS) + 1) + "|"]
        for name in MODELS:
            runs = [r for r in records if r["K"] == K and r["model"] == name]
            if runs:
                cells = [cell(runs, value, fmt) for _, value, fmt in COLUMNS]
                own = "{:.0f}".format(np.mean([r["peak_self_mib"] for r in runs]))
                cells[-1] += f" ({own})"
                lines.append(f"| {LABELS[name]} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def run_lines(records):
    """Every run in order, with its seed, load, chosen C and warnings."""
    lines = ["| K | seed | model | load (1 min) at start | fit (s) | RSS at fit start (MiB) "
             "| LinearSVC C | warnings |", "|---|---|---|---|---|---|---|---|"]
    for r in records:
        lines.append(f"| {r['K']} | {r['seed']} | {LABELS[r['model']]} | {r['load']:.2f} | "
                     f"{r['fit_time']:.1f} | {r['start_tree_mib']:.0f} | {r['C']:g} | "
                     f"{'; '.join(r['warnings']) or '-'} |")
    return lines


def report(args, records, summary, start_uptime, command):
    from _machine import machine_section

    title = "# STC and its peers on 20 Newsgroups"
    if args.quick:
        title += ": QUICK CHECK of the script, not a measurement"
    rounds = (f"{args.seeds} rounds (random_state 0..{args.seeds - 1}), interleaved: for each "
              "K every model once, then every model again; each cell is the mean over the "
              "rounds ± half their range" if args.seeds > 1 else "one round (random_state 0)")
    scope = (f"every {args.subsample}th document of each split" if args.subsample > 1
             else "the full corpus")
    return "\n".join([
        title, "",
        f"Models at their documented defaults, {scope}, {rounds}. "
        "Times are wall-clock seconds on a shared machine: the run table gives the load at "
        "each run.", "",
        f"Command: `{command}`", "",
        *machine_section(f"threads used (n_jobs, workers, OMP/BLAS): {args.threads}",
                         start_uptime),
        f"- peers: {peer_versions()}",
        *([f"- skipped: {args.skipped}"] if args.skipped else []), "",
        f"Data: {summary}", "",
        PROTOCOL,
        *table(records),
        "Runs, in order:", "",
        *run_lines(records), "",
    ])


def peer_versions():
    versions = []
    for module in ("tomotopy", "gensim", "psutil"):
        try:
            versions.append(f"{module} {__import__(module).__version__}")
        except ImportError:
            versions.append(f"{module} not installed")
    if bigartm_unavailable():
        versions.append("bigartm not importable")
    else:  # artm has no __version__; protobuf because of its pin
        import google.protobuf

        versions.append(f"bigartm {import_artm().version()} (protobuf "
                        f"{google.protobuf.__version__})")
    return ", ".join(versions)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", "--data-home", dest="data", default=None, metavar="DIR",
                        help="directory of the 20 Newsgroups SVMlight files (default: "
                             "../shared/data/20news from the repository root)")
    parser.add_argument("--topics", type=int, nargs="+", default=[20, 50, 100])
    parser.add_argument("--seeds", type=int, default=2,
                        help="rounds, with random_state 0, 1, ... (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--subsample", type=int, default=1,
                        help="keep every N-th document of each split (default: all)")
    parser.add_argument("--quick", action="store_true",
                        help="check the script: --subsample 10 --topics 10 --seeds 1")
    parser.add_argument("--output", default=DEFAULT_OUTPUT)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(json.loads(args.worker))
    if args.quick:
        args.subsample, args.topics, args.seeds = 10, [10], 1
    args.skipped = None
    requested = [name for name in args.models if name in BIGARTM_MODELS]
    reason = bigartm_unavailable() if requested else None
    if reason:  # an optional extra: the other models still run
        args.skipped = (f"{', '.join(requested)}: bigartm does not import ({reason}); "
                        f"`{BIGARTM_INSTALL}`")
        log(f"skipping {args.skipped}")
        args.models = [name for name in args.models if name not in BIGARTM_MODELS]
        if not args.models:
            return 1
    from _machine import uptime_line

    command = "python benchmarks/bench_peers.py " + " ".join(
        sys.argv[1:] if argv is None else argv)
    start_uptime = uptime_line()
    _, _, summary = load_corpus(args.data)  # the data line of the report (workers reload it)
    data = os.path.abspath(args.data) if args.data else None
    records = []
    for K in args.topics:
        for seed in range(args.seeds):
            for name in args.models:
                log(f"run: {name}, K={K}, seed={seed}")
                records.append(run_in_subprocess(dict(model=name, K=K, seed=seed,
                                                      threads=args.threads, data=data,
                                                      subsample=args.subsample)))
                text = report(args, records, summary, start_uptime, command.strip())
                with open(args.output, "w", encoding="utf-8") as handle:
                    handle.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
