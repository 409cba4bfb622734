"""The peers benchmark: one completion rule for all models, its tables, the peers on toy data."""
import numpy as np
import pytest

from conftest import load_benchmark

bench = load_benchmark("bench_peers.py")
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
# Few iterations: these tests check the pipeline, not the models.
FEW = {"stc": dict(max_iter=3), "stc-online": dict(n_passes=1), "medstc": dict(max_iter=2),
       "sklearn-lda": dict(max_iter=2), "sklearn-nmf": dict(max_iter=20),
       "tomotopy-lda": dict(iterations=20), "gensim-lda": dict(iterations=5)}


@pytest.fixture(scope="module")
def toy(newsgroups):
    train, test = newsgroups
    return bench.subsampled(train, 4), bench.subsampled(test, 4)


def term_counts(train):
    return np.asarray(train.data.sum(axis=0)).ravel()


def test_completion_of_stc_is_its_score(toy):
    train, test = toy
    peer = bench.make_model("stc", 4, 0, 1, **FEW["stc"])
    peer.fit(train.data, train.target)
    np.testing.assert_array_equal(peer.model.term_counts_, term_counts(train))
    score = bench.completion_score(peer, test.data, term_counts(train))
    assert score == pytest.approx(peer.model.score(test.data), rel=1e-12)


def test_nmf_codes_and_topics_give_its_product(toy):
    train, _ = toy
    peer = bench.make_model("sklearn-nmf", 3, 0, 1, **FEW["sklearn-nmf"])
    peer.fit(train.data, train.target)
    W = peer.model.transform(train.data[:20])
    beta = peer.topics()
    np.testing.assert_allclose(beta.sum(axis=1), 1.0)
    np.testing.assert_allclose(peer.codes(train.data[:20]) @ beta, W @ peer.model.components_,
                               rtol=1e-10, atol=1e-12)


def test_token_lists_keep_the_counts(toy):
    train, _ = toy
    X = train.data[:30]
    for row, tokens in zip(X, bench.token_lists(X)):
        columns, counts = np.unique(np.asarray(tokens, dtype=int), return_counts=True)
        np.testing.assert_array_equal(columns, row.indices)
        np.testing.assert_array_equal(counts, row.data)


def test_table_gives_mean_and_half_range_and_na():
    base = dict(K=5, fit_time=1.0, transform_time=0.5, accuracy=0.5, log_lik=-8.0, npmi=0.1,
                umass=-2.0, doc_zero=0.0, doc_small=0.1, peak_tree_mib=100.0,
                start_tree_mib=50.0, peak_self_mib=80.0, load=1.5, C=10.0, warnings=[])
    records = [dict(base, model="stc", seed=0, word_zero=0.2),
               dict(base, model="stc", seed=1, word_zero=0.4, accuracy=0.7),
               dict(base, model="gensim-lda", seed=0)]
    lines = bench.table(records)
    stc = next(line for line in lines if line.startswith("| STC (batch)"))
    gensim = next(line for line in lines if line.startswith("| gensim"))
    assert "| 0.600 ±0.100 |" in stc and "| 0.300 ±0.100 |" in stc
    assert f"| {np.exp(8.0):.0f} ±0 |" in stc and stc.endswith("| 100 ±0 (80) |")
    # one round: no spread; no word codes and no own classifier: n/a
    assert "±" not in gensim and gensim.count("n/a") == 2
    assert lines[0] == "### K = 5"
    runs = bench.run_lines(records)
    assert len(runs) == 2 + len(records)
    assert runs[2] == "| 5 | 0 | STC (batch) | 1.50 | 1.0 | 50 | 10 | - |"


@pytest.mark.parametrize("name", ["tomotopy-lda", "gensim-lda"])
def test_peer_measured_on_toy_corpus(toy, name):
    pytest.importorskip("psutil")
    pytest.importorskip(name.split("-")[0])
    train, test = toy
    record = bench.measure(name, 3, 0, 1, train, test, **FEW[name])
    assert 0.0 <= record["accuracy"] <= 1.0 and np.isfinite(record["log_lik"])
    assert -1.0 <= record["npmi"] <= 1.0 and record["umass"] <= 0.1
    assert record["peak_tree_mib"] > 0 and "word_zero" not in record
    # the completion score compares with STC's: the same unigram floor and scale
    floor = np.log(0.01 * (term_counts(train) + 1).min() / (term_counts(train) + 1).sum())
    assert floor < record["log_lik"] < 0
