"""reproduce_paper.py's reporting part: Fig. 2 to 6, the verdicts and the report.

It reads only the records and figure data of the fits (`_reproduction_measure`)
and bench_sparsity.py's cached frontier, so a full cache redraws everything
without the corpus.
"""
import os

import numpy as np

from _common import LDA_THRESHOLDS, REPO_ROOT, corpus_name, new_figure
from _machine import machine_info
from _reproduction_measure import MODELS
from _sparsity_report import describe

DEFAULT_OUTPUT = os.path.join(REPO_ROOT, "docs", "reproduction.md")
TITLES = {"STC": "STC, the paper's setting: average word code as shares",
          "STC-knee": "STC-knee: average word code as shares",
          "LDA": "LDA: average per-word posterior"}


def write_report(args, grid, fits, frontier_rows):
    """The figures (reproduction/ beside ``args.output``) and the report; returns how many
    figures were drawn."""
    topics = list(args.topics or grid["topics"])
    images = draw_figures(args, grid, topics, fits.records, fits.figures, frontier_rows)
    with open(args.output, "w", encoding="utf-8") as handle:
        handle.write(render(args, grid, corpus_line(fits.corpus, args.quick), fits.records,
                            fits.figures, images, frontier_rows))
        if fits.missing:
            handle.write("\n## Not measured\n\nRendered with `--cached-only`; these fits of the "
                         f"run ({len(fits.missing)}) are not in the cache:\n\n"
                         + "\n".join(missing_lines(fits.missing, args.models)) + "\n")
    return len(images)


def draw_figures(args, grid, topics, records, figures, frontier_rows):
    """Fig. 2 to 6 as PNG files; {figure: its path from the report}."""
    image_dir = os.path.join(os.path.dirname(os.path.abspath(args.output)), "reproduction")
    os.makedirs(image_dir, exist_ok=True)
    images = {}

    def draw(key, function, *inputs):
        function(*inputs, os.path.join(image_dir, f"{key}.png"))
        images[key] = f"reproduction/{key}.png"

    draw("fig2", figure_2, records, topics, frontier_rows, grid["frontier_topics"],
         corpus_name(args.quick))
    if {"STC", "LDA"} <= figures.keys():
        draw("fig3", figure_3, [(TITLES[n], figures[n]) for n in ("STC", "STC-knee", "LDA")
                                if n in figures])
    if {"STC", "MedSTC"} <= figures.keys():
        draw("fig4", figure_4, figures["STC"], figures["MedSTC"])
    draw("fig5", figure_5, records, topics)
    draw("fig6", figure_6, records, topics)
    return images


def corpus_line(corpus, quick):
    """The data line: the corpus read, else which corpus the cached fits were made on."""
    if corpus is not None:
        return corpus.summary
    return "as in the cached fits: " + ("the embedded three-group corpus" if quick else
                                        "20 Newsgroups (`--data`, by default "
                                        "../shared/data/20news from the repository root), its "
                                        "full train and test splits")


# ---------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------

def summarise(records, name, K, key):
    values = [r[key] for (n, k, _), r in records.items() if n == name and k == K and key in r]
    return (float(np.mean(values)), float(np.std(values)), len(values)) if values else None


def line_plot(ax, records, names, topics, key, errorbars=True):
    for name in names:
        points = [(K, summarise(records, name, K, key)) for K in topics]
        points = [(K, s) for K, s in points if s is not None]
        if not points:
            continue
        xs = [K for K, _ in points]
        means = [s[0] for _, s in points]
        stds = [s[1] for _, s in points] if errorbars else None
        ax.errorbar(xs, means, yerr=stds, marker="o", capsize=3, label=name)
    ax.set_xlabel("number of topics K")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)


def figure_2(records, topics, frontier_rows, frontier_K, corpus_name, path):
    fig = new_figure(12, 4.8)
    left, right = fig.subplots(1, 2)
    frontier_panel(left, frontier_rows, frontier_K)
    line_plot(right, records, ["STC", "STC-knee", "gaussSTC", "MedSTC", "LDA", "NMF"], topics,
              "word_zero")
    right.set_ylabel("share of zero word codes (test)")
    right.set_ylim(0, 1)
    right.set_title("(R) word-code sparsity against K (LDA: posterior < 1e-3)", fontsize=10)
    fig.suptitle(f"Fig. 2, {corpus_name}")
    fig.savefig(path, dpi=110)


