"""stc.readers: the SVMlight, Matrix Market and text-folder readers, checked against
scikit-learn's own readers and tokeniser, and reading new data into a model's terms."""
import gzip

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file, load_files
from sklearn.feature_extraction.text import CountVectorizer

import stc.readers
from stc import STC
from stc.datasets import stopwords

from conftest import brief_fit

# The fits here are kept small and stop at max_iter on purpose.
pytestmark = brief_fit

TEXTS = {
    "space": ["The shuttle's orbit and the launch of the rocket.",
              "NASA plans a launch; the orbit is low.",
              "Rocket engines, orbit insertion and a launch window."],
    "hockey": ["The goalie stopped the puck in the third period.",
               "A hockey game: the puck, the goal, the period.",
               "Don't shoot the puck wide of the goal!"],
}


def write_text_folder(root, texts=TEXTS):
    for label, docs in texts.items():
        (root / label).mkdir(parents=True)
        for i, text in enumerate(docs):
            (root / label / f"doc{i}.txt").write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def svmlight_dir(tmp_path, newsgroups):
    train, _ = newsgroups
    dump_svmlight_file(train.data, train.target, str(tmp_path / "train.svm"), zero_based=True)
    (tmp_path / "vocab.txt").write_text("\n".join(train.vocabulary) + "\n", encoding="utf-8")
    return tmp_path


def same_matrix(a, b):
    return a.shape == b.shape and (a != b).nnz == 0


# ---- SVMlight and Matrix Market

def test_svmlight_reads_back_what_scikit_learn_wrote(svmlight_dir, newsgroups):
    train, _ = newsgroups
    corpus = stc.readers.read_svmlight(svmlight_dir / "train.svm", svmlight_dir / "vocab.txt")
    assert same_matrix(corpus.data, train.data)
    assert corpus.data.dtype == np.float64 and corpus.data.has_sorted_indices
    assert list(corpus.vocabulary) == list(train.vocabulary)
    assert corpus.target.dtype == np.int64 and np.array_equal(corpus.target, train.target)
    assert corpus.format == "svmlight" and corpus.text_options is None


def test_compressed_svmlight_and_one_based_indices(tmp_path, newsgroups):
    train, _ = newsgroups
    X, y = train.data[:50], train.target[:50]
    with gzip.open(tmp_path / "part.dat", "wb") as handle:  # gzip without a .gz name
        dump_svmlight_file(X, y, handle, zero_based=False)
    assert stc.readers.detect_format(tmp_path / "part.dat") == "svmlight"
    corpus = stc.readers.read_svmlight(tmp_path / "part.dat", train.vocabulary, zero_based=False)
    assert same_matrix(corpus.data, X)
    with pytest.raises(ValueError, match="beyond the 3 terms"):
        stc.readers.read_svmlight(tmp_path / "part.dat", ["a", "b", "c"], zero_based=False)


def test_matrix_market_with_labels_and_a_transposed_matrix(tmp_path, newsgroups):
    train, _ = newsgroups
    X = train.data[:30]
    scipy.io.mmwrite(tmp_path / "docs.mtx", X)
    (tmp_path / "labels.txt").write_text("\n".join(str(t) for t in train.target[:30]))
    assert stc.readers.detect_format(tmp_path / "docs.mtx") == "matrix-market"
    corpus = stc.readers.read_matrix_market(tmp_path / "docs.mtx", train.vocabulary,
                                       labels=tmp_path / "labels.txt")
    assert same_matrix(corpus.data, X)
    assert np.array_equal(corpus.target, train.target[:30])
    scipy.io.mmwrite(tmp_path / "terms_by_docs.mtx", X[:20, :30].T)
    with pytest.raises(ValueError, match="20 term columns but its vocabulary lists 30 terms "
                                         r"\(the matrix looks transposed"):
        stc.readers.read_matrix_market(tmp_path / "terms_by_docs.mtx", train.vocabulary[:30])


def test_a_file_read_as_matrix_market_must_be_one(tmp_path, newsgroups):
    train, _ = newsgroups
    # an SVMlight file of this size made scipy's reader abort the process
    dump_svmlight_file(train.data[:200], train.target[:200], str(tmp_path / "docs.svm"))
    for call in (lambda path: stc.readers.read_matrix_market(path),
                 lambda path: stc.readers.load_corpus(path, format="matrix-market")):
        with pytest.raises(ValueError, match=r"docs\.svm is not a Matrix Market matrix file"):
            call(tmp_path / "docs.svm")
    # complex values are refused, not made real
    (tmp_path / "complex.mtx").write_text("%%MatrixMarket matrix coordinate complex general\n"
                                          "1 2 1\n1 1 1.0 2.0\n")
    with pytest.raises(ValueError, match="complex.mtx holds complex values"):
        stc.readers.read_matrix_market(tmp_path / "complex.mtx")


def test_vocabulary_file_problems_are_named(tmp_path):
    (tmp_path / "vocab.txt").write_text("alpha\nbeta\nalpha\n")
    with pytest.raises(ValueError, match="vocab.txt.*'alpha' more than once"):
        stc.readers.read_vocabulary(tmp_path / "vocab.txt")
    (tmp_path / "gap.txt").write_text("alpha\n\nbeta\n")
    with pytest.raises(ValueError, match="line 2"):
        stc.readers.read_vocabulary(tmp_path / "gap.txt")


