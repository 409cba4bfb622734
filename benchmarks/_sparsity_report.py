"""bench_sparsity.py's reporting part: the tables, the targets and the plot of each K.

It reads only the measured records (`_sparsity_measure`'s points and records),
so a complete cache renders without the corpus.
"""
import json
import os

from _common import LDA_THRESHOLDS, REPO_ROOT, corpus_name, log, new_figure
from _machine import machine_info
from _sparsity_measure import FULL, describe_point

DEFAULT_OUTPUT = os.path.join(REPO_ROOT, "benchmarks", "results_sparsity.md")
DEFAULT_PLOTS = os.path.join(REPO_ROOT, "benchmarks")
TARGET_STC_ACCURACY = 0.70
TARGET_MEDSTC = (0.80, 0.80)     # (zero share of word codes, accuracy)
MOONSHOT_MEDSTC = (0.88, 0.81)
PROTOCOL_TEXT = (
    "Protocol: STC and LDA are fitted on the training split only; the test split is coded "
    "with `transform`. Word-code zeros: share of zero entries of the test word codes, over "
    "the observed entries whose term occurs in the training split (STC, MedSTC: exact "
    "zeros; LDA: the paper's normalised per-word topic posterior under the threshold). "
    "Document-code zeros: exact zeros (LDA: normalised proportions under the threshold). "
    "Accuracy: STC and LDA with a LinearSVC on the document codes, its normalisation (none, "
    "per-document l1, standardised) and C chosen together by 3-fold CV on the training "
    "features; MedSTC with its own classifier, its C and lambda_ chosen by 2-fold CV on the "
    "training split (in the full run at K = 50 at rho 0.001, 0.02 and 0.05; the other rho "
    "reuse the choice made at 0.001). "
    "rho in relative units is rho / sqrt(2 gamma w_bar), w_bar the mean "
    "count of an observed training entry (docs/algorithms.md, \"Sparsity\"). Fit and "
    "coding times with the stated threads.")


def write_results(args, topics, done, missing, corpus):
    """The plots (if matplotlib is installed) and the results file; prints the results."""
    plots = draw_plots(args, topics, done)
    machine = machine_info(f"threads (models and cross-validation): {args.threads}")
    text = render(args, corpus_line(corpus, done), machine, [(p, r) for p, r, _ in done], plots)
    if missing:
        text += not_measured(missing)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)) or ".", exist_ok=True)
    with open(args.output, "w", encoding="utf-8") as handle:
        handle.write(text + "\n")
    print(text)


def corpus_line(corpus, done):
    """The data line: the corpus read, else what the cached points recorded of it."""
    if corpus is not None:
        return corpus.summary
    if done:
        return "as recorded in the cached points: " + json.dumps(done[0][1]["corpus"])
    return "none"


def not_measured(missing):
    return ("\n\n## Not measured\n\nThis report was rendered with `--cached-only`; these "
            f"{len(missing)} points of the grid were not measured:\n\n"
            + "\n".join(f"- K={point['K']} {point['model']}: {describe_point(point)}"
                         for point in missing))


def draw_plots(args, topics, done):
    """One PNG per K in ``args.plots``; {K: path} (empty without matplotlib)."""
    plots = {}
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        log("matplotlib is not installed (pip install 'stc[plot]'): no plots")
        return plots
    os.makedirs(args.plots, exist_ok=True)
    for K in topics:
        by_model = {}
        for point, record, _ in done:
            if point["K"] == K:
                by_model.setdefault(point["model"], []).append(dict(point, **record))
        plots[K] = os.path.join(args.plots, f"sparsity_accuracy_K{K}"
                                f"{'_quick' if args.quick else ''}.png")
        plot_frontier(K, by_model, plots[K], corpus_name(args.quick))
    return plots


def render(args, corpus_line, machine, records, plots):
    lines = ["# Sparsity against accuracy: STC, MedSTC and LDA", "",
             f"Command: `python benchmarks/bench_sparsity.py {' '.join(args.argv)}`", "",
             "Machine (of the run that wrote this file; cached points keep their own "
             "times):", ""] + machine + ["", f"Data: {corpus_line}", "", PROTOCOL_TEXT, ""]
    for K in sorted({p["K"] for p, _ in records}):
        lines += topics_section(K, rows_by_model(records, K), plots)
    return "\n".join(lines)


