"""Tests for stc.datasets: the embedded corpus and the directory loader."""
import gzip

import numpy as np
import pytest
import scipy.sparse as sp

from stc.datasets import (
    load_20newsgroups,
    load_20newsgroups_split,
    load_newsgroups,
    load_newsgroups_split,
    stopwords,
)

GROUPS = ["comp.graphics", "rec.sport.hockey", "sci.space"]


def check_counts_matrix(X):
    """Assert X is canonical CSR float64 holding non-negative integer counts."""
    assert sp.issparse(X) and X.format == "csr"
    assert X.dtype == np.float64
    assert X.has_sorted_indices
    assert np.all(X.data >= 0)
    np.testing.assert_array_equal(X.data, np.round(X.data))


# ---------------------------------------------------------------------------
# Shipped stop words and embedded corpus
# ---------------------------------------------------------------------------

def test_stopwords_shipped_list():
    words = stopwords()
    assert isinstance(words, frozenset)
    assert len(words) == 488
    assert {"the", "and", "about", "aren't"} <= words
    assert all(w == w.strip() and w for w in words)


@pytest.fixture(scope="module")
def embedded():
    return {subset: load_newsgroups(subset) for subset in ("train", "test", "all")}


def test_embedded_shapes_and_types(embedded):
    train, test = embedded["train"], embedded["test"]
    # Original bydate split sizes of the three groups.
    assert train.data.shape[0] == 1772
    assert test.data.shape[0] == 1180
    for bunch in (train, test):
        check_counts_matrix(bunch.data)
        assert bunch.target.dtype == np.int64
        assert bunch.target.shape == (bunch.data.shape[0],)
        assert bunch.target_names == GROUPS
        assert bunch.vocabulary.shape == (bunch.data.shape[1],)
        assert all(isinstance(term, str) for term in bunch.vocabulary)
        assert "embedded" in bunch.DESCR and "sci.space" in bunch.DESCR


def test_embedded_class_counts(embedded):
    np.testing.assert_array_equal(np.bincount(embedded["train"].target), [581, 598, 593])
    np.testing.assert_array_equal(np.bincount(embedded["test"].target), [389, 399, 392])


def test_embedded_shared_vocabulary(embedded):
    train, test = embedded["train"], embedded["test"]
    np.testing.assert_array_equal(train.vocabulary, test.vocabulary)
    assert len(set(train.vocabulary)) == train.vocabulary.size
    assert train.data.shape[1] == test.data.shape[1] == train.vocabulary.size


def test_embedded_has_no_stopwords(embedded):
    assert not set(embedded["train"].vocabulary) & stopwords()


def test_embedded_vocabulary_rule(embedded):
    # Every kept term occurs in at least two documents of train + test.
    doc_freq = np.bincount(embedded["all"].data.indices,
                           minlength=embedded["all"].data.shape[1])
    assert doc_freq.min() >= 2


def test_embedded_content_is_topical(embedded):
    # Typical words of each group are in the vocabulary and used most by it.
    train = embedded["train"]
    vocab = train.vocabulary.tolist()
    for word, group in [("graphics", 0), ("hockey", 1), ("nasa", 2)]:
        column = train.data[:, vocab.index(word)].toarray().ravel()
        per_group = np.bincount(train.target, weights=column, minlength=3)
        assert np.argmax(per_group) == group


def test_embedded_labels(embedded):
    for subset in ("train", "test"):
        target = embedded[subset].target
        assert target.min() >= 0 and target.max() <= 2
        assert set(target.tolist()) == {0, 1, 2}


def test_embedded_all_is_train_then_test(embedded):
    train, test, everything = embedded["train"], embedded["test"], embedded["all"]
    check_counts_matrix(everything.data)
    stacked = sp.vstack([train.data, test.data], format="csr")
    assert everything.data.shape == stacked.shape
    assert (everything.data != stacked).nnz == 0
    np.testing.assert_array_equal(everything.target,
                                  np.concatenate([train.target, test.target]))
    np.testing.assert_array_equal(everything.vocabulary, train.vocabulary)


def test_embedded_split_matches_single_loads(embedded):
    train, test = load_newsgroups_split()
    for got, want in ((train, embedded["train"]), (test, embedded["test"])):
        assert (got.data != want.data).nnz == 0
        np.testing.assert_array_equal(got.target, want.target)
        np.testing.assert_array_equal(got.vocabulary, want.vocabulary)


