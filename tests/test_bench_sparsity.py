"""The sparsity benchmark's --quick mode: the whole pipeline, its cache and its report."""
from conftest import brief_fit, load_benchmark, optional

optional("matplotlib")


@brief_fit
def test_quick_run_measures_caches_and_reports(tmp_path):
    bench = load_benchmark("bench_sparsity.py")
    argv = ["--quick", "--threads", "1", "--cache", str(tmp_path / "cache"),
            "--output", str(tmp_path / "results.md"), "--plots", str(tmp_path)]
    first = bench.main(argv)
    assert {point["model"] for point, _, _ in first} == {"stc", "stc-recoded", "lda", "medstc",
                                                          "medstc-recoded"}
    assert all(computed for _, _, computed in first)
    for point, record, _ in first:
        assert 0.0 <= record["word_zero"] <= 1.0 and 0.0 <= record["accuracy"] <= 1.0
        if point["model"] == "lda":
            # fewer entries fall under the smaller threshold
            assert record["word_zero_by_threshold"][1] <= record["word_zero_by_threshold"][0]
    # the relative rho is the knob: the larger one gives more zero word codes
    stc = {point["rho"]: record for point, record, _ in first
           if point["model"] == "stc" and point["rho_units"] == "relative"}
    assert stc[0.1]["word_zero"] > stc[0.01]["word_zero"]

    # coding with the paper's topics at another rho reuses its fit (same fit time)
    paper = next(record for point, record, _ in first if point.get("label") == "paper")
    recoded = next(record for point, record, _ in first if point["model"] == "stc-recoded")
    assert recoded["fit_time"] == paper["fit_time"]
    assert recoded["word_zero"] > paper["word_zero"]

    text = (tmp_path / "results.md").read_text()
    assert "## K = 4" in text and "### STC + LinearSVC" in text and "### MedSTC" in text
    assert (tmp_path / "sparsity_accuracy_K4_quick.png").stat().st_size > 0

    second = bench.main(argv)  # everything comes from the cache now
    assert not any(computed for _, _, computed in second)
    assert [record for _, record, _ in second] == [record for _, record, _ in first]
    assert (tmp_path / "results.md").read_text().split("## K = 4")[1] == text.split("## K = 4")[1]
