"""The sparsity-accuracy frontier on 20 Newsgroups: STC, MedSTC and LDA.

Usage::

    python benchmarks/bench_sparsity.py [--data DIR] [--topics 50] [--threads 2]
        [--models stc lda medstc] [--cache DIR] [--output FILE] [--plots DIR]
        [--quick] [--cached-only] [--refresh]

For every K it measures, on the test split, for every point of a grid:

* STC: ``rho`` over a log grid in relative units (``rho`` / sqrt(2 gamma w_bar),
  see docs/algorithms.md, "Sparsity"), times ``lambda_`` (= ``gamma``), times the
  penalty on theta (``l2``, ``l1``); plus the paper's setting (``rho = 0.01``,
  ``lambda_ = 0.1``, absolute units, theta penalty ``l2``);
* MedSTC: the same ``rho`` and theta-penalty axes; ``C`` and ``lambda_`` are chosen
  by 2-fold cross-validation on the training split (stratified) at the rho of
  ``medstc_cv_rho`` and reused at the others; plus the paper's setting;
* LDA (scikit-learn, batch variational Bayes): its document-topic prior ``alpha``
  over a log grid (``None`` is scikit-learn's default 1/K).

Measured per point: the share of zero word codes of the test documents (STC and
MedSTC: exact zeros; LDA: entries of the paper's normalised per-word topic posterior
phi_dnk ~ exp(E[log theta_dk]) exp(E[log beta_kn]) under 1e-3 and under 1e-6), counted
over the observed entries whose term occurs in the training split; the share of zero
document codes (LDA: normalised document-topic proportions under the threshold);
test accuracy; fit time; time to code the test split. STC and LDA are fitted on the
training split only, and their accuracy is that of a LinearSVC on the document codes
whose normalisation (none, per-document l1, standardised) and C are chosen together by
3-fold cross-validation on the training features only. MedSTC classifies with its own
classifier.

Every point is cached as one JSON file under ``--cache`` (keyed by the point, the
corpus and ``PROTOCOL``), so a re-run computes only missing points, and re-rendering
the tables and plots from a complete cache takes seconds and never loads the corpus.
The tables (with the command and the machine) go to ``--output``; one PNG per K
(sparsity on x, accuracy on y, a curve per model) goes to ``--plots``, if matplotlib
is installed (``pip install 'stc[plot]'``).

``--quick`` runs the whole pipeline on the embedded three-group corpus with a few
points, one small K and few iterations (well under a minute; the test suite runs it).

This script holds the command line; the measuring is `_sparsity_measure.py`, the
tables and plots `_sparsity_report.py`.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Cache, add_data_option, corpus_key, log, shown_path  # noqa: E402
from _sparsity_measure import (DEFAULT_CACHE, FULL, MODEL_KINDS, PROTOCOL, QUICK,  # noqa: E402
                               measure_grid)
from _sparsity_report import DEFAULT_OUTPUT, DEFAULT_PLOTS, write_results  # noqa: E402


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_data_option(parser)
    parser.add_argument("--topics", type=int, nargs="+", default=None,
                        help="numbers of topics K (default: 50; --quick: 4)")
    parser.add_argument("--models", nargs="+", default=list(MODEL_KINDS), choices=MODEL_KINDS,
                        help="models to measure (default: all); stc-recoded: the topics of "
                             "the paper's setting (and at K = 50 of the most accurate one), "
                             "documents coded at other rho")
    parser.add_argument("--threads", type=int, default=2, help="threads for every model "
                        "and for the cross-validations (default: 2)")
    parser.add_argument("--cache", default=DEFAULT_CACHE,
                        help="directory of the cached points (default: benchmarks/.cache/sparsity)")
    parser.add_argument("--output", default=DEFAULT_OUTPUT,
                        help="Markdown results file (default: benchmarks/results_sparsity.md)")
    parser.add_argument("--plots", default=DEFAULT_PLOTS,
                        help="directory of the PNG per K (default: benchmarks/)")
    parser.add_argument("--quick", action="store_true",
                        help="embedded corpus, a few points, K = 4, few iterations")
    parser.add_argument("--cached-only", action="store_true",
                        help="measure nothing: report the cached points and list the missing")
    parser.add_argument("--refresh", action="store_true",
                        help="recompute every point even if it is cached")
    args = parser.parse_args(argv)
    args.argv = list(argv)
    return args


def main(argv=None):
    """Run (or read from the cache) every point; write tables and plots.

    Returns the list of (point, record, computed) triples, ``computed`` False for a
    point read from the cache.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    grid = QUICK if args.quick else FULL
    topics = args.topics or list(grid["topics"])
    cache = Cache(args.cache, corpus_key(args.quick, grid["subset"]), PROTOCOL,
                  refresh=args.refresh)
    done, missing, corpus = measure_grid(args, grid, topics, cache)
    write_results(args, topics, done, missing, corpus)
    log(f"wrote {shown_path(args.output)}; {sum(c for _, _, c in done)} of {len(done)} "
        f"points computed, the rest from {shown_path(args.cache)}")
    return done


if __name__ == "__main__":
    main()