def test_embedded_bad_subset():
    with pytest.raises(ValueError, match="subset"):
        load_newsgroups("validation")


# ---------------------------------------------------------------------------
# Directory loader on a tiny corpus written to tmp_path
# ---------------------------------------------------------------------------

VOCAB = ["the", "rocket", "orbit", "goalie", "and", "pixel", "puck"]
# Labels deliberately listed out of order: target_names follow label order.
LABELS = "3 comp.graphics\n1 sci.space\n2 rec.sport.hockey\n"
TRAIN_LINES = [
    "1 0:5 1:3 2:1",  # sci.space: the x5, rocket x3, orbit x1
    "2 3:2 4:1 6:4",  # rec.sport.hockey: goalie x2, and x1, puck x4
    "3 0:2 5:7",      # comp.graphics: the x2, pixel x7
]
TEST_LINES = [
    "2 3:1 6:1",      # rec.sport.hockey: goalie, puck
    "1 1:2",          # sci.space: rocket x2
]
NAMES = ["sci.space", "rec.sport.hockey", "comp.graphics"]
# Expected counts after removing "the" and "and".
KEPT = ["rocket", "orbit", "goalie", "pixel", "puck"]
TRAIN_DENSE = np.array([
    [3, 1, 0, 0, 0],
    [0, 0, 2, 0, 4],
    [0, 0, 0, 7, 0],
], dtype=float)
TEST_DENSE = np.array([
    [0, 0, 1, 0, 1],
    [2, 0, 0, 0, 0],
], dtype=float)


def write_gz(path, lines):
    with gzip.open(path, "wt", encoding="ascii") as handle:
        handle.write("\n".join(lines) + "\n")