def rows_by_model(records, K):
    """{model: rows} of the points at K, each row the point and its record in one dict."""
    by_model = {}
    for point, record in records:
        if point["K"] == K:
            row = dict(point, **record)
            row["cv_results"] = record.get("cv")
            by_model.setdefault(point["model"], []).append(row)
    return by_model


def topics_section(K, by_model, plots):
    """The section of one K: its plot, the targets, a table per model family."""
    lines = [f"## K = {K}", ""]
    if K in plots:
        lines += [f"![sparsity against accuracy, K = {K}]({os.path.basename(plots[K])})", ""]
    lines += ["Targets:", ""] + target_lines(by_model) + [""]
    if "stc" in by_model:
        lines += ["### STC + LinearSVC", "", "`*`: on the frontier (no other STC point "
                  "has both more zeros and a higher accuracy).", ""] + stc_table(
                      by_model["stc"]) + [""]
    if "stc-recoded" in by_model:
        lines += ["### STC + LinearSVC, learned topics, documents coded at other rho",
                  "", "The topics of the paper's setting (the row labelled paper in the "
                  "table above) or of another setting of that table; "
                  "train and test documents coded by `transform` after "
                  "`set_params(rho=..., rho_units=\"relative\")`.", ""] + recoded_table(
                      by_model["stc-recoded"]) + [""]
    if "lda" in by_model:
        lines += ["### LDA + LinearSVC", ""] + lda_table(by_model["lda"]) + [""]
    if "medstc" in by_model:
        lines += ["### MedSTC", ""] + medstc_table(by_model["medstc"]) + [""]
    if "medstc-recoded" in by_model:
        lines += medstc_recoded_section(by_model["medstc-recoded"])
    return lines


def medstc_recoded_section(rows):
    factors = FULL["medstc_recoded_cv_factors"]
    return ["### MedSTC, the paper setting's topics, documents coded at other rho", "",
            "MedSTC at the paper's setting (the row without CV above); train and test "
            "documents coded by `transform` after `set_params(rho=..., "
            "rho_units=\"relative\")`, and the classifier refitted on the training "
            "codes with `stc._learning.supervised.svm.CuttingPlaneSVM(C=refit_C, cost=cost)`, as "
            "MedSTC's own final step does: with the fixed refit_C the model was "
            "fitted with, with the C `refit_C=\"auto\"` gives the new codes "
            "(5e6 / mean_d ||theta_d||^2), or with a C chosen by 3-fold CV on the "
            f"training codes from that C times {min(factors):g} to "
            f"{max(factors):g}.", ""] + medstc_recoded_table(rows) + [""]


# ---------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------

def fmt(value, digits=3):
    return "-" if value is None else f"{value:.{digits}f}"


def pareto(rows):
    """Rows no other row beats in both word-code zero share and accuracy."""
    return [r for r in rows if not any(o["word_zero"] >= r["word_zero"] and
                                       o["accuracy"] >= r["accuracy"] and
                                       (o["word_zero"], o["accuracy"]) !=
                                       (r["word_zero"], r["accuracy"]) for o in rows)]


