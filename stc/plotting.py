"""Pictures of a fitted model (needs matplotlib: ``pip install 'sparse-topical-coding[plot]'``).

Every function returns a :class:`matplotlib.figure.Figure`, made without
pyplot (no window, no global state): save it with ``fig.savefig(path)``, or
let Jupyter show it. Functions drawing a single panel also accept an
existing ``ax`` to draw into, and then return ``ax.figure``.

* `plot_top_words`: each topic's top words as a bar chart, in a grid;
* `plot_word_codes`: heat map of the average word codes of chosen words
  (which topics each word activates, the paper's Fig. 3);
* `plot_class_codes`: heat map of the average document code of each class;
* `plot_confusion_matrix`: a classifier's (MedSTC's) confusion matrix;
* `plot_objective`: the objective after each outer iteration;
* `plot_active_topics`: how many topics each word code and each document
  code uses.
"""
import numpy as np

from stc import inspection as _inspection

__all__ = [
    "plot_active_topics",
    "plot_class_codes",
    "plot_confusion_matrix",
    "plot_objective",
    "plot_top_words",
    "plot_word_codes",
]

BAR_COLOR = "#3b75af"
HEAT_MAP = "Blues"  # zero is white, so the zeros of sparse codes stand out


def _figure_class():
    try:
        from matplotlib.figure import Figure
    except ImportError as error:
        raise ImportError("stc.plotting needs matplotlib: "
                          "pip install 'sparse-topical-coding[plot]'") from error
    return Figure


def _new_axes(ax, figsize):
    """``ax`` if given, else the single axes of a new figure of size ``figsize``."""
    if ax is not None:
        return ax
    figure = _figure_class()(figsize=figsize, layout="constrained")
    return figure.add_subplot()


def _topic_label(k):
    return f"T{k}"


