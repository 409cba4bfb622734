"""The paper's Sec. 4 reproduced: docs/reproduction.md and its figures, end to end.

Usage::

    python benchmarks/reproduce_paper.py [--data DIR] [--topics 20 50 100] [--seeds 5]
        [--threads 2] [--cache DIR] [--output docs/reproduction.md] [--quick] [--refresh]

It fits, on the training split of 20 Newsgroups, for every K and random seed:
STC and gaussSTC (l2 penalty on the word codes) followed by a LinearSVC, MedSTC and
gaussMedSTC (their own classifier), scikit-learn's LDA (batch variational Bayes) and
NMF (Kullback-Leibler loss, multiplicative updates) followed by a LinearSVC, and
measures on the test split the share of zero word codes, the accuracy, the training
time (fit plus the final LinearSVC fit) and the test time (coding the test split plus
predicting). For one fit of each at ``--figure-topics`` it keeps the average word codes
of the representative words (paper Fig. 3) and the average document code per category
(Fig. 4). The sparsity-accuracy frontier of Fig. 2 (left) is `bench_sparsity.py`'s,
read from its cache (run it first; missing points are left out of the figure).

Every fit is cached as one JSON file under ``--cache``; a re-run fits only what is
missing, and re-drawing the figures and the report from a full cache takes seconds.
Figures go beside the report (``reproduction/*.png`` next to ``--output``); matplotlib
is needed (``pip install 'stc[plot]'``).

``--quick``: the embedded three-group corpus (every 4th document), K = 3 and 4, one
seed, few iterations (the test suite runs it; its numbers mean nothing).

This script holds the command line; the fits and their measures are
`_reproduction_measure.py`, the figures and the report `_reproduction_report.py`.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import add_data_option, log, shown_path  # noqa: E402
from _reproduction_measure import (DEFAULT_CACHE, FULL, MODELS, QUICK,  # noqa: E402,F401
                                   open_cache, read_frontier, run_fits)
# missing_lines: the report's list of missing fits, which the tests check through this script
from _reproduction_report import DEFAULT_OUTPUT, missing_lines, write_report  # noqa: E402,F401
from _sparsity_measure import DEFAULT_CACHE as SPARSITY_CACHE  # noqa: E402


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_data_option(parser)
    parser.add_argument("--topics", type=int, nargs="+", default=None,
                        help="numbers of topics (default: 20 50 100; --quick: 3 4)")
    parser.add_argument("--seeds", type=int, default=None,
                        help="random initialisations per model and K (default: 5; --quick: 1)")
    parser.add_argument("--figure-topics", type=int, default=None,
                        help="K of the fits kept for Fig. 3 and 4 (default: 50; --quick: 4)")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--threads", type=int, default=2, help="threads (default: 2)")
    parser.add_argument("--cache", default=DEFAULT_CACHE,
                        help="directory of cached fits (default: benchmarks/.cache/reproduction)")
    parser.add_argument("--frontier-cache", default=SPARSITY_CACHE,
                        help="bench_sparsity.py's cache (default: benchmarks/.cache/sparsity)")
    parser.add_argument("--output", default=DEFAULT_OUTPUT,
                        help="the report (default: docs/reproduction.md); figures go to "
                             "reproduction/ beside it")
    parser.add_argument("--quick", action="store_true",
                        help="embedded corpus, K = 3 and 4, one seed, few iterations")
    parser.add_argument("--refresh", action="store_true", help="refit even cached fits")
    parser.add_argument("--cached-only", action="store_true",
                        help="fit nothing: draw and report what the cache holds, and list "
                             "the fits that are missing")
    args = parser.parse_args(argv)
    args.argv = list(argv)
    return args


def main(argv=None):
    """Fit what is not cached, then draw the figures and write the report.

    Returns the number of fits computed (0 when everything came from the cache).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    grid = QUICK if args.quick else FULL
    fits = run_fits(args, grid, open_cache(args))
    n_images = write_report(args, grid, fits, read_frontier(args, grid))
    log(f"wrote {shown_path(args.output)} and {n_images} figures; {fits.computed} fits "
        "computed")
    return fits.computed


if __name__ == "__main__":
    main()