def stc_table(rows):
    lines = ["| rho (units) | rho of (2) | lambda_ = gamma | theta penalty | word-code zeros | "
             "doc-code zeros | accuracy | SVM features, C (CV acc.) | fit (s) | n_iter | "
             "code test (s) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    front = pareto(rows)
    for r in sorted(rows, key=lambda r: (r["theta_penalty"], r["lambda_"], r["word_zero"])):
        star = " *" if r in front else ""
        lines.append(
            f"| {r['rho']:g} ({r['rho_units']}{', ' + r['label'] if r['label'] else ''}) | "
            f"{r['rho_absolute']:.4g} | {r['lambda_']:g} | {r['theta_penalty']} | "
            f"{fmt(r['word_zero'])}{star} | {fmt(r['doc_zero'])} | {fmt(r['accuracy'], 4)} | "
            f"{r['svm_normalisation']}, {r['svm_C']:g} ({fmt(r['svm_cv_score'])}) | "
            f"{r['fit_time']:.1f} | {r['n_iter']} | {r['transform_time']:.2f} |")
    return lines


def topics_name(r):
    """Whose topics a recoded STC point codes with."""
    t = r["topics_of"]
    if t["label"] == "paper":
        return "the paper's setting"
    return (f"rho {t['rho']:g} ({t['rho_units']}), theta {t['theta_penalty']}, "
            f"lambda_ {t['lambda_']:g} ({r['label']})")


def recoded_table(rows):
    lines = ["| topics of | rho used to code (relative) | rho of (2) | word-code zeros | "
             "doc-code zeros | accuracy | SVM features, C (CV acc.) | code test (s) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["label"], r["word_zero"])):
        lines.append(f"| {topics_name(r)} | {r['rho']:g} | {r['rho_absolute']:.4g} | "
                     f"{fmt(r['word_zero'])} | "
                     f"{fmt(r['doc_zero'])} | {fmt(r['accuracy'], 4)} | "
                     f"{r['svm_normalisation']}, {r['svm_C']:g} ({fmt(r['svm_cv_score'])}) | "
                     f"{r['transform_time']:.2f} |")
    return lines


def refit_name(r):
    """The C of a recoded MedSTC point's refitted classifier."""
    if r["topics_of"]["refit_C"] is None:
        return "none (the loop's classifier)"
    if r.get("refit") == "auto":
        return f"{r['refit_C_used']:.4g} (auto)"
    if r.get("refit") == "cv":
        return f"{r['refit_C_used']:.4g} (CV)"
    return f"{r['topics_of']['refit_C']:g} (fixed)"


def medstc_recoded_table(rows):
    lines = ["| refit C | rho used to code (relative) | rho of (2) | word-code zeros | "
             "doc-code zeros | accuracy | code test (s) |", "|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r.get("refit", ""), r["word_zero"])):
        lines.append(f"| {refit_name(r)} | {r['rho']:g} | {r['rho_absolute']:.4g} | "
                     f"{fmt(r['word_zero'])} | "
                     f"{fmt(r['doc_zero'])} | {fmt(r['accuracy'], 4)} | "
                     f"{r['transform_time']:.2f} |")
    return lines


def lda_table(rows):
    lines = ["| alpha | word-code zeros < 1e-3 | < 1e-6 | doc-code zeros < 1e-3 | < 1e-6 | "
             "accuracy | SVM features, C (CV acc.) | fit (s) | n_iter | code test (s) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: r["word_zero"]):
        alpha = "1/K (default)" if r["alpha"] is None else f"{r['alpha']:g}"
        w, d = r["word_zero_by_threshold"], r["doc_zero_by_threshold"]
        lines.append(f"| {alpha} | {fmt(w[0])} | {fmt(w[1])} | {fmt(d[0])} | {fmt(d[1])} | "
                     f"{fmt(r['accuracy'], 4)} | {r['svm_normalisation']}, {r['svm_C']:g} "
                     f"({fmt(r['svm_cv_score'])}) | {r['fit_time']:.1f} | {r['n_iter']} | "
                     f"{r['transform_time']:.2f} |")
    return lines


def medstc_table(rows):
    lines = ["| rho (units) | theta penalty | C, lambda_ chosen (val. acc. of each) | "
             "rho of (2) | word-code zeros | doc-code zeros | accuracy | fit (s) | n_iter | "
             "code test (s) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    front = pareto(rows)
    for r in sorted(rows, key=lambda r: (r["theta_penalty"], r["word_zero"])):
        # the paper's point (the only one in absolute units) keeps the cache label
        # "defaults" it had when it was the default; the table calls it what it is
        is_paper = is_paper_medstc(r)
        cv = "; ".join(f"{c['C']:g}/{c['lambda_']:g}: {c['validation_accuracy']:.3f}"
                       for c in r["cv_results"]) or ("the paper's, no CV" if is_paper
                                                     else "fixed, no CV")
        star = " *" if r in front else ""
        label = "paper" if is_paper else r["label"]
        lines.append(f"| {r['rho']:g} ({r['rho_units']}{', ' + label if label else ''}) | "
                     f"{r['theta_penalty']} | {r['C']:g}, {r['lambda_']:g} "
                     f"({cv}) | {r['rho_absolute']:.4g} | {fmt(r['word_zero'])}{star} | "
                     f"{fmt(r['doc_zero'])} | {fmt(r['accuracy'], 4)} | {r['fit_time']:.1f} | "
                     f"{r['n_iter']} | {r['transform_time']:.2f} |")
    return lines


# ---------------------------------------------------------------------------
# Targets
# ---------------------------------------------------------------------------

def target_lines(by_model):
    """The issue's targets, checked on the measured points of one K."""
    lines = []
    lda = [r for r in by_model.get("lda", []) if r["alpha"] is None]
    stc = by_model.get("stc", []) + by_model.get("stc-recoded", [])
    if lda and stc:
        ref = lda[0]
        need = max(ref["accuracy"], TARGET_STC_ACCURACY)
        met = [r for r in stc if r["word_zero"] >= ref["word_zero"] and r["accuracy"] >= need]
        lines.append(f"- STC: word-code zeros >= LDA's ({ref['word_zero']:.3f} under 1e-3, "
                     f"default alpha) and accuracy >= max(LDA + SVM {ref['accuracy']:.4f}, "
                     f"{TARGET_STC_ACCURACY}): " + (
                         "met by " + ", ".join(describe(r) for r in met) if met else
                         "not met; best accuracy at that sparsity: " + best_at(
                             stc, ref["word_zero"])))
        beat = [r for r in stc if r["word_zero"] >= ref["word_zero"]
                and r["accuracy"] >= ref["accuracy"]]
        lines.append("- STC at least as sparse as LDA *and* at least as accurate as LDA + SVM: "
                     + (", ".join(describe(r) for r in beat) if beat else "none"))
    med = by_model.get("medstc", []) + by_model.get("medstc-recoded", [])
    if med:
        for name, (zeros, acc) in (("target", TARGET_MEDSTC), ("moonshot", MOONSHOT_MEDSTC)):
            met = [r for r in med if r["word_zero"] >= zeros and r["accuracy"] >= acc]
            lines.append(f"- MedSTC {name} (word-code zeros >= {zeros}, accuracy >= {acc}): " + (
                "met by " + ", ".join(describe(r) for r in met) if met else
                "not met; best accuracy with >= " f"{zeros} zeros: " + best_at(med, zeros)))
    return lines


def describe(r):
    if r["model"] == "stc-recoded":
        return (f"STC, the topics of {topics_name(r)} coded at rho={r['rho']:g} (relative): "
                f"zeros {r['word_zero']:.3f}, accuracy {r['accuracy']:.4f}")
    if r["model"] == "medstc-recoded":
        return (f"MedSTC, the paper setting's topics coded at rho={r['rho']:g} (relative), "
                f"classifier refitted with C {refit_name(r)}: zeros {r['word_zero']:.3f}, "
                f"accuracy {r['accuracy']:.4f}")
    setting = (f"{r['model']} rho={r['rho']:g} ({r['rho_units']}), theta {r['theta_penalty']}"
               + (f", lambda_={r['lambda_']:g}" if "lambda_" in r else "")
               + (f", C={r['C']:g}" if "C" in r else ""))
    return f"{setting}: zeros {r['word_zero']:.3f}, accuracy {r['accuracy']:.4f}"


def best_at(rows, zeros):
    candidates = [r for r in rows if r["word_zero"] >= zeros]
    if not candidates:
        return f"no point reached {zeros:.3f} zeros"
    return describe(max(candidates, key=lambda r: r["accuracy"]))


def is_paper_medstc(r):
    """Whether a measured MedSTC point is the paper's setting (the only absolute-units one)."""
    return r["rho_units"] == "absolute"


def is_stc_default(r):
    """Whether a measured STC point is STC() at the package's defaults."""
    from stc import STC

    defaults = STC().get_params()
    return (r["label"] != "paper" and r["rho_units"] == defaults["rho_units"]
            and r["rho"] == defaults["rho"] and r["theta_penalty"] == defaults["theta_penalty"]
            and r["lambda_"] == defaults["lambda_"])


# ---------------------------------------------------------------------------
# The plot
# ---------------------------------------------------------------------------

def plot_frontier(K, by_model, path, corpus_name):
    """Sparsity (x) against accuracy (y), one curve per model family, for one K."""
    from matplotlib import colormaps

    fig = new_figure(10, 9)
    ax = fig.add_subplot()
    # up to 20 distinct colours: the dark half of tab20, then the light half
    tab20 = colormaps["tab20"].colors
    ax.set_prop_cycle(color=list(tab20[0::2]) + list(tab20[1::2]))
    for label, rows, style in frontier_curves(by_model):
        rows = sorted(rows, key=lambda r: r["word_zero"])
        if rows:
            ax.plot([r["word_zero"] for r in rows], [r["accuracy"] for r in rows], style,
                    label=label, markersize=5)
    for label, style, size, rows in setting_markers(by_model):
        if rows:
            ax.plot([rows[0]["word_zero"]], [rows[0]["accuracy"]], style, markersize=size,
                    markerfacecolor="none" if style != "k*" else "k", label=label)
    ax.set_xlabel("share of zero word codes on the test split")
    ax.set_ylabel("test accuracy")
    ax.set_title(f"Sparsity against accuracy, {corpus_name}, K = {K}")
    ax.set_xlim(-0.02, 1.0)  # a little room for the markers of dense codes
    ax.grid(True, alpha=0.3)
    fig.legend(fontsize=8, loc="outside lower center", ncols=2)
    fig.savefig(path, dpi=110)


def frontier_curves(by_model):
    """(label, rows, line style) of every curve of the plot, in the legend's order."""
    curves = []
    stc = by_model.get("stc", [])
    for r_pen in sorted({r["theta_penalty"] for r in stc}):
        for lam in sorted({r["lambda_"] for r in stc if r["rho_units"] == "relative"}):
            rows = [r for r in stc if r["theta_penalty"] == r_pen
                    and r["lambda_"] == lam and r["rho_units"] == "relative"]
            curves.append((f"STC + SVM, theta {r_pen}, lambda_ {lam:g}", rows, "o-"))
    for label, name in (("", "the paper's topics"), ("most accurate",
                                                      "the most accurate setting's topics")):
        rows = [r for r in by_model.get("stc-recoded", []) if r["label"] == label]
        if rows:
            curves.append((f"STC + SVM, {name} coded at other rho", rows, "D:"))
    medstc = by_model.get("medstc", [])
    for r_pen in sorted({r["theta_penalty"] for r in medstc}):
        rows = [r for r in medstc if r["theta_penalty"] == r_pen and r["rho_units"] == "relative"]
        curves.append((f"MedSTC, theta {r_pen}, over rho (C, lambda_ as in the table)",
                       rows, "s-"))
    for refit, name in (("", "fixed C"), ("auto", "C auto"), ("cv", "C by CV")):
        rows = [r for r in by_model.get("medstc-recoded", []) if r.get("refit", "") == refit]
        if rows:
            curves.append((f"MedSTC, the paper setting's topics coded at other rho "
                           f"(classifier refitted, {name})", rows, "P:"))
    for i, threshold in enumerate(LDA_THRESHOLDS):
        rows = [dict(r, word_zero=r["word_zero_by_threshold"][i]) for r in by_model.get("lda", [])]
        curves.append((f"LDA + SVM, zeros < {threshold:g} (over alpha)", rows, "^--"))
    return curves


def setting_markers(by_model):
    """The settings a user meets first, the paper's and the package's defaults:
    (label, marker style, size, rows whose first is marked)."""
    stc, medstc = by_model.get("stc", []), by_model.get("medstc", [])
    return [
        ("STC, the paper's setting", "k*", 14, [r for r in stc if r["label"] == "paper"]),
        ("STC, the defaults", "kX", 11, [r for r in stc if is_stc_default(r)]),
        ("MedSTC, the paper's setting", "ks", 9, [r for r in medstc if is_paper_medstc(r)]),
        ("MedSTC, the defaults", "kP", 11,
         [r for r in medstc if r["rho_units"] == "relative" and r["label"] == "defaults"]),
    ]
