"""`stc.report`: one self-contained HTML page describing a fitted model."""
import base64
import datetime
import html
import io
from pathlib import Path

import numpy as np

from stc import __version__
from stc._utils.text import counted

from stc import inspection as _inspection
from stc import plotting

MAX_CHOSEN_WORDS = 24
DEFAULT_CHOSEN_WORDS = 12

STYLE = """
:root { --ink: #1f2933; --muted: #52606d; --line: #d9e2ec; --bar: #3b75af; --card: #f7f9fb; }
* { box-sizing: border-box; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       color: var(--ink); margin: 0 auto; max-width: 1200px; padding: 1.5rem 2rem 3rem;
       line-height: 1.45; }
h1 { font-size: 1.7rem; margin: 0 0 .2rem; }
h2 { font-size: 1.3rem; border-bottom: 2px solid var(--line); padding-bottom: .25rem;
     margin-top: 2.2rem; }
h3 { font-size: 1rem; margin: 0 0 .3rem; }
p.lead, p.note, .muted { color: var(--muted); }
nav a { margin-right: 1rem; color: var(--bar); text-decoration: none; }
table.kv { border-collapse: collapse; margin: .5rem 2rem .5rem 0; font-size: .92rem; }
table.kv td, table.kv th { border-bottom: 1px solid var(--line); padding: .2rem .8rem .2rem 0;
                           text-align: left; vertical-align: top; }
table.kv th { color: var(--muted); font-weight: 600; }
.row { display: flex; flex-wrap: wrap; align-items: flex-start; gap: 1rem; }
.figure { margin: .6rem 0; }
.figure img { max-width: 100%; height: auto; border: 1px solid var(--line); }
.topics { display: grid; grid-template-columns: repeat(auto-fill, minmax(250px, 1fr)); gap: .8rem; }
.topic { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: .6rem .7rem; }
.topic .scores { font-size: .8rem; color: var(--muted); margin: 0 0 .4rem; }
.bars { width: 100%; border-collapse: collapse; font-size: .85rem; }
.bars td { padding: 1px 0; }
.bars td.word { width: 38%; padding-right: .4rem; white-space: nowrap; overflow: hidden;
                text-overflow: ellipsis; max-width: 7rem; }
.bars td.weight { width: 18%; padding-left: .4rem; text-align: right; color: var(--muted); font-variant-numeric: tabular-nums; }
.bar { background: var(--bar); height: .8rem; border-radius: 2px; min-width: 1px; }
.stats { display: flex; flex-wrap: wrap; gap: 1rem; margin: .6rem 0; }
.stat { background: var(--card); border: 1px solid var(--line); border-radius: 6px;
        padding: .5rem .9rem; min-width: 11rem; }
.stat .value { font-size: 1.4rem; font-weight: 600; }
.stat .label { font-size: .8rem; color: var(--muted); }
footer { margin-top: 3rem; font-size: .8rem; color: var(--muted); }
"""