def frontier_panel(ax, frontier_rows, K):
    """Fig. 2 (left): bench_sparsity.py's sparsity-accuracy frontier at K."""
    lda = sorted(frontier_rows.get("lda", []), key=lambda r: r["word_zero"])
    for i, threshold in enumerate(LDA_THRESHOLDS):
        ax.plot([r["word_zero_by_threshold"][i] for r in lda], [r["accuracy"] for r in lda],
                "^--", label=f"LDA + SVM over alpha (zeros < {threshold:g})")
    for penalty in ("l2", "l1"):
        rows = sorted([r for r in frontier_rows.get("stc", []) if r["rho_units"] == "relative"
                     and r["theta_penalty"] == penalty and r["lambda_"] == 0.1],
                    key=lambda r: r["word_zero"])
        if rows:
            ax.plot([r["word_zero"] for r in rows], [r["accuracy"] for r in rows], "o-",
                    label=f"STC + SVM over rho, theta {penalty}")
    recoded = sorted([r for r in frontier_rows.get("stc-recoded", [])
                    if r["topics_of"]["label"] != "paper"], key=lambda r: r["word_zero"])
    if recoded:
        fitted = recoded[0]["topics_of"]
        topics_rho = fitted["rho"]
        # the fit's own codes start the curve
        recoded = [r for r in frontier_rows.get("stc", []) if r["label"] == fitted["label"]
                 and all(r[k] == fitted[k] for k in ("rho", "rho_units", "theta_penalty",
                                                     "lambda_"))] + recoded
        ax.plot([r["word_zero"] for r in recoded], [r["accuracy"] for r in recoded], "D:",
                label=f"STC + SVM, topics fitted at rho {topics_rho:g}, coded at larger rho")
    med = sorted(frontier_rows.get("medstc", []), key=lambda r: r["word_zero"])
    if med:
        ax.plot([r["word_zero"] for r in med], [r["accuracy"] for r in med], "s-",
                label="MedSTC over rho (C, lambda_ as in results_sparsity.md)")
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of zero word codes (test)")
    ax.set_ylabel("test accuracy")
    ax.set_title(f"(L) sparsity against accuracy, K = {K}", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)


def heat_map(ax, values, rows, columns, title, fig):
    image = ax.imshow(values, aspect="auto", cmap="viridis", vmin=0, interpolation="nearest")
    ax.set_yticks(range(len(rows)), rows, fontsize=8)
    ax.set_xticks(range(len(columns)), columns, rotation=90, fontsize=6)
    ax.set_title(title, fontsize=10)
    fig.colorbar(image, ax=ax, shrink=0.8)


def word_shares(word_codes):
    """Each word's average code as shares of its sum (LDA's posteriors already are)."""
    codes = np.asarray(word_codes, dtype=np.float64)
    totals = codes.sum(axis=1, keepdims=True)
    return codes / np.where(totals > 0, totals, 1.0)


def topics_for_mass(shares, mass=0.9):
    """Per word: the fewest topics whose shares add up to ``mass``."""
    ordered = -np.sort(-shares, axis=1)
    return np.argmax(np.cumsum(ordered, axis=1) >= mass - 1e-12, axis=1) + 1


def figure_3(panels, path):
    """``panels``: (title, figure data) pairs, drawn side by side."""
    # Every model's rows as shares, and the same rule for which topics are drawn.
    shown = []
    for title, data in panels:
        codes = word_shares(data["word_codes"])
        shown.append((title, data, codes, np.flatnonzero(np.any(codes >= 0.05, axis=0))))
    width = sum(active.size for *_, active in shown)
    fig = new_figure(max(10, 0.22 * width + 6 * len(shown)), 7.5)
    axes = fig.subplots(1, len(shown), width_ratios=[max(a.size, 1) for *_, a in shown])
    for ax, (title, data, codes, active) in zip(np.atleast_1d(axes), shown):
        heat_map(ax, codes[:, active], data["words"],
                 [f"T{k}: {data['topic_labels'][k]}" for k in active],
                 f"{title} (topics >= 0.05 for a word)", fig)
    fig.suptitle("Fig. 3: average word codes of representative words")
    fig.savefig(path, dpi=110)


def figure_4(stc_data, med_data, path):
    fig = new_figure(14, 6.5)
    top, bottom = fig.subplots(2, 1)
    for ax, data, name in ((top, stc_data, "STC"), (bottom, med_data, "MedSTC")):
        codes = np.asarray(data["class_codes"])
        heat_map(ax, codes, data["categories"],
                 [f"T{k}: {label}" for k, label in enumerate(data["topic_labels"])],
                 f"{name}: average normalised document code per category", fig)
    fig.suptitle("Fig. 4: average document code theta per category")
    fig.savefig(path, dpi=110)