def test_format_is_recognised_by_content(tmp_path, svmlight_dir):
    assert stc.readers.detect_format(svmlight_dir / "train.svm") == "svmlight"
    assert stc.readers.detect_format(tmp_path) == "text"
    (tmp_path / "prose.txt").write_text("Hello world, this is prose.\n")
    with pytest.raises(ValueError, match="prose.txt is neither"):
        stc.readers.detect_format(tmp_path / "prose.txt")
    (tmp_path / "empty.svm").write_text("")
    with pytest.raises(ValueError, match="empty"):
        stc.readers.detect_format(tmp_path / "empty.svm")
    with pytest.raises(FileNotFoundError, match="missing.svm"):
        stc.readers.detect_format(tmp_path / "missing.svm")


def test_load_corpus_finds_the_vocabulary_beside_the_file(svmlight_dir, newsgroups):
    corpus = stc.readers.load_corpus(svmlight_dir / "train.svm")
    assert list(corpus.vocabulary) == list(newsgroups[0].vocabulary)


# ---- text folders

def test_text_folder_matches_load_files_and_count_vectorizer(tmp_path):
    root = write_text_folder(tmp_path / "texts")
    corpus = stc.readers.read_text_folder(root, stop_words="builtin", min_df=1)
    # The reference: scikit-learn's own reader and tokeniser with the same settings.
    reference = load_files(root, shuffle=False, encoding="utf-8")
    vectorizer = CountVectorizer(token_pattern=stc.readers.TOKEN_PATTERN,
                                 stop_words=sorted(stopwords()))
    expected = vectorizer.fit_transform(reference.data)
    assert corpus.target_names == reference.target_names == ["hockey", "space"]
    assert np.array_equal(corpus.target, reference.target)
    assert list(corpus.filenames) == list(reference.filenames)
    assert list(corpus.vocabulary) == list(vectorizer.get_feature_names_out())
    assert same_matrix(corpus.data, expected.astype(np.float64))
    assert corpus.format == "text"
    assert stc.readers.labels_of(corpus).tolist() == ["hockey"] * 3 + ["space"] * 3


def test_stop_words_and_document_frequency_options(tmp_path):
    root = write_text_folder(tmp_path / "texts")
    builtin = set(stc.readers.read_text_folder(root).vocabulary)
    assert "the" not in builtin and "don't" not in builtin and "orbit" in builtin
    kept = set(stc.readers.read_text_folder(root, stop_words="none").vocabulary)
    assert {"the", "don't", "shuttle's"} <= kept
    (tmp_path / "stop.txt").write_text("orbit\npuck\n")
    from_file = set(stc.readers.read_text_folder(root, stop_words=tmp_path / "stop.txt").vocabulary)
    assert from_file == kept - {"orbit", "puck"}
    # min_df=2 keeps the terms of at least two documents; max_df=0.5 drops "the" (all 6).
    pruned = stc.readers.read_text_folder(root, stop_words="none", min_df=2, max_df=0.5)
    counts = np.asarray((pruned.data > 0).sum(axis=0)).ravel()
    assert counts.min() >= 2 and counts.max() <= 3
    assert {"launch", "orbit", "puck"} <= set(pruned.vocabulary)
    assert "the" not in pruned.vocabulary
    with pytest.raises(ValueError, match="min_df=5"):
        stc.readers.read_text_folder(root, min_df=5)
    # frequencies that leave no term possible are named in the folder's terms
    with pytest.raises(ValueError, match="min_df=7 keeps only terms found in at least 7 "
                                         "documents, but the folder has 6"):
        stc.readers.read_text_folder(root, min_df=7)
    with pytest.raises(ValueError, match="max_df=2 keeps terms found in at most 2 of its 6 "
                                         "documents, fewer than the 3 that min_df=3 asks for"):
        stc.readers.read_text_folder(root, min_df=3, max_df=2)
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        stc.readers.read_text_folder(root, stop_words=tmp_path / "nope.txt")


def test_flat_folder_is_unlabelled_and_hidden_files_are_skipped(tmp_path):
    (tmp_path / "a.txt").write_text("orbit launch")
    (tmp_path / "b.txt").write_text("puck goal goal")
    (tmp_path / ".hidden").write_text("secret words")
    corpus = stc.readers.read_text_folder(tmp_path)
    assert corpus.target is None and corpus.target_names is None
    assert [p.split("/")[-1] for p in corpus.filenames] == ["a.txt", "b.txt"]
    assert "secret" not in corpus.vocabulary