def _figure_to_img(figure, alt, dpi=100):
    """``<img>`` holding the figure as an inline PNG (works offline, no file beside the page)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return (f'<div class="figure"><img alt="{html.escape(alt)}" '
            f'src="data:image/png;base64,{data}"></div>')


def _table(rows):
    cells = "".join(f"<tr><th>{html.escape(str(key))}</th><td>{html.escape(str(value))}</td></tr>"
                    for key, value in rows)
    return f'<table class="kv">{cells}</table>'


def _format(value):
    if isinstance(value, float):
        return f"{value:.6g}"
    return repr(value) if isinstance(value, str) else str(value)


def _stat(value, label):
    return (f'<div class="stat"><div class="value">{html.escape(value)}</div>'
            f'<div class="label">{html.escape(label)}</div></div>')


def _topic_cards(words, scores):
    cards = []
    for k, topic in enumerate(words):
        largest = topic[0][1] if topic and topic[0][1] > 0 else 1.0
        rows = "".join(
            f'<tr><td class="word" title="{html.escape(str(term))}">{html.escape(str(term))}</td>'
            f'<td><div class="bar" style="width: {100 * weight / largest:.1f}%"></div></td>'
            f'<td class="weight">{weight:.4f}</td></tr>'
            for term, weight in topic)
        score_text = " &middot; ".join(f"{html.escape(name)} {values[k]:.3f}"
                                       for name, values in scores.items())
        cards.append(f'<div class="topic"><h3>Topic {k}</h3>'
                     f'<p class="scores">{score_text or "coherence not available"}</p>'
                     f'<table class="bars">{rows}</table></div>')
    return '<div class="topics">' + "".join(cards) + "</div>"


def _default_words(X, y, vocabulary):
    if y is not None:
        n_classes = np.unique(y).size
        per_class = max(1, min(3, MAX_CHOSEN_WORDS // n_classes))
        return _inspection.representative_words(X, y, vocabulary, per_class)[:MAX_CHOSEN_WORDS]
    doc_freq = np.asarray((X > 0).sum(axis=0)).ravel()
    order = np.argsort(-doc_freq, kind="stable")[:DEFAULT_CHOSEN_WORDS]
    order = order[doc_freq[order] > 0]
    return [vocabulary[j] for j in order]


def report(model, X, path, y=None, *, vocabulary=None, words=None, class_names=None,
           n_words=10, title=None):
    """Write one self-contained HTML page describing a fitted model.

    The page inlines its CSS and images (PNG) and loads nothing else: it can
    be mailed or opened offline. It shows the model's parameters and fit
    (objective per outer iteration, fit time), each topic's top words as
    bars with their coherence (UMass and NPMI over ``X``,
    `stc.inspection.coherence`), the sparsity of the word and document codes of
    ``X``, the average word codes of chosen words, and, given labels ``y``,
    the average document code of each class and, for a classifier such as
    `MedSTC`, its confusion matrix on ``(X, y)``.

    Needs matplotlib (``pip install 'sparse-topical-coding[plot]'``).

    Parameters
    ----------
    model : fitted STC or MedSTC
    X : array-like or sparse matrix of shape (n_docs, n_terms)
        Documents to describe: codes, sparsity and coherence are computed on
        them (the training documents, or held-out ones).
    path : str or path-like
        Where to write the page.
    y : array-like of shape (n_docs,), optional
        Labels of ``X``.
    vocabulary : sequence of str, optional
        Term of every column; default the model's ``vocabulary_`` if any,
        else the column indices.
    words : sequence of str or int, optional
        Words whose codes are shown. Default: with ``y``, the terms in most
        documents of each class (`stc.inspection.representative_words`, at most
        24 in all); without, the 12 terms in most documents of ``X``.
    class_names : sequence of str, optional
        Names of the sorted distinct labels of ``y``.
    n_words : int, default=10
        Top words shown (and scored) per topic.
    title : str, optional

    Returns
    -------
    pathlib.Path
        The page written.
    """
    plotting._figure_class()  # without matplotlib, fail before any work
    X = _inspection._count_matrix(model, X)
    vocabulary = _inspection._vocabulary(model, vocabulary)
    y, class_names = _checked_labels(X, y, class_names)
    chosen = list(words) if words is not None else _default_words(X, y, vocabulary)
    sections = [_fit_section(model),
                _topics_section(model, X, vocabulary, n_words),
                _sparsity_section(model, X)]
    if chosen:
        sections.append(_word_codes_section(model, X, chosen, vocabulary))
    if y is not None:
        sections.append(_classes_section(model, X, y, class_names))
    title = title or f"{type(model).__name__} model report"
    path = Path(path)
    path.write_text(_page(title, _header(model, X, title, y is not None), sections),
                    encoding="utf-8")
    return path


def _checked_labels(X, y, class_names):
    """``y`` as an array with one label per document, and ``class_names`` as strings."""
    if y is None:
        return None, class_names
    y = np.asarray(y)
    if y.shape != (X.shape[0],):
        raise ValueError(f"y must have one label per document ({X.shape[0]}), "
                         f"got shape {y.shape}")
    if class_names is not None:
        class_names = [str(name) for name in class_names]
        if len(class_names) != np.unique(y).size:
            raise ValueError(f"class_names must have one name per class of y "
                             f"({np.unique(y).size}), got {len(class_names)}")
    return y, class_names


# ---------------------------------------------------------------------------
# The page's sections, in the order they appear
# ---------------------------------------------------------------------------

def _header(model, X, title, with_classes):
    """Title, one line naming the model and the documents, and the links to the sections."""
    n_topics, n_terms = model.components_.shape
    return (f"<header><h1>{html.escape(title)}</h1>"
            f'<p class="lead">{html.escape(type(model).__name__)} with {n_topics} topics over '
            f"{n_terms} terms, described on {X.shape[0]} documents.</p>"
            f"<nav>{_navigation(with_classes)}</nav></header>")


def _navigation(with_classes):
    # the word-codes link stays even when that section is left out (as it always has)
    return "".join(f'<a href="#{anchor}">{label}</a>' for anchor, label in (
        ("fit", "Fit"), ("topics", "Topics"), ("sparsity", "Sparsity"),
        ("word-codes", "Word codes"), ("classes", "Classes"))
        if anchor != "classes" or with_classes)


def _fit_rows(model):
    """(label, value) rows of the fit: sizes, iterations, objective, time, accuracies."""
    n_topics, n_terms = model.components_.shape
    rows = [("topics (K)", n_topics), ("terms", n_terms),
            ("outer iterations", getattr(model, "n_iter_", "?"))]
    objective = getattr(model, "objective_", None)
    if objective is not None and len(objective):
        rows.append(("final objective", f"{objective[-1]:.6g}"))
    fit_time = getattr(model, "fit_time_", None)
    rows.append(("fit time", f"{fit_time:.2f} s" if fit_time is not None else "not recorded"))
    if getattr(model, "train_accuracy_", None) is not None and len(model.train_accuracy_):
        rows.append(("training accuracy (joint codes)", f"{model.train_accuracy_[-1]:.3f}"))
    if getattr(model, "refit_train_accuracy_", None) is not None:
        rows.append(("training accuracy (label-free codes)",
                     f"{model.refit_train_accuracy_:.3f}"))
    return rows


def _fit_section(model):
    """The fit and the parameters side by side, then the objective curve if recorded."""
    params = [(key, _format(value)) for key, value in sorted(model.get_params().items())]
    parts = [f'<section id="fit"><h2>Parameters and fit</h2><div class="row">'
             f'<div><h3>Fit</h3>{_table(_fit_rows(model))}</div>'
             f'<div><h3>Parameters</h3>{_table(params)}</div></div>']
    objective = getattr(model, "objective_", None)
    if objective is not None and len(objective):
        parts.append(_figure_to_img(plotting.plot_objective(model),
                                    "objective after each outer iteration"))
    parts.append("</section>")
    return "".join(parts)


def _coherence_scores(model, X, n_words):
    """{label: per-topic coherence} of the measures that apply, and notes on the others."""
    scores, notes = {}, []
    for measure, label in (("u_mass", "UMass"), ("npmi", "NPMI")):
        try:
            scores[label] = _inspection.coherence(model, X, measure=measure, top_n=max(2, n_words))
        except ValueError as error:
            notes.append(f"{label} not available: {error}")
    return scores, notes


def _topics_section(model, X, vocabulary, n_words):
    """Each topic's top words as bars, with its coherence over ``X``."""
    top = _inspection.top_words(model, vocabulary, n_words)
    scores, notes = _coherence_scores(model, X, n_words)
    explanation = ("Each topic's heaviest words and their weights (a topic's weights over all "
                   f"{model.components_.shape[1]} terms sum to 1). Coherence over these "
                   f"{X.shape[0]} documents, whole-document co-occurrence: UMass (at most "
                   "about 0, higher is better) and NPMI (from -1 to 1, 0 for independent "
                   "words).")
    if scores:
        means = ", ".join(f"{label} {values.mean():.3f}" for label, values in scores.items())
        explanation += f" Mean over topics: {means}."
    return (f'<section id="topics"><h2>Topics</h2><p class="note">'
            f'{html.escape(explanation)}</p>'
            + "".join(f'<p class="note">{html.escape(note)}</p>' for note in notes)
            + _topic_cards(top, scores) + "</section>")