def plot_top_words(model, vocabulary=None, n=10, topics=None, n_cols=4, coherence=None):
    """A grid of horizontal bar charts: the ``n`` heaviest words of each topic.

    Parameters
    ----------
    model : fitted STC or MedSTC
    vocabulary : sequence of str, optional
        Term of every column (see `stc.inspection.top_words`).
    n : int, default=10
        Words per topic.
    topics : sequence of int, optional
        Which topics to draw (default: all).
    n_cols : int, default=4
        Panels per row.
    coherence : array-like of shape (n_topics,), optional
        A score per topic (e.g. `stc.inspection.coherence`), shown in each title.

    Returns
    -------
    matplotlib.figure.Figure
    """
    Figure = _figure_class()
    words = _inspection.top_words(model, vocabulary, n)
    topics = range(len(words)) if topics is None else [int(k) for k in topics]
    topics = list(topics)
    if not topics:
        raise ValueError("topics must name at least one topic")
    for k in topics:
        if not 0 <= k < len(words):
            raise ValueError(f"topics: topic {k} does not exist (the model has {len(words)})")
    if coherence is not None and np.shape(coherence) != (len(words),):
        raise ValueError(f"coherence must hold one score per topic ({len(words)}), got shape "
                         f"{np.shape(coherence)}")
    n_cols = max(1, min(int(n_cols), len(topics)))
    n_rows = -(-len(topics) // n_cols)
    n_shown = len(words[0])
    figure = Figure(figsize=(3.0 * n_cols, (0.22 * n_shown + 0.7) * n_rows),
                    layout="constrained")
    axes = figure.subplots(n_rows, n_cols, squeeze=False)
    for panel, ax in enumerate(axes.ravel()):
        if panel >= len(topics):
            ax.set_visible(False)
            continue
        k = topics[panel]
        terms = [term for term, _ in words[k]][::-1]  # heaviest at the top
        weights = [weight for _, weight in words[k]][::-1]
        ax.barh(range(len(terms)), weights, color=BAR_COLOR)
        ax.set_yticks(range(len(terms)), terms)
        ax.tick_params(axis="x", labelsize=8)
        ax.margins(y=0.01)
        title = f"topic {k}"
        if coherence is not None:
            title += f"  (coherence {float(np.asarray(coherence)[k]):.2f})"
        ax.set_title(title, fontsize=10)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    figure.supxlabel("weight of the word in the topic (beta)", fontsize=9)
    return figure


def _heat_map(ax, values, row_labels, column_labels, colorbar_label):
    image = ax.imshow(values, cmap=HEAT_MAP, aspect="auto", vmin=0.0, interpolation="nearest")
    ax.set_yticks(range(len(row_labels)), row_labels)
    ax.set_xticks(range(len(column_labels)), column_labels,
                  rotation=90 if len(column_labels) > 12 else 0)
    ax.figure.colorbar(image, ax=ax, label=colorbar_label, shrink=0.9)
    return image


def plot_word_codes(model, X, words, vocabulary=None, ax=None, active_only=True):
    """Heat map of the average word codes of ``words`` over the documents of ``X``.

    Rows are words, columns topics; cell (n, k) is the mean of s_dnk over the
    documents containing word n (`stc.inspection.average_word_codes`). With
    ``active_only`` (default) only topics that at least one of the words
    activates are drawn, as in the paper's Fig. 3.

    Returns
    -------
    matplotlib.figure.Figure
    """
    codes = _inspection.average_word_codes(model, X, words, vocabulary)
    columns = np.arange(codes.shape[1])
    if active_only and np.any(codes > 0):
        columns = np.flatnonzero(np.any(codes > 0, axis=0))
    labels = [str(w) if not isinstance(w, (int, np.integer)) or vocabulary is None
              else str(np.asarray(vocabulary)[w]) for w in words]
    ax = _new_axes(ax, figsize=(max(4.0, 0.4 * columns.size + 2.5),
                                max(2.5, 0.32 * len(labels) + 1.2)))
    _heat_map(ax, codes[:, columns], labels, [_topic_label(k) for k in columns],
              "average word code")
    ax.set_xlabel("topic")
    ax.set_title("Which topics each word activates", fontsize=10)
    return ax.figure


def plot_class_codes(model, X, y, class_names=None, ax=None):
    """Heat map of the average document code theta of each class.

    ``class_names`` replaces the sorted labels of ``y`` on the axis.

    Returns
    -------
    matplotlib.figure.Figure
    """
    classes, means = _inspection.average_document_codes(model, X, y)
    labels = [str(c) for c in (classes if class_names is None else class_names)]
    if len(labels) != classes.size:
        raise ValueError(f"class_names must have one name per class ({classes.size}), "
                         f"got {len(labels)}")
    ax = _new_axes(ax, figsize=(max(4.0, 0.35 * means.shape[1] + 3.0),
                                max(2.2, 0.35 * len(labels) + 1.2)))
    _heat_map(ax, means, labels, [_topic_label(k) for k in range(means.shape[1])],
              "average document code")
    ax.set_xlabel("topic")
    ax.set_title("Average document code per class", fontsize=10)
    return ax.figure


def plot_confusion_matrix(model, X, y, class_names=None, ax=None):
    """Confusion matrix of ``model.predict(X)`` against the true labels ``y``.

    Rows are true classes, columns predicted ones; each cell shows its count.
    Labels of ``y`` that are not among the model's classes get rows of their
    own after them (named by the label: the model never predicts them). The
    title gives the accuracy over all documents, ``model.score(X, y)``.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from sklearn.metrics import confusion_matrix  # here: the other plots need no sklearn

    y = np.asarray(y)
    predicted = model.predict(X)
    classes = getattr(model, "classes_", None)
    if classes is None:
        classes = np.unique(np.concatenate([y, predicted]))
    labels = [str(c) for c in (classes if class_names is None else class_names)]
    if len(labels) != len(classes):
        raise ValueError(f"class_names must have one name per class ({len(classes)}), "
                         f"got {len(labels)}")
    known = set(np.asarray(classes).tolist())
    unseen = [label for label in np.unique(y).tolist() if label not in known]
    matrix = confusion_matrix(y, predicted, labels=[*np.asarray(classes).tolist(), *unseen])
    labels += [str(label) for label in unseen]
    size = max(3.5, 0.45 * len(labels) + 2.5)
    ax = _new_axes(ax, figsize=(size + 0.8, size))
    image = ax.imshow(matrix, cmap=HEAT_MAP, vmin=0, interpolation="nearest")
    ax.set_xticks(range(len(labels)), labels, rotation=90)
    ax.set_yticks(range(len(labels)), labels)
    ax.set_xlabel("predicted class")
    ax.set_ylabel("true class")
    threshold = matrix.max() / 2.0
    fontsize = 9 if len(labels) <= 10 else 7
    for i in range(matrix.shape[0]):
        for j in range(matrix.shape[1]):
            ax.text(j, i, str(matrix[i, j]), ha="center", va="center", fontsize=fontsize,
                    color="white" if matrix[i, j] > threshold else "black")
    accuracy = np.trace(matrix) / max(matrix.sum(), 1)
    ax.set_title(f"Confusion matrix (accuracy {accuracy:.3f})", fontsize=10)
    ax.figure.colorbar(image, ax=ax, label="documents", shrink=0.8)
    return ax.figure


def plot_objective(model, ax=None):
    """The objective after each outer iteration of ``fit`` (``model.objective_``).

    Returns
    -------
    matplotlib.figure.Figure
    """
    objective = getattr(model, "objective_", None)
    if objective is None:
        raise ValueError(f"{type(model).__name__} has no objective_: fit it first")
    ax = _new_axes(ax, figsize=(5.0, 3.0))
    iterations = np.arange(1, len(objective) + 1)
    ax.plot(iterations, objective, marker="o", markersize=3, color=BAR_COLOR)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.ticklabel_format(axis="y", useOffset=False)
    ax.set_xlabel("outer iteration")
    ax.set_ylabel("objective")
    ax.set_title("Objective during fit", fontsize=10)
    ax.grid(alpha=0.3)
    return ax.figure


def plot_active_topics(model, X):
    """Histograms of the number of non-zero topics per word code and per document code.

    Returns
    -------
    matplotlib.figure.Figure
    """
    Figure = _figure_class()
    sparsity = _inspection.code_sparsity(model, X)
    n_topics = model.components_.shape[0]
    figure = Figure(figsize=(8.0, 3.0), layout="constrained")
    axes = figure.subplots(1, 2)
    for ax, key, share_key, what in (
            (axes[0], "word_active_topics", "word_zero_share", "word codes"),
            (axes[1], "document_active_topics", "document_zero_share", "document codes")):
        counts = np.bincount(sparsity[key], minlength=n_topics + 1)
        ax.bar(np.arange(n_topics + 1), counts, color=BAR_COLOR, width=0.85)
        ax.set_xlabel("non-zero topics in the code")
        ax.set_ylabel("codes")
        ax.set_title(f"{what}: {100 * sparsity[share_key]:.1f} % zeros", fontsize=10)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    return figure