def figure_5(records, topics, path):
    fig = new_figure(7, 4.8)
    ax = fig.subplots()
    line_plot(ax, records, ["MedSTC", "STC", "STC-knee", "gaussSTC", "gaussMedSTC", "LDA", "NMF"],
              topics, "accuracy")
    ax.set_ylabel("test accuracy (mean and std over seeds)")
    ax.set_title("Fig. 5: accuracy (STC, gaussSTC, LDA, NMF with a LinearSVC)", fontsize=10)
    fig.savefig(path, dpi=110)


def figure_6(records, topics, path):
    fig = new_figure(12, 4.5)
    left, right = fig.subplots(1, 2)
    names = ["MedSTC", "STC", "STC-knee", "gaussSTC", "gaussMedSTC", "LDA", "NMF"]
    line_plot(left, records, names, topics, "train_time")
    left.set_ylabel("seconds")
    left.set_yscale("log")
    left.set_title("(L) training time (fit + final LinearSVC)", fontsize=10)
    line_plot(right, records, names, topics, "code_time")
    right.set_ylabel("seconds")
    right.set_yscale("log")
    right.set_title("(R) test time (code the test split + predict)", fontsize=10)
    fig.suptitle("Fig. 6: time")
    fig.savefig(path, dpi=110)


# ---------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------

def mean_of(records, name, K, key):
    s = summarise(records, name, K, key)
    return None if s is None else s[0]


def verdict_fig2(records, topics):
    lines = []
    for K in topics:
        stc, lda = mean_of(records, "STC", K, "word_zero"), mean_of(records, "LDA", K, "word_zero")
        nmf, gauss = mean_of(records, "NMF", K, "word_zero"), mean_of(records, "gaussSTC", K,
                                                                       "word_zero")
        med = mean_of(records, "MedSTC", K, "word_zero")
        if None in (stc, lda, nmf, gauss, med):
            continue
        knee = mean_of(records, "STC-knee", K, "word_zero")
        lines.append(f"- K = {K}: zero word codes STC {stc:.3f}"
                     + (f" (STC-knee {knee:.3f})" if knee is not None else "")
                     + f", gaussSTC {gauss:.3f}, MedSTC "
                     f"{med:.3f}, LDA {lda:.3f} (posterior < 1e-3), NMF {nmf:.3f}. STC sparser "
                     f"than LDA: {'yes' if stc > lda else 'no'}; than NMF: "
                     f"{'yes' if stc > nmf else 'no'}; than gaussSTC: "
                     f"{'yes' if stc > gauss else 'no'}.")
    return lines


def frontier_verdict(frontier_rows, K):
    """Fig. 2 (left): the most accurate STC codes at least as sparse as LDA's."""
    lda = [r for r in frontier_rows.get("lda", []) if r["alpha"] is None]
    stc = frontier_rows.get("stc", []) + frontier_rows.get("stc-recoded", [])
    if not lda or not stc:
        return []
    sparse = [r for r in stc if r["word_zero"] >= lda[0]["word_zero"]]
    if not sparse:
        return [f"- On the frontier (K = {K}): no STC point is as sparse as LDA."]
    best = max(sparse, key=lambda r: r["accuracy"])
    return [f"- On the frontier (K = {K}, `benchmarks/results_sparsity.md`): the most "
            f"accurate STC codes at least as sparse as LDA's ({lda[0]['word_zero']:.3f} zeros, "
            f"LDA + SVM {lda[0]['accuracy']:.3f}): {describe(best)}. STC can be "
            f"sparser than LDA at a higher accuracy: "
            f"{'yes' if best['accuracy'] > lda[0]['accuracy'] else 'no'}."]


def verdict_fig3(figures):
    """Per model: topics over 1e-3 and topics holding 90 % of a word's average code."""
    lines = []
    for name in ("STC", "STC-knee", "LDA"):
        if name in figures:
            shares = word_shares(figures[name]["word_codes"])
            lines.append(f"- {name}: topics with a share >= 1e-3 "
                         f"{np.count_nonzero(shares >= 1e-3, axis=1).mean():.1f}, fewest "
                         f"topics holding 90 % of the mass {topics_for_mass(shares).mean():.1f} "
                         f"(mean over the representative words, K = {shares.shape[1]}).")
    if {"STC", "LDA"} <= figures.keys():
        stc, lda = (topics_for_mass(word_shares(figures[n]["word_codes"])).mean()
                    for n in ("STC", "LDA"))
        exact = np.count_nonzero(np.asarray(figures["STC"]["word_codes"]) > 0, axis=1).mean()
        lines.append(f"- STC's average codes are sparser than LDA's (by the 90 % count): "
                     f"{'yes' if stc < lda else 'no'}. A word's STC code is sparse in each "
                     f"document, but averaged over the documents it is non-zero on {exact:.1f} "
                     "topics: different documents put the word on different topics.")
    return lines


