"""Datasets: the 20 Newsgroups bag-of-words corpus, and corpora sampled from STC's model.

Functions
---------
load_newsgroups(subset="train")
    Small three-group corpus (comp.graphics, rec.sport.hockey, sci.space)
    embedded in the package; needs no download.
load_newsgroups_split()
    Both splits of the embedded corpus, as ``(train, test)``.
load_20newsgroups(data_home, subset="train", remove_stopwords=True, stopwords=None)
    Full 20-group corpus read from a directory of SVMlight files.
load_20newsgroups_split(data_home, remove_stopwords=True, stopwords=None)
    Both splits of the full corpus, sharing one vocabulary, as ``(train, test)``.
stopwords()
    The shipped English stop-word list, as a frozenset.
make_stc_corpus(n_documents, n_features, n_topics, ...)
    A corpus sampled from STC's own generative model, with its true topics,
    document codes and (optionally) word codes.
topic_recovery(components, true_components)
    Cosine similarity of learned to true topics under the best one-to-one matching.

Every 20 Newsgroups loader returns a :class:`sklearn.utils.Bunch` with ``data`` (CSR
float64 word counts, documents x terms, sorted indices), ``target`` (int64
group indices), ``target_names``, ``vocabulary`` (column i counts
``vocabulary[i]``) and ``DESCR``.
"""
from ._synthetic import make_stc_corpus, topic_recovery
from ._newsgroups import (
    load_20newsgroups,
    load_20newsgroups_split,
    load_newsgroups,
    load_newsgroups_split,
    stopwords,
)

__all__ = [
    "load_20newsgroups",
    "load_20newsgroups_split",
    "load_newsgroups",
    "load_newsgroups_split",
    "make_stc_corpus",
    "stopwords",
    "topic_recovery",
]