def test_text_folder_layout_and_encoding_errors_name_the_file(tmp_path):
    root = write_text_folder(tmp_path / "texts")
    (root / "stray.txt").write_text("not in a label folder")
    with pytest.raises(ValueError, match="mixes files"):
        stc.readers.read_text_folder(root)
    (root / "stray.txt").unlink()
    (root / "space" / "latin1.txt").write_bytes("caf\xe9 orbit".encode("latin-1"))
    with pytest.raises(stc.readers.UndecodableTextError) as caught:
        stc.readers.read_text_folder(root)
    # the Python spelling of the options that read it anyway
    assert str(caught.value) == (f"{root / 'space' / 'latin1.txt'} is not valid utf-8 text "
                                 "(byte 3): give its encoding (encoding=...), or "
                                 "decode_error='replace' to replace bad bytes")
    assert isinstance(caught.value, ValueError)
    corpus = stc.readers.read_text_folder(root, encoding="latin-1")
    assert "café" in corpus.vocabulary
    assert "orbit" in stc.readers.read_text_folder(root, decode_error="replace").vocabulary
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no files"):
        stc.readers.read_text_folder(tmp_path / "empty")


# ---- new data in a fitted model's terms

def test_new_text_is_counted_in_the_models_terms(tmp_path):
    root = write_text_folder(tmp_path / "texts")
    corpus = stc.readers.read_text_folder(root, stop_words="builtin")
    model = STC(n_topics=2, max_iter=3, random_state=0).fit(corpus.data)
    model.vocabulary_, model.text_options_ = corpus.vocabulary, corpus.text_options
    new = tmp_path / "new"
    new.mkdir()
    (new / "x.txt").write_text("ORBIT orbit puck zeppelin the")
    read = stc.readers.load_corpus(new, model=model)
    assert read.data.shape == (1, corpus.vocabulary.size)
    terms = dict(zip(corpus.vocabulary, read.data.toarray()[0]))
    assert terms["orbit"] == 2 and terms["puck"] == 1  # lower-cased as in training
    assert read.data.sum() == 3  # "zeppelin" is unknown, "the" a stop word
    model.transform(read.data)  # the model codes it


def test_matrix_with_its_own_vocabulary_is_aligned_to_the_model(tmp_path, newsgroups):
    train, test = newsgroups
    model = STC(n_topics=2, max_iter=2, random_state=0).fit(train.data)
    model.vocabulary_ = train.vocabulary
    # The test split written with its columns in reverse order and one extra term.
    order = np.arange(train.vocabulary.size)[::-1]
    X = sp.hstack([test.data[:, order], sp.csr_matrix(np.ones((test.data.shape[0], 1)))])
    dump_svmlight_file(X, test.target, str(tmp_path / "test.svm"), zero_based=True)
    (tmp_path / "vocab.txt").write_text("\n".join(list(train.vocabulary[order]) + ["zzz-new"]))
    read = stc.readers.load_corpus(tmp_path / "test.svm", model=model)
    assert same_matrix(read.data, test.data)
    # Without a vocabulary the columns must be the model's (SVMlight may leave off the last).
    bare_dir = tmp_path / "bare"
    bare_dir.mkdir()
    dump_svmlight_file(test.data[:, :10], test.target, str(bare_dir / "narrow.svm"),
                       zero_based=True)
    narrow = stc.readers.load_corpus(bare_dir / "narrow.svm", model=model)
    assert same_matrix(narrow.data[:, :10], test.data[:, :10])
    assert narrow.data.shape[1] == train.vocabulary.size
    small = STC(n_topics=2, max_iter=2, random_state=0).fit(train.data[:, :5])
    with pytest.raises(ValueError, match="has 10 term columns but the model knows 5"):
        stc.readers.load_corpus(bare_dir / "narrow.svm", model=small)
    with pytest.raises(ValueError, match="no vocabulary"):
        stc.readers.load_corpus(write_text_folder(tmp_path / "texts"), model=small)


def test_a_token_pattern_that_is_no_regular_expression_is_named(tmp_path):
    # it failed in CountVectorizer after every file was read, with re's bare message
    with pytest.raises(ValueError, match=r"^token_pattern '\(' is not a regular expression: "
                                         "missing \\)"):
        stc.readers.read_text_folder(tmp_path, token_pattern="(")


def test_a_path_or_vocabulary_of_the_wrong_type_is_named(tmp_path):
    with pytest.raises(TypeError, match="^path must be a file or folder path .* got NoneType$"):
        stc.readers.load_corpus(None)
    (tmp_path / "a.svm").write_text("0 1:2\n")
    with pytest.raises(TypeError, match="^vocabulary must be a file path or a sequence of str$"):
        stc.readers.load_corpus(tmp_path / "a.svm", vocabulary=3)  # was "'int' object is not iterable"


def test_zero_based_must_be_true_or_false(tmp_path):
    # "auto" let scikit-learn guess per batch: a batch without index 0 was read one-based,
    # its columns shifted by one, silently
    (tmp_path / "docs.svm").write_text("0 0:1 2:3\n1 2:3\n")
    for call in (lambda: stc.readers.read_svmlight(tmp_path / "docs.svm", zero_based="auto"),
                 lambda: stc.readers.iter_svmlight_batches(tmp_path / "docs.svm", 1,
                                                       zero_based="auto"),
                 lambda: stc.readers.read_svmlight(tmp_path / "docs.svm", zero_based=1)):
        with pytest.raises(TypeError, match=r"^zero_based must be True or False"):
            call()