def profile_similarity(class_codes):
    """Mean cosine similarity between the categories' average codes (lower: more distinct)."""
    codes = np.asarray(class_codes)
    unit = codes / np.maximum(np.linalg.norm(codes, axis=1, keepdims=True), 1e-300)
    sims = unit @ unit.T
    upper = np.triu_indices(codes.shape[0], 1)
    return float(sims[upper].mean())


def verdict_fig4(stc_data, med_data):
    stc_sim, med_sim = (profile_similarity(stc_data["class_codes"]),
                        profile_similarity(med_data["class_codes"]))
    return [f"- Mean cosine similarity between two categories' average codes (lower means "
            f"more distinct): STC {stc_sim:.3f}, MedSTC {med_sim:.3f}. MedSTC's are more "
            f"discriminative: {'yes' if med_sim < stc_sim else 'no'}."]


def above(records, a, b, K):
    """Whether model a is more accurate than b at K; flags a gap within the seeds' spread."""
    (ma, sa, na), (mb, sb, nb) = (summarise(records, n, K, "accuracy") for n in (a, b))
    word = "yes" if ma > mb else "no"
    if min(na, nb) >= 2 and abs(ma - mb) <= max(sa, sb):
        word += f" ({ma - mb:+.3f}, within one standard deviation over the seeds)"
    return word


def verdict_fig5(records, topics):
    lines = []
    for K in topics:
        acc = {name: mean_of(records, name, K, "accuracy") for name in MODELS}
        if None in acc.values():
            continue
        order = sorted(acc, key=lambda n: -acc[n])
        lines.append(f"- K = {K}: " + ", ".join(f"{n} {acc[n]:.3f}" for n in order) +
                     f". MedSTC best: {'yes' if order[0] == 'MedSTC' else 'no'}; STC + SVM above "
                     f"LDA + SVM: {above(records, 'STC', 'LDA', K)}; above NMF + SVM: "
                     f"{above(records, 'STC', 'NMF', K)}; STC above gaussSTC: "
                     f"{above(records, 'STC', 'gaussSTC', K)}; MedSTC above gaussMedSTC: "
                     f"{above(records, 'MedSTC', 'gaussMedSTC', K)}.")
    return lines


def verdict_fig6(records, topics):
    lines = []
    for K in topics:
        t = {name: (mean_of(records, name, K, "train_time"), mean_of(records, name, K,
                                                                      "code_time"))
             for name in ("STC", "LDA", "MedSTC")}
        if any(None in v for v in t.values()):
            continue
        lines.append(f"- K = {K}: training STC {t['STC'][0]:.1f} s, LDA {t['LDA'][0]:.1f} s, "
                     f"MedSTC {t['MedSTC'][0]:.1f} s; test STC {t['STC'][1]:.2f} s, LDA "
                     f"{t['LDA'][1]:.2f} s, MedSTC {t['MedSTC'][1]:.2f} s. STC trains faster "
                     f"than LDA: {'yes' if t['STC'][0] < t['LDA'][0] else 'no'} "
                     f"({t['LDA'][0] / t['STC'][0]:.1f}x); codes faster: "
                     f"{'yes' if t['STC'][1] < t['LDA'][1] else 'no'} "
                     f"({t['LDA'][1] / t['STC'][1]:.1f}x).")
    return lines


def load_range(records):
    loads = [r["load_at_end"] for r in records.values() if "load_at_end" in r]
    return f"{min(loads):.1f} to {max(loads):.1f}" if loads else "not recorded"


def render(args, grid, corpus_line, records, figures, images, frontier_rows):
    topics = list(args.topics or grid["topics"])
    lines = opening_lines(args, grid, corpus_line, records)
    for title, claim, key, verdict in figure_sections(grid, topics, records, figures,
                                                      frontier_rows):
        lines += [f"## {title}", "", claim, ""]
        if key in images:
            lines += [f"![{title}]({images[key]})", ""]
        lines += (verdict or ["- Not measured in this run."]) + [""]
    return "\n".join(lines + numbers_table(records, topics)) + "\n"


