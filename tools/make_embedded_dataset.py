"""Build the small 20 Newsgroups corpus embedded in ``stc/datasets/data``.

Usage::

    python tools/make_embedded_dataset.py [--source DIR] [--output-dir DIR]

Reads the full corpus (a directory laid out like the "bydate" SVMlight
release: train.svm.gz, test.svm.gz, vocab.txt, labels.txt, stopwords.txt)
and writes two files:

``stopwords.txt``
    The stop-word list of the source directory, one word a line; it is what
    :func:`stc.datasets.stopwords` returns.
``newsgroups3.npz``
    Three clearly distinct groups (default: comp.graphics, rec.sport.hockey,
    sci.space) with the original train/test split. Rules:

    1. stop words are removed;
    2. the vocabulary is restricted to terms occurring in at least
       ``--min-df`` (default 2) documents of the selected groups, training
       and test documents counted together;
    3. every document is kept, even if rules 1-2 leave it empty (one
       training document holds only stop words), so the original split is
       preserved;
    4. ``target`` is the position of the group in ``--groups`` (0, 1, 2).

The archive holds only plain numpy arrays (load with ``allow_pickle=False``):
``{train,test}_{data,indices,indptr,target}`` (CSR pieces in the smallest
unsigned dtypes that fit), ``vocabulary`` and ``target_names`` (unicode),
``source_labels`` (the groups' labels in labels.txt), ``min_df`` and
``n_stopwords_removed``.
"""
import argparse
import os
import sys

import numpy as np
import scipy.sparse as sp

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Run from a source checkout without installing the package.
sys.path.insert(0, REPO_ROOT)

from stc.datasets import load_20newsgroups_split  # noqa: E402

# The full corpus sits beside the repository: ../shared/data/20news from its root.
DEFAULT_SOURCE = os.path.join(os.path.dirname(REPO_ROOT), "shared", "data", "20news")
DEFAULT_OUTPUT = os.path.join(REPO_ROOT, "stc", "datasets", "data")
DEFAULT_GROUPS = ("comp.graphics", "rec.sport.hockey", "sci.space")


def smallest_uint(values):
    """Return the smallest unsigned integer dtype that holds `values`."""
    values = np.asarray(values)
    if values.size and values.min() < 0:
        raise ValueError("expected non-negative integers")
    top = int(values.max()) if values.size else 0
    for dtype in (np.uint8, np.uint16, np.uint32, np.uint64):
        if top <= np.iinfo(dtype).max:
            return dtype
    raise ValueError("value too large")


def compact_csr(prefix, matrix, target):
    """Return the arrays that store one split, in compact dtypes."""
    counts = matrix.data
    if not np.array_equal(counts, np.round(counts)):
        raise ValueError("the counts are not integers")
    return {
        f"{prefix}_data": counts.astype(smallest_uint(counts)),
        f"{prefix}_indices": matrix.indices.astype(smallest_uint(matrix.indices)),
        f"{prefix}_indptr": matrix.indptr.astype(smallest_uint(matrix.indptr)),
        f"{prefix}_target": target.astype(np.uint8),
    }


def write_stopwords(source, output_dir):
    path = os.path.join(source, "stopwords.txt")
    with open(path, encoding="utf-8") as handle:
        words = [line.strip() for line in handle if line.strip()]
    out = os.path.join(output_dir, "stopwords.txt")
    with open(out, "w", encoding="utf-8", newline="\n") as handle:
        handle.write("\n".join(words) + "\n")
    return out, len(words)


def build(source, output_dir, groups, min_df):
    if not os.path.isfile(os.path.join(source, "stopwords.txt")):
        raise SystemExit(f"{source} has no stopwords.txt to ship with the package")
    # The directory's stopwords.txt is used, i.e. the list that gets shipped.
    train, test = load_20newsgroups_split(source)
    with open(os.path.join(source, "vocab.txt"), encoding="utf-8") as handle:
        n_full_terms = sum(1 for line in handle if line.strip())
    names = train.target_names
    missing = [g for g in groups if g not in names]
    if missing:
        raise SystemExit(f"unknown group(s) {missing}; available: {names}")
    group_index = np.array([names.index(g) for g in groups])

    # Keep the selected groups and renumber them 0..k-1 in the given order.
    new_label = np.full(len(names), -1)
    new_label[group_index] = np.arange(len(groups))
    selected = {}
    for split, bunch in (("train", train), ("test", test)):
        rows = np.flatnonzero(new_label[bunch.target] >= 0)
        selected[split] = (bunch.data[rows], new_label[bunch.target[rows]])

    # Document frequency over train and test together.
    both = sp.vstack([selected["train"][0], selected["test"][0]], format="csr")
    doc_freq = np.bincount(both.indices, minlength=both.shape[1])
    columns = np.flatnonzero(doc_freq >= min_df)
    vocabulary = np.asarray(train.vocabulary[columns], dtype=str)

    arrays = {}
    stats = {}
    for split in ("train", "test"):
        X, target = selected[split]
        X = sp.csr_matrix(X[:, columns])
        X.sort_indices()
        arrays.update(compact_csr(split, X, target))
        stats[split] = (X.shape[0], X.nnz, int(X.sum()),
                        int(np.sum(np.diff(X.indptr) == 0)),
                        np.bincount(target, minlength=len(groups)))
    arrays.update(
        vocabulary=vocabulary,
        target_names=np.asarray(groups, dtype=str),
        # Labels are 1-based in labels.txt order for this release.
        source_labels=(group_index + 1).astype(np.uint8),
        min_df=np.array(min_df, dtype=np.uint32),
        n_stopwords_removed=np.array(n_full_terms - train.vocabulary.size, dtype=np.uint32),
    )

    os.makedirs(output_dir, exist_ok=True)
    stop_path, n_stop = write_stopwords(source, output_dir)
    npz_path = os.path.join(output_dir, "newsgroups3.npz")
    np.savez_compressed(npz_path, **arrays)

    print(f"groups: {', '.join(groups)} (labels {(group_index + 1).tolist()})")
    print(f"rule: stop words removed; terms in >= {min_df} documents of these groups "
          "(train + test)")
    print(f"vocabulary: {vocabulary.size} terms")
    for split, (n_docs, nnz, tokens, empty, per_class) in stats.items():
        print(f"{split}: {n_docs} docs, nnz {nnz}, {tokens} tokens, "
              f"{empty} empty, per class {per_class.tolist()}")
    for path in (npz_path, stop_path):
        print(f"wrote {path} ({os.path.getsize(path)} bytes)")
    print(f"stop words shipped: {n_stop}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", default=DEFAULT_SOURCE,
                        help="directory with the full corpus (default: ../shared/data/20news "
                             "from the repository root)")
    parser.add_argument("--output-dir", default=DEFAULT_OUTPUT,
                        help="where to write the files (default: stc/datasets/data)")
    parser.add_argument("--groups", nargs="+", default=list(DEFAULT_GROUPS),
                        help="newsgroup names to keep (default: %(default)s)")
    parser.add_argument("--min-df", type=int, default=2,
                        help="minimum document frequency of a kept term (default: 2)")
    args = parser.parse_args(argv)
    build(args.source, args.output_dir, tuple(args.groups), args.min_df)


if __name__ == "__main__":
    main()
