"""The scaling benchmark's labelled points: online MedSTC over a sampled file read in batches."""
import json

import numpy as np

from conftest import load_benchmark

bench = load_benchmark("bench_scaling.py")


def test_labelled_points_and_their_section(tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(bench, "TEST_DOCUMENTS", 300)
    output = tmp_path / "results.md"
    output.write_text("# STC rows\n\nwritten by hand\n")
    argv = ["--documents", "500", "--features", "150", "--topics", "3", "--medstc", "1",
            "--classes", "3", "--output", str(output)]
    assert bench.main(argv) == 0
    [name] = [n for n in (tmp_path / "cache").iterdir() if n.suffix == ".json"]
    record = json.loads(name.read_text())
    assert record["kind"] == "medstc" and record["documents"] == 500
    assert len(record["pass_seconds"]) == 2  # one learning pass, then the refit's
    assert 0.0 <= record["accuracy"] <= 1.0 and record["test_documents"] == 300
    assert record["peak_mib"] > 0
    # the file holds the first D documents of the labelled sample, with their labels
    from stc.datasets import make_stc_corpus
    from stc.readers import read_svmlight

    sample = make_stc_corpus(800, 150, 3, document_length=bench.DOCUMENT_LENGTH,
                             topics_per_document=bench.TOPICS_PER_DOCUMENT, n_classes=3,
                             random_state=0)
    svm, _ = bench.labelled_corpus(500, 150, 3, 3)
    written = read_svmlight(svm)
    assert (written.data != sample.data[:500, :written.data.shape[1]]).nnz == 0
    np.testing.assert_array_equal(written.target, sample.target[:500])
    # a second run (from the cache) replaces the section, the rest of the file is kept
    assert bench.main(argv) == 0
    text = output.read_text()
    assert text.startswith("# STC rows\n\nwritten by hand\n")
    assert text.count(bench.MEDSTC_BEGIN) == 1 and text.count(bench.MEDSTC_END) == 1
    assert text.count("| 5e+02 | 3 | 3 |") == 1
