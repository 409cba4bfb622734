"""Tune online STC's schedule on the TRAINING split of 20 Newsgroups only.

Usage::

    python benchmarks/tune_online.py [--data DIR] [--topics 50] [--threads 2]
        [--batch-sizes 256,1024] [--decays 0.55,0.7] [--offsets 1,10] [--steps 1,3]
        [--averaging 0,0.5] [--passes 3] [--accuracy-top 4] [--setting paper|defaults]
        [--output benchmarks/results_online_tuning.md]

The test split is never read. The training split is divided once (seed 0)
into a tuning-fit part (80 %) and a validation part (20 %). Every model is
``STC(n_topics=K, random_state=0, n_jobs=threads, rho=0.01, rho_units="absolute",
theta_penalty="l2")`` (the paper's setting, the defaults when
results_online_tuning.md was measured and its cached settings were fitted) with the
other parameters at their defaults, or with ``--setting defaults`` STC's defaults
(results_online_tuning_defaults.md); the batch model is the reference. Each online setting
(batch_size x learning_decay x learning_offset x dictionary_max_iter x
topic_averaging, with ``n_passes``) is fitted on the tuning-fit part and scored by its validation
objective (objective (2) of coding the validation documents, ``objective``),
relative to the batch model's. The ``--accuracy-top`` best settings (and the
batch model) also get an STC + LinearSVC accuracy on the validation part
(classifier trained on the tuning-fit part's codes, C by 3-fold CV there).

Fit times are single runs on a shared machine (the load is printed per
row); they rank settings roughly, the speed ratio of record comes from
``bench_online.py``. Each measured setting is cached as JSON under
``benchmarks/.cache/tune_online`` (keyed by the setting; the sources'
fingerprint is recorded and shown per row: edits that change only speed leave
the objectives as they were), so the grid can be extended without refitting.
"""
import argparse
import itertools
import json
import os
import sys
import time
import warnings

import numpy as np

from _common import (REPO_ROOT, add_data_option, add_setting_option, load_corpus, log,
                     resolve_setting)
from _machine import load_average, machine_section, publish, source_fingerprint, uptime_line
from bench_online import svm_accuracy

DEFAULT_OUTPUT = os.path.join(REPO_ROOT, "benchmarks", "results_online_tuning.md")
DEFAULTS_OUTPUT = os.path.join(REPO_ROOT, "benchmarks", "results_online_tuning_defaults.md")
CACHE = os.path.join(REPO_ROOT, "benchmarks", ".cache", "tune_online")


def numbers(text, kind=float):
    return [kind(x) for x in text.split(",") if x]


def split_training(train, share=0.2, seed=0):
    """(tuning-fit rows, validation rows) of the training split."""
    order = np.random.default_rng(seed).permutation(train.data.shape[0])
    n_validation = int(round(share * order.size))
    return np.sort(order[n_validation:]), np.sort(order[:n_validation])


def fitted(params, X):
    from stc import STC

    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = STC(**params).fit(X)
    return model, time.perf_counter() - start


def measure(key, params, fit_part, validation, fingerprint, with_accuracy):
    """Fit, validation objective and (optionally) accuracy of one setting; cached."""
    os.makedirs(CACHE, exist_ok=True)
    path = os.path.join(CACHE, f"{key}.json")
    record = None
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            record = json.load(handle)
    if record is None or (with_accuracy and record.get("accuracy") is None):
        load = load_average()
        log(f"{key}: fit")
        model, fit_time = fitted(params, fit_part.data)
        record = dict(key=key, params={k: v for k, v in params.items() if k != "n_jobs"},
                      fit_time=fit_time, load=load, passes=int(model.n_iter_),
                      validation_objective=model.objective(validation.data),
                      fingerprint=fingerprint, accuracy=None)
        if with_accuracy:
            record["accuracy"], record["C"] = svm_accuracy(
                model.transform(fit_part.data), fit_part.target,
                model.transform(validation.data), validation.target)
        log(f"{key}: {fit_time:.1f} s, validation objective {record['validation_objective']:.6e}")
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(record, handle)
    return record


