"""Choose online MedSTC's schedule on the TRAINING split of 20 Newsgroups only.

Usage::

    python benchmarks/tune_medstc_online.py [--data DIR] [--topics 50] [--threads 2]
        [--settings 256x3,1024x3,1024x2]

The test split is never read. The training split is divided once (seed 0, as
tune_online.py does) into a tuning-fit part (80 %) and a validation part (20 %).
Batch MedSTC at its defaults and online MedSTC at each ``batch_size x n_passes``
(other parameters at their defaults, random_state=0) are fitted on the first part
and scored by validation accuracy; fit times are single runs on a shared machine
(wall clock, and the process's CPU time over all threads, less sensitive to the load).
Prints a Markdown table.
"""
import argparse
import sys
import time
import warnings

from _common import add_data_option, load_corpus, log
from _machine import load_average
from tune_online import split_training


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_option(parser)
    parser.add_argument("--topics", type=int, default=50)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--settings", default="256x3,1024x3,1024x2")
    args = parser.parse_args(argv)
    from stc import MedSTC

    train, _, summary = load_corpus(args.data)
    fit_rows, validation_rows = split_training(train)
    X, y = train.data[fit_rows], train.target[fit_rows]
    Xv, yv = train.data[validation_rows], train.target[validation_rows]
    log(summary)
    rows = []
    settings = [("batch", None, None)] + [
        ("online", int(s.split("x")[0]), int(s.split("x")[1])) for s in args.settings.split(",")]
    for method, batch_size, n_passes in settings:
        params = dict(n_topics=args.topics, random_state=0, n_jobs=args.threads,
                      learning_method=method)
        if method == "online":
            params.update(batch_size=batch_size, n_passes=n_passes)
        load = load_average()
        start, cpu = time.perf_counter(), time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = MedSTC(**params).fit(X, y)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        accuracy = model.score(Xv, yv)
        rows.append(f"| {method} | {batch_size or '-'} | {n_passes or '-'} | {accuracy:.4f} "
                    f"| {seconds:.1f} | {cpu:.1f} | {load} |")
        log(rows[-1])
    print("| learning | batch_size | n_passes | validation accuracy | fit (s) | fit CPU (s, "
          "all threads) | load |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    sys.exit(main())