@pytest.fixture
def corpus(tmp_path):
    home = tmp_path / "20news"
    home.mkdir()
    write_gz(home / "train.svm.gz", TRAIN_LINES)
    write_gz(home / "test.svm.gz", TEST_LINES)
    (home / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    (home / "labels.txt").write_text(LABELS)
    (home / "stopwords.txt").write_text("the\nand\nof\n")
    return home


def test_tiny_train(corpus):
    news = load_20newsgroups(corpus, subset="train")
    check_counts_matrix(news.data)
    assert news.vocabulary.tolist() == KEPT
    np.testing.assert_array_equal(news.data.toarray(), TRAIN_DENSE)
    np.testing.assert_array_equal(news.target, [0, 1, 2])
    assert news.target.dtype == np.int64
    assert news.target_names == NAMES
    assert str(corpus) in news.DESCR


def test_tiny_known_word_lands_in_its_column(corpus):
    news = load_20newsgroups(str(corpus), subset="train")
    puck = news.vocabulary.tolist().index("puck")
    assert news.data[1, puck] == 4
    pixel = news.vocabulary.tolist().index("pixel")
    assert news.data[2, pixel] == 7
    assert news.data[:, pixel].sum() == 7


def test_tiny_test_subset(corpus):
    news = load_20newsgroups(corpus, subset="test")
    np.testing.assert_array_equal(news.data.toarray(), TEST_DENSE)
    np.testing.assert_array_equal(news.target, [1, 0])


def test_tiny_all_is_train_then_test(corpus):
    news = load_20newsgroups(corpus, subset="all")
    check_counts_matrix(news.data)
    np.testing.assert_array_equal(news.data.toarray(), np.vstack([TRAIN_DENSE, TEST_DENSE]))
    np.testing.assert_array_equal(news.target, [0, 1, 2, 1, 0])


def test_tiny_split_shares_vocabulary(corpus):
    train, test = load_20newsgroups_split(corpus)
    assert train.vocabulary.tolist() == test.vocabulary.tolist() == KEPT
    assert train.vocabulary is not test.vocabulary
    np.testing.assert_array_equal(train.data.toarray(), TRAIN_DENSE)
    np.testing.assert_array_equal(test.data.toarray(), TEST_DENSE)
    np.testing.assert_array_equal(test.target, [1, 0])
    assert train.target_names == test.target_names == NAMES


def test_tiny_keep_stopwords(corpus):
    news = load_20newsgroups(corpus, remove_stopwords=False)
    assert news.vocabulary.tolist() == VOCAB
    assert news.data.shape == (3, len(VOCAB))
    assert news.data[0, VOCAB.index("the")] == 5
    assert news.data[2, VOCAB.index("the")] == 2
    assert news.data[1, VOCAB.index("and")] == 1


def test_tiny_custom_stopwords_override_file(corpus):
    news = load_20newsgroups(corpus, stopwords={"rocket", "puck"})
    assert news.vocabulary.tolist() == ["the", "orbit", "goalie", "and", "pixel"]
    assert news.data[0, 0] == 5  # "the" is kept, now column 0
    np.testing.assert_array_equal(news.data[:, 1].toarray().ravel(), [1, 0, 0])


def test_tiny_falls_back_to_shipped_stopwords(corpus):
    (corpus / "stopwords.txt").unlink()
    news = load_20newsgroups(corpus)
    # "the" and "and" are both in the shipped list; the topical words are not.
    assert news.vocabulary.tolist() == KEPT
    np.testing.assert_array_equal(news.data.toarray(), TRAIN_DENSE)


def test_tiny_uncompressed_files(corpus):
    (corpus / "train.svm.gz").unlink()
    (corpus / "train.svm").write_text("\n".join(TRAIN_LINES) + "\n")
    news = load_20newsgroups(corpus)
    np.testing.assert_array_equal(news.data.toarray(), TRAIN_DENSE)


def test_stopwords_argument_must_not_be_a_string(corpus):
    with pytest.raises(TypeError, match="single string"):
        load_20newsgroups(corpus, stopwords="the")


def test_missing_directory(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError, match="nowhere"):
        load_20newsgroups(missing)


@pytest.mark.parametrize("name, subset", [
    ("vocab.txt", "train"),
    ("labels.txt", "train"),
    ("train.svm.gz", "train"),
    ("test.svm.gz", "test"),
    ("test.svm.gz", "all"),
])
def test_missing_file(corpus, name, subset):
    (corpus / name).unlink()
    with pytest.raises(FileNotFoundError, match=name.replace(".", r"\.")):
        load_20newsgroups(corpus, subset=subset)


def test_missing_test_file_does_not_matter_for_train(corpus):
    (corpus / "test.svm.gz").unlink()
    assert load_20newsgroups(corpus, subset="train").data.shape == (3, len(KEPT))


@pytest.mark.parametrize("subset", ["validation", "Train", None, 1])
def test_bad_subset(corpus, subset):
    with pytest.raises(ValueError, match="subset"):
        load_20newsgroups(corpus, subset=subset)


def test_label_not_in_labels_file(corpus):
    write_gz(corpus / "train.svm.gz", TRAIN_LINES + ["7 1:1"])
    with pytest.raises(ValueError, match="label 7"):
        load_20newsgroups(corpus)


def test_term_id_beyond_vocabulary(corpus):
    write_gz(corpus / "train.svm.gz", TRAIN_LINES + ["1 99:1"])
    with pytest.raises(ValueError, match=r"train\.svm\.gz.*7 terms of vocab\.txt"):
        load_20newsgroups(corpus)


def test_unsorted_term_ids_are_rejected(corpus):
    # SVMlight requires increasing ids within a line; sklearn enforces it.
    write_gz(corpus / "test.svm.gz", ["1 5:1 2:1"])
    with pytest.raises(ValueError, match=r"test\.svm\.gz"):
        load_20newsgroups(corpus, subset="test")


def test_remove_stopwords_must_be_bool(corpus):
    with pytest.raises(TypeError, match="remove_stopwords"):
        load_20newsgroups(corpus, remove_stopwords="yes")


def test_malformed_labels_file(corpus):
    (corpus / "labels.txt").write_text("one sci.space\n")
    with pytest.raises(ValueError, match="labels.txt"):
        load_20newsgroups(corpus)


def test_blank_line_inside_vocabulary_is_rejected(corpus):
    # Skipping it would silently shift every later term id by one.
    (corpus / "vocab.txt").write_text("the\nrocket\n\norbit\ngoalie\nand\npixel\npuck\n")
    with pytest.raises(ValueError, match=r"vocab\.txt, line 3"):
        load_20newsgroups(corpus)