def _sparsity_section(model, X):
    """Zero shares and active topics of the word and document codes of ``X``."""
    if X.nnz == 0:  # no word code to average: the shares would be NaN
        note = (f"No word of the model's terms occurs in the {counted(X.shape[0], 'document')} "
                "described: there are no word codes, and the document codes are zero.")
        return ('<section id="sparsity"><h2>Sparsity of the codes</h2>'
                f'<p class="note">{html.escape(note)}</p></section>')
    n_topics = model.components_.shape[0]
    sparsity = _inspection.code_sparsity(model, X)
    stats = "".join([
        _stat(f"{100 * sparsity['word_zero_share']:.1f} %", "of word-code entries are zero"),
        _stat(f"{np.mean(sparsity['word_active_topics']):.2f}",
              f"topics per word code, on average (of {n_topics})"),
        _stat(f"{100 * sparsity['document_zero_share']:.1f} %",
              "of document-code entries are zero"),
        _stat(f"{np.mean(sparsity['document_active_topics']):.2f}",
              f"topics per document code, on average (of {n_topics})"),
    ])
    return ('<section id="sparsity"><h2>Sparsity of the codes</h2>'
            f'<p class="note">Codes of the {X.shape[0]} documents and their {X.nnz} observed '
            f'(document, word) pairs, computed with the fitted topics.</p>'
            f'<div class="stats">{stats}</div>'
            + _figure_to_img(plotting.plot_active_topics(model, X),
                             "number of non-zero topics per word code and per document code")
            + "</section>")