def subset(bunch, rows):
    from sklearn.utils import Bunch

    return Bunch(data=bunch.data[rows], target=bunch.target[rows])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_option(parser)
    parser.add_argument("--topics", type=int, default=50)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-sizes", default="256,1024")
    parser.add_argument("--decays", default="0.55,0.7")
    parser.add_argument("--offsets", default="1,10")
    parser.add_argument("--steps", default="1,3")
    parser.add_argument("--averaging", default="0,0.5")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--accuracy-top", type=int, default=4)
    add_setting_option(parser, "paper", {"paper": DEFAULT_OUTPUT, "defaults": DEFAULTS_OUTPUT})
    parser.add_argument("--cached-only", action="store_true",
                        help="fit nothing: report every setting measured so far (all grids run)")
    args = parser.parse_args(argv)
    setting, described = resolve_setting(args)
    # cache keys: the paper setting's have no prefix (they were fitted first)
    prefix = "" if args.setting == "paper" else "defaults_"
    start_uptime = uptime_line()
    train, test, summary = load_corpus(args.data)
    del test  # tuning never looks at the test split
    fit_rows, validation_rows = split_training(train)
    fit_part, validation = subset(train, fit_rows), subset(train, validation_rows)
    fingerprint = source_fingerprint(os.path.join(REPO_ROOT, "stc"))[0]
    # the cache keys leave these out: every cached setting was fitted with them
    common = dict(n_topics=args.topics, random_state=0, n_jobs=args.threads, **setting)
    batch = measure(f"{prefix}batch_K{args.topics}", common, fit_part, validation, fingerprint,
                    True)
    settings = list(itertools.product(numbers(args.batch_sizes, int), numbers(args.decays),
                                      numbers(args.offsets), numbers(args.steps, int),
                                      numbers(args.averaging)))
    records = []
    if args.cached_only:
        settings = []
        for name in sorted(os.listdir(CACHE)):
            if name.startswith(f"{prefix}online_K{args.topics}_") and name.endswith(".json"):
                with open(os.path.join(CACHE, name), encoding="utf-8") as handle:
                    records.append(json.load(handle))
    for batch_size, decay, offset, steps, averaging in settings:
        params = dict(common, learning_method="online", batch_size=batch_size,
                      learning_decay=decay, learning_offset=offset, dictionary_max_iter=steps,
                      n_passes=args.passes, topic_averaging=averaging)
        key = (f"{prefix}online_K{args.topics}_b{batch_size}_k{decay:g}_t{offset:g}_s{steps}"
               f"_p{args.passes}_a{averaging:g}")
        records.append(measure(key, params, fit_part, validation, fingerprint, False))
    records.sort(key=lambda r: r["validation_objective"])
    for i, record in enumerate([] if args.cached_only else records[:args.accuracy_top]):
        records[i] = measure(record["key"], dict(common, **record["params"]), fit_part,
                             validation, fingerprint, True)
    reference = batch["validation_objective"]
    rows = ["| setting | batch_size | decay | offset | MM steps | averaging | passes | fit (s) "
            "| load | validation objective | gap to batch | accuracy (C) | sources |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]

    def row(name, r):
        p = r["params"]
        accuracy = "" if r.get("accuracy") is None else f"{r['accuracy']:.4f} ({r['C']:g})"
        gap = 100 * (r["validation_objective"] - reference) / reference
        averaging = "" if name == "batch" else p.get("topic_averaging", 0)
        return (f"| {name} | {p.get('batch_size', '')} | {p.get('learning_decay', '')} | "
                f"{p.get('learning_offset', '')} | {p.get('dictionary_max_iter', 3)} | "
                f"{averaging} | "
                f"{r['passes']} | {r['fit_time']:.1f} | {r['load'].split()[0]} | "
                f"{r['validation_objective']:.6e} | {gap:+.2f} % | {accuracy} | "
                f"{r['fingerprint']} |")

    rows.append(row("batch", batch))
    rows += [row("online", r) for r in records]
    command = "python benchmarks/tune_online.py " + " ".join(argv or sys.argv[1:])
    text = "\n".join([
        "# Tuning online STC on the training split of 20 Newsgroups", "",
        f"K = {args.topics}, {described}; tuning-fit part {fit_rows.size} documents, "
        f"validation part {validation_rows.size} documents, both from the training split (seed 0); the test "
        "split is not read. Online settings are sorted by validation objective.", "",
        f"Command: `{command.strip()}`", "",
        *machine_section(f"threads used (n_jobs): {args.threads}", start_uptime),
        f"Data: {summary}", "",
        *rows, "",
    ])
    publish(text, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
