"""The paper-reproduction generator's --quick mode: every figure, the report, the cache."""
import warnings

import pytest

from conftest import load_benchmark, optional

optional("matplotlib")


@pytest.mark.slow  # every figure of the reproduction, fitted and drawn
def test_quick_reproduction_writes_every_section_and_reuses_its_cache(tmp_path):
    script = load_benchmark("reproduce_paper.py")
    report = tmp_path / "docs" / "reproduction.md"
    argv = ["--quick", "--threads", "1", "--cache", str(tmp_path / "cache"),
            "--frontier-cache", str(tmp_path / "frontier"), "--output", str(report)]
    n_models, n_topics = len(script.MODELS), len(script.QUICK["topics"])
    assert script.main(argv) == n_models * n_topics
    text = report.read_text()
    for figure in ("fig2", "fig3", "fig4", "fig5", "fig6"):
        assert f"](reproduction/{figure}.png)" in text
        assert (tmp_path / "docs" / "reproduction" / f"{figure}.png").stat().st_size > 0
    for title in ("Fig. 2", "Fig. 3", "Fig. 4", "Fig. 5", "Fig. 6"):
        assert f"## {title}" in text
    assert "Not measured in this run" not in text  # every section has its verdict
    # one row per model and K in the table of numbers
    assert sum(line.startswith(f"| {name} |") for name in script.MODELS
               for line in text.splitlines()) == n_models * n_topics
    assert script.main(argv) == 0  # a re-run draws from the cache only
    assert report.read_text().split("## Fig. 2")[1] == text.split("## Fig. 2")[1]
    # --cached-only with a K the cache lacks: nothing fitted, the missing fits listed
    assert script.main(argv + ["--cached-only", "--topics", "3", "4", "5"]) == 0
    listed = report.read_text().split("## Not measured")[1]
    assert "- K = 5, seed 0: every model" in listed
    assert "K = 4" not in listed
    with warnings.catch_warnings():
        # none of this run's fits is in the cache, so the figures' panels are empty and
        # matplotlib warns that their legends have no entries (line_plot calls ax.legend
        # regardless)
        warnings.filterwarnings("ignore", "No artists with labels found to put in legend",
                                UserWarning)
        assert script.main(argv + ["--cached-only", "--topics", "5", "--models", "STC",
                                   "LDA"]) == 0
    listed = report.read_text().split("## Not measured")[1]
    assert "run (2) are not in the cache" in listed  # every model of this run: two
    assert "- K = 5, seed 0: every model" in listed


def test_missing_fits_are_listed_per_K_and_seed():
    script = load_benchmark("reproduce_paper.py")
    missing = [("STC", 5, 0), ("LDA", 5, 0), ("STC", 5, 1), ("LDA", 3, 1)]
    assert script.missing_lines(missing, ["STC", "LDA"]) == [
        "- K = 3, seed 1: LDA", "- K = 5, seed 0: every model", "- K = 5, seed 1: STC"]
