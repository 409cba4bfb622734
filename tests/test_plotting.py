"""stc.plotting: each figure draws the numbers stc.inspection computes."""
import sys

import numpy as np
import pytest
from sklearn.metrics import confusion_matrix

from stc import MedSTC, STC
from stc import inspection
from stc.datasets import load_newsgroups_split

from conftest import brief_fit, optional



@pytest.fixture(scope="module")
def plotting():
    optional("matplotlib")
    from stc import plotting
    return plotting


@pytest.fixture(scope="module")
def data():
    train, test = load_newsgroups_split()
    rows = np.arange(0, train.data.shape[0], 6)
    return train.data[rows], train.target[rows], test.data[::4], test.target[::4], train


@pytest.fixture(scope="module")
def model(data):
    X, _, _, _, _ = data
    return STC(n_topics=5, max_iter=8, random_state=0).fit(X)


def _png_size(path):
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(header[16:20], "big"), int.from_bytes(header[20:24], "big")


@brief_fit
def test_top_words_grid_draws_each_topics_weights(plotting, model, data, tmp_path):
    _, _, _, _, train = data
    coherence = np.arange(5) / 10.0
    figure = plotting.plot_top_words(model, train.vocabulary, n=6, n_cols=2, coherence=coherence)
    visible = [ax for ax in figure.axes if ax.get_visible()]
    assert len(visible) == 5 and len(figure.axes) == 6  # 3 x 2 grid, last panel hidden
    words = inspection.top_words(model, train.vocabulary, 6)
    for k, ax in enumerate(visible):
        labels = [label.get_text() for label in ax.get_yticklabels()]
        assert labels == [w for w, _ in words[k]][::-1]
        widths = [bar.get_width() for bar in ax.patches]
        np.testing.assert_allclose(widths, [weight for _, weight in words[k]][::-1])
        assert ax.get_title() == f"topic {k}  (coherence {coherence[k]:.2f})"
    figure.savefig(tmp_path / "top.png")
    width, height = _png_size(tmp_path / "top.png")
    assert width > 300 and height > 300


def test_a_coherence_of_the_wrong_length_is_named(plotting, model):
    with pytest.raises(ValueError, match=r"^coherence must hold one score per topic \(5\), got "
                                         r"shape \(1,\)"):  # an IndexError before
        plotting.plot_top_words(model, coherence=[1.0])


def test_top_words_of_chosen_topics(plotting, model):
    figure = plotting.plot_top_words(model, n=3, topics=[4, 1])
    assert [ax.get_title() for ax in figure.axes if ax.get_visible()] == ["topic 4", "topic 1"]
    with pytest.raises(ValueError, match="topic 7 does not exist"):
        plotting.plot_top_words(model, topics=[7])


def test_word_code_heat_map_shows_average_word_codes(plotting, model, data):
    X, _, _, _, train = data
    words = ["space", "hockey", "image"]
    figure = plotting.plot_word_codes(model, X, words, train.vocabulary)
    ax = figure.axes[0]
    expected = inspection.average_word_codes(model, X, words, train.vocabulary)
    active = np.flatnonzero(np.any(expected > 0, axis=0))
    np.testing.assert_allclose(ax.images[0].get_array(), expected[:, active])
    assert [t.get_text() for t in ax.get_yticklabels()] == words
    assert [t.get_text() for t in ax.get_xticklabels()] == [f"T{k}" for k in active]
    # every topic on request
    figure = plotting.plot_word_codes(model, X, words, train.vocabulary, active_only=False)
    assert figure.axes[0].images[0].get_array().shape == (3, 5)


def test_class_code_heat_map_shows_class_means(plotting, model, data):
    X, y, _, _, train = data
    figure = plotting.plot_class_codes(model, X, y, class_names=train.target_names)
    ax = figure.axes[0]
    _, expected = inspection.average_document_codes(model, X, y)
    np.testing.assert_allclose(ax.images[0].get_array(), expected)
    assert [t.get_text() for t in ax.get_yticklabels()] == list(train.target_names)
    with pytest.raises(ValueError, match="one name per class"):
        plotting.plot_class_codes(model, X, y, class_names=["a"])


def test_confusion_matrix_counts_predictions(plotting, data):
    X, y, X_test, y_test, train = data
    classifier = MedSTC(n_topics=5, max_iter=3, random_state=0).fit(X, y)
    figure = plotting.plot_confusion_matrix(classifier, X_test, y_test, train.target_names)
    ax = figure.axes[0]
    expected = confusion_matrix(y_test, classifier.predict(X_test))
    np.testing.assert_array_equal(ax.images[0].get_array(), expected)
    assert sorted(int(t.get_text()) for t in ax.texts) == sorted(expected.ravel())
    accuracy = np.trace(expected) / expected.sum()
    assert ax.get_title() == f"Confusion matrix (accuracy {accuracy:.3f})"


def test_confusion_matrix_of_labels_the_model_never_saw(plotting, data):
    # they were dropped, and the title's accuracy counted only the other documents
    X, y, X_test, y_test, train = data
    seen = y < 2  # the model knows classes 0 and 1; the test documents hold 0, 1 and 2
    classifier = MedSTC(n_topics=5, max_iter=3, random_state=0).fit(X[seen], y[seen])
    figure = plotting.plot_confusion_matrix(classifier, X_test, y_test, train.target_names[:2])
    ax = figure.axes[0]
    labels = np.unique(y_test)
    assert labels.tolist() == [0, 1, 2]
    expected = confusion_matrix(y_test, classifier.predict(X_test), labels=labels)
    np.testing.assert_array_equal(ax.images[0].get_array(), expected)
    assert [t.get_text() for t in ax.get_yticklabels()] == [*train.target_names[:2], "2"]
    assert ax.get_title() == f"Confusion matrix (accuracy {classifier.score(X_test, y_test):.3f})"


def test_objective_and_active_topic_plots(plotting, model, data):
    X, _, _, _, _ = data
    line = plotting.plot_objective(model).axes[0].lines[0]
    np.testing.assert_array_equal(line.get_ydata(), model.objective_)
    figure = plotting.plot_active_topics(model, X)
    sparsity = inspection.code_sparsity(model, X)
    for ax, key in zip(figure.axes, ("word_active_topics", "document_active_topics")):
        heights = [bar.get_height() for bar in ax.patches]
        np.testing.assert_array_equal(heights, np.bincount(sparsity[key], minlength=6))


def test_draws_into_a_given_axes(plotting, model):
    from matplotlib.figure import Figure

    figure = Figure()
    ax = figure.add_subplot()
    assert plotting.plot_objective(model, ax=ax) is figure


def test_missing_matplotlib_gives_a_clear_error(model, monkeypatch):
    from stc import plotting

    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # import now fails
    with pytest.raises(ImportError, match=r"pip install 'sparse-topical-coding\[plot\]'"):
        plotting.plot_objective(model)