def opening_lines(args, grid, corpus_line, records):
    """Title, command, data, models, protocol and machine."""
    topics = list(args.topics or grid["topics"])
    seeds = args.seeds or grid["seeds"]
    return [
        "# The paper's experiments (Sec. 4), reproduced",
        "",
        "Generated by `python benchmarks/reproduce_paper.py "
        f"{' '.join(args.argv)}` (after `python benchmarks/bench_sparsity.py`, whose cached "
        "frontier is Fig. 2, left); do not edit by hand.",
        "",
        f"Data: {corpus_line}",
        "",
        f"Models, all fitted on the training split with random_state "
        f"{'0' if seeds == 1 else f'0 to {seeds - 1}'} for K in {', '.join(map(str, topics))}: "
        + ", ".join(n + (" (" + ", ".join(f"{k}={v!r}" for k, v in p.items()) + ")" if p else "")
                    for n, (_, p) in MODELS.items()) + " "
        "(STC and MedSTC parameters not listed are the package's defaults). STC-knee is not "
        "in the paper: STC at the knee of the sparsity-accuracy frontier (`bench_sparsity.py`, "
        "K = 50), shown beside the paper's setting. STC, STC-knee, gaussSTC, "
        "LDA and NMF are followed by a LinearSVC on their document codes, its normalisation "
        "(none, l1, standardised) and C chosen by 3-fold CV on the training features. "
        "Word-code zeros are counted on the test split over the entries whose term occurs in "
        "training (LDA: normalised per-word posterior under 1e-3; NMF: a word's code is its "
        "document's code, as in the paper's footnote 7).",
        "",
        "Machine:",
        "",
    ] + machine_info(f"threads: {args.threads}") + [
        f"- load when the fits ran (1-minute average at the end of each fit): "
        f"{load_range(records)}; the machine is a shared 2-core VM, so times are "
        "comparable only between fits made at similar load",
        ""]


def figure_sections(grid, topics, records, figures, frontier_rows):
    """(title, the paper's claim, figure, verdict lines) of Fig. 2 to 6."""
    return [
        ("Fig. 2: sparsity of the codes",
         "The paper: STC's word codes are much sparser than LDA's and NMF's (which are "
         "dense), gaussSTC's are denser than STC's, and LDA's prior alpha cannot make its "
         "codes sparse without losing accuracy.", "fig2",
         verdict_fig2(records, topics) + frontier_verdict(frontier_rows,
                                                          grid["frontier_topics"])),
        ("Fig. 3: word codes of representative words",
         "The paper: each word's STC code has a few clearly non-zero topics, LDA's many small "
         "non-zeros.", "fig3",
         verdict_fig3(figures)),
        ("Fig. 4: average document code per category",
         "The paper: the categories' average codes differ, and MedSTC's differ more than "
         "STC's.", "fig4",
         verdict_fig4(figures["STC"], figures["MedSTC"]) if {"STC", "MedSTC"} <= figures.keys()
         else []),
        ("Fig. 5: accuracy",
         "The paper: MedSTC is the most accurate; STC + SVM beats LDA + SVM and NMF + SVM, "
         "especially at large K; the l1 penalty on the word codes beats the l2 one (STC above "
         "gaussSTC, MedSTC above gaussMedSTC).", "fig5", verdict_fig5(records, topics)),
        ("Fig. 6: time",
         "The paper: STC trains much faster than LDA and codes new documents much faster.",
         "fig6", verdict_fig6(records, topics)),
    ]


def numbers_table(records, topics):
    """One row per model and K: means (and spreads over the seeds) of the measures."""
    lines = ["## Numbers", "", "| model | K | seeds | zero word codes | accuracy | train (s) | "
             "test (s) |", "|---|---|---|---|---|---|---|"]
    for name in MODELS:
        for K in topics:
            row = [summarise(records, name, K, key) for key in
                   ("word_zero", "accuracy", "train_time", "code_time")]
            if row[0] is None:
                continue
            # one seed has no spread to show: its value stands alone
            lines.append(f"| {name} | {K} | {row[0][2]} | " + " | ".join(
                (f"{m:.3f}" if key < 2 else f"{m:.2f}")
                + ("" if n < 2 else f" ± {s:.3f}" if key < 2 else f" ± {s:.2f}")
                for key, (m, s, n) in enumerate(row)) + " |")
    return lines


def missing_lines(missing, models):
    """The fits a --cached-only render lacks, one line per K and seed."""
    by_run = {}
    for name, K, seed in missing:
        by_run.setdefault((K, seed), []).append(name)
    return [f"- K = {K}, seed {seed}: " + (
        "every model" if set(names) == set(models) else ", ".join(names))
        for (K, seed), names in sorted(by_run.items())]