def _word_codes_section(model, X, chosen, vocabulary):
    """Heat map of the average word codes of the ``chosen`` words."""
    return ('<section id="word-codes"><h2>Word codes of chosen words</h2>'
            '<p class="note">Average code of each word over the documents it occurs in: '
            'which topics the word activates, and how strongly (blank: zero). Only topics '
            'that at least one of these words activates are shown.</p>'
            + _figure_to_img(plotting.plot_word_codes(model, X, chosen, vocabulary),
                             "average word codes of chosen words")
            + "</section>")


def _classes_section(model, X, y, class_names):
    """Average document code per class, and a classifier's confusion matrix."""
    parts = ['<section id="classes"><h2>Classes</h2>',
             _figure_to_img(plotting.plot_class_codes(model, X, y, class_names),
                            "average document code per class")]
    if hasattr(model, "predict") and hasattr(model, "classes_"):
        names = None
        if class_names is not None:  # named for y's labels; the matrix wants the model's
            by_label = dict(zip(np.unique(y).tolist(), class_names))
            names = [by_label.get(label, str(label))
                     for label in np.asarray(model.classes_).tolist()]
        parts.append(_figure_to_img(plotting.plot_confusion_matrix(model, X, y, names),
                                    "confusion matrix"))
    parts.append("</section>")
    return "".join(parts)


def _page(title, header, sections):
    """The whole document: head with the inlined style, header, sections, footer."""
    created = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>"
            + header + "".join(sections)
            + f"<footer>Written by stc {html.escape(__version__)} on {created}.</footer>"
            "</body></html>\n")
