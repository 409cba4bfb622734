"""`python -m stc`: fit STC on the embedded 3-newsgroup corpus and show what it learned."""
import argparse
import sys
import time


def _integer(low, high=None, other_than=None):
    """An argparse type: an integer in [low, high], not ``other_than`` (a usage error else)."""
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low or (high is not None and value > high) or value == other_than:
            allowed = f"at least {low}" if high is None else f"in [{low}, {high}]"
            raise argparse.ArgumentTypeError(
                f"{value} is not allowed: an integer {allowed}"
                + (f" other than {other_than}" if other_than is not None else ""))
        return value
    return parse


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m stc", description=__doc__)
    parser.add_argument("--topics", type=_integer(1), default=10,
                        help="number of topics (default 10)")
    parser.add_argument("--words", type=_integer(1), default=8, help="top words shown per topic")
    parser.add_argument("--max-iter", type=_integer(1), default=30,
                        help="outer iterations (default 30)")
    parser.add_argument("--threads", type=_integer(-2 ** 31 + 1, 2 ** 31 - 1, other_than=0),
                        default=-1, help="threads (-1: all cores)")
    parser.add_argument("--seed", type=_integer(0, 2 ** 32 - 1), default=0)
    args = parser.parse_args(argv)
    try:  # the imports too: they take a few seconds
        return _demo(args)
    except KeyboardInterrupt:
        print("python -m stc: interrupted", file=sys.stderr)
        return 130  # 128 + SIGINT, as shells report Ctrl-C


def _demo(args):
    import numpy as np

    from stc import STC, openmp_enabled
    from stc.datasets import load_newsgroups_split

    train, test = load_newsgroups_split()
    print(f"embedded corpus: {train.data.shape[0]} train / {test.data.shape[0]} test documents, "
          f"{train.data.shape[1]} terms, groups: {', '.join(train.target_names)}")
    print(f"OpenMP: {'on' if openmp_enabled() else 'off (serial)'}")
    model = STC(n_topics=args.topics, max_iter=args.max_iter, n_jobs=args.threads,
                random_state=args.seed)
    start = time.perf_counter()
    model.fit(train.data)
    fit_time = time.perf_counter() - start
    print(f"fit: {model.n_iter_} outer iterations in {fit_time:.1f} s, "
          f"objective {model.objective_[-1]:.6g}")
    for k, words in enumerate(model.top_words(train.vocabulary, args.words)):
        print(f"topic {k:2d}: {' '.join(words)}")
    start = time.perf_counter()
    theta = model.transform(test.data)
    word_codes = model.word_codes(test.data)
    code_time = time.perf_counter() - start
    n_entries, n_topics = word_codes.shape
    print(f"test split coded in {code_time:.2f} s")
    # Sparsity: the share of code entries that are exactly zero. A topic model with
    # dense codes (LDA's posteriors, NMF without a penalty) has almost none.
    print(f"word codes: {1 - word_codes.nnz / (n_entries * n_topics):.1%} of the "
          f"{n_entries} x {n_topics} entries are exactly zero (each observed word uses "
          f"{word_codes.nnz / max(n_entries, 1):.1f} of {n_topics} topics on average)")
    print(f"document codes: {float(np.mean(theta == 0)):.1%} of the entries are exactly zero "
          f"(each document uses {float(np.mean(np.sum(theta > 0, axis=1))):.1f} of "
          f"{n_topics} topics on average)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
