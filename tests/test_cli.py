"""The `stc` command: every command on the embedded corpus (as SVMlight files) and on a
small folder of text files, run in-process through `main(argv)` and once through the
installed console script; errors, exit codes, help texts."""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.io
from sklearn.datasets import dump_svmlight_file
from sklearn.exceptions import ConvergenceWarning

import stc
import stc.readers
import stc.losses
from stc import STC, MedSTC
from stc.cli import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, build_parser, main

from conftest import brief_fit

# The fits here are kept small and stop at max_iter on purpose.
pytestmark = brief_fit

FAST = ["-k", "3", "--max-iter", "4", "--random-state", "0"]


@pytest.fixture(scope="module")
def svmlight_dir(tmp_path_factory, newsgroups):
    """The embedded corpus as SVMlight files with a vocab.txt beside them."""
    folder = tmp_path_factory.mktemp("svmlight")
    train, test = newsgroups
    dump_svmlight_file(train.data, train.target, str(folder / "train.svm"), zero_based=True)
    dump_svmlight_file(test.data, test.target, str(folder / "test.svm"), zero_based=True)
    (folder / "vocab.txt").write_text("\n".join(train.vocabulary) + "\n", encoding="utf-8")
    return folder


def _write_documents(folder, bunch, per_label):
    """The first documents of every label as text files, each word repeated by its count."""
    for label, name in enumerate(bunch.target_names):
        (folder / name).mkdir(parents=True)
        rows = np.flatnonzero(bunch.target == label)[:per_label]
        for i in rows:
            row = bunch.data[i]
            words = [w for w, c in zip(bunch.vocabulary[row.indices], row.data)
                     for _ in range(int(c))]
            (folder / name / f"{i:05d}.txt").write_text(" ".join(words), encoding="utf-8")


@pytest.fixture(scope="module")
def text_dir(tmp_path_factory, newsgroups):
    """A small text corpus, train/ and test/, one sub-folder per newsgroup."""
    root = tmp_path_factory.mktemp("texts")
    train, test = newsgroups
    _write_documents(root / "train", train, per_label=40)
    _write_documents(root / "test", test, per_label=20)
    return root


def run(argv, capsys):
    """main(argv) in-process: (exit status, stdout, stderr)."""
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


# ---- STC on the embedded corpus (SVMlight)

@pytest.fixture(scope="module")
def stc_model(tmp_path_factory, svmlight_dir):
    path = tmp_path_factory.mktemp("models") / "stc.model"
    assert main(["fit", str(svmlight_dir / "train.svm"), "-o", str(path), "-q", *FAST]) == 0
    return path


def test_fit_trains_the_model_python_would(stc_model, newsgroups):
    train, _ = newsgroups
    expected = STC(n_topics=3, max_iter=4, random_state=0).fit(train.data)
    model = stc.load(stc_model)
    assert model.components_.tobytes() == expected.components_.tobytes()
    assert np.array_equal(model.objective_, expected.objective_)
    assert list(model.vocabulary_) == list(train.vocabulary)  # vocab.txt found beside DATA
    assert model.verbose == 0  # -q


def test_sweeps_per_iteration_reaches_the_estimator(tmp_path, svmlight_dir, newsgroups):
    train, _ = newsgroups
    path = tmp_path / "exact.model"
    assert main(["fit", str(svmlight_dir / "train.svm"), "-o", str(path), "-q", *FAST,
                 "--sweeps-per-iteration", "none"]) == 0
    model = stc.load(path)
    expected = STC(n_topics=3, max_iter=4, random_state=0, sweeps_per_iteration=None)
    assert model.sweeps_per_iteration is None
    assert np.array_equal(model.objective_, expected.fit(train.data).objective_)


def test_sweeps_per_iteration_reaches_medstc(tmp_path, svmlight_dir, newsgroups):
    train, _ = newsgroups
    path = tmp_path / "medstc.model"
    assert main(["fit", str(svmlight_dir / "train.svm"), "-o", str(path), "-q", *FAST,
                 "--model", "medstc", "--sweeps-per-iteration", "1"]) == 0
    model = stc.load(path)
    expected = MedSTC(n_topics=3, max_iter=4, random_state=0, sweeps_per_iteration=1)
    assert model.sweeps_per_iteration == 1
    assert np.array_equal(model.objective_, expected.fit(train.data, train.target).objective_)


def test_fit_reports_progress_on_stderr_unless_quiet(tmp_path, svmlight_dir, capsys):
    status, out, err = run(["fit", svmlight_dir / "train.svm", "-o", tmp_path / "m",
                            "-k", "2", "--max-iter", "3", "--tol", "0", "--random-state", "0"],
                           capsys)
    assert status == EXIT_OK and out == ""
    progress = [line for line in err.splitlines() if line.startswith("iter")]
    assert len(progress) == 3 and all("objective" in line for line in progress)
    assert "saved to" in err
    status, out, err = run(["fit", svmlight_dir / "train.svm", "-o", tmp_path / "m", "-q",
                            "-k", "2", "--max-iter", "3", "--tol", "0"], capsys)
    assert status == EXIT_OK and out == "" and "saved" not in err
    # quiet: no progress lines (warnings, e.g. max_iter reached with tol=0, still show)
    assert not [line for line in err.splitlines() if line.startswith("iter")]


def test_topics_prints_each_topics_top_words_with_weights(stc_model, capsys):
    status, out, _ = run(["topics", stc_model, "-n", "5"], capsys)
    assert status == EXIT_OK
    model = stc.load(stc_model)
    lines = out.splitlines()
    assert len(lines) == 3
    for k, (line, words) in enumerate(zip(lines, model.top_words(model.vocabulary_, 5))):
        label, rest = line.split(": ", 1)
        assert label == f"topic {k}"
        fields = rest.split()
        assert fields[0::2] == words
        weights = [float(w) for w in fields[1::2]]
        columns = [list(model.vocabulary_).index(w) for w in words]
        assert np.allclose(weights, model.components_[k, columns], atol=5e-5)


def test_transform_writes_the_codes_python_computes(tmp_path, stc_model, svmlight_dir,
                                                   newsgroups, capsys):
    _, test = newsgroups
    model = stc.load(stc_model)
    status, _, _ = run(["transform", stc_model, svmlight_dir / "test.svm", "-o",
                        tmp_path / "codes.npz", "--word-codes", "-q"], capsys)
    assert status == EXIT_OK
    with np.load(tmp_path / "codes.npz", allow_pickle=False) as codes:
        assert codes["document_codes"].tobytes() == model.transform(test.data).tobytes()
        expected = model.word_codes(test.data)
        assert np.array_equal(codes["word_codes_data"], expected.data)
        assert np.array_equal(codes["word_codes_indices"], expected.indices)
        assert np.array_equal(codes["word_codes_indptr"], expected.indptr)
        assert tuple(codes["word_codes_shape"]) == (test.data.nnz, 3)
        document, term = codes["word_code_document"], codes["word_code_term"]
        assert np.array_equal(test.data[document, term].A1, test.data.data)
    status, _, _ = run(["transform", stc_model, svmlight_dir / "test.svm", "-o",
                        tmp_path / "codes.mtx", "--word-codes", "-q"], capsys)
    assert status == EXIT_OK
    theta = scipy.io.mmread(tmp_path / "codes.mtx")
    assert np.array_equal(theta.toarray(), model.transform(test.data))
    words = scipy.io.mmread(tmp_path / "codes.word_codes.mtx")
    assert np.array_equal(words.toarray(), model.word_codes(test.data).toarray())


def test_evaluate_stc_gives_objective_held_out_loss_and_completion_score(stc_model, svmlight_dir, newsgroups,
                                                        capsys):
    _, test = newsgroups
    status, out, _ = run(["evaluate", stc_model, svmlight_dir / "test.svm"], capsys)
    assert status == EXIT_OK
    model = stc.load(stc_model)
    objective = float(re.search(r"^objective: (\S+)", out, re.M).group(1))
    loss = float(re.search(r"^held-out loss \(poisson\): (\S+)", out, re.M).group(1))
    assert objective == pytest.approx(model.objective(test.data), rel=1e-5)
    # the document-completion score (STC.score) and its perplexity
    completion = re.search(r"^document completion: (\S+) log-likelihood per held-out token "
                           r"\(perplexity (\S+);", out, re.M)
    score = model.score(test.data)
    assert float(completion.group(1)) == pytest.approx(score, rel=1e-5)
    assert float(completion.group(2)) == pytest.approx(np.exp(-score), rel=1e-5)
    # Objective (2) = loss + lambda pen(theta) + sum_n (gamma ||s_n - theta||^2 + rho |s_n|_1)
    # over the words of terms the topics know (others are not coded): the printed loss
    # must be what is left of the objective after the penalties. At the defaults pen is
    # the l1 norm, gamma = lambda and rho is in relative units (effective_rho_ in (2)).
    assert (model.theta_penalty, model.gamma, model.rho_units) == ("l1", None, "relative")
    theta, codes = model.transform(test.data), model.word_codes(test.data).toarray()
    X = test.data
    known = model.components_.sum(axis=0)[X.indices] > 0
    assert not known.all()  # the test split has terms the training split lacks
    document = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))[known]
    assert model.effective_rho_ == pytest.approx(
        model.rho * np.sqrt(2 * model.lambda_ * model.count_scale_), rel=1e-14)
    penalties = (model.lambda_ * np.sum(theta)
                 + model.lambda_ * np.sum((codes[known] - theta[document]) ** 2)
                 + model.effective_rho_ * np.sum(codes))
    unseen = int(re.search(r"(\d+) words of terms the model never saw", out).group(1))
    assert unseen == X.data[~known].sum()
    assert 0 < loss < objective
    assert loss == pytest.approx(objective - penalties, rel=1e-5)


def test_evaluate_stc_says_it_has_no_classifier_for_the_labels(stc_model, svmlight_dir,
                                                                newsgroups, tmp_path, capsys):
    data = svmlight_dir / "test.svm"  # SVMlight files carry labels
    status, out, err = run(["evaluate", stc_model, data], capsys)
    assert status == EXIT_OK and out.startswith("documents: ") and "accuracy" not in out
    assert (f"stc evaluate: {data} has labels, but an STC model has no classifier to predict "
            "them; reporting the objective, held-out loss, word-code zeros and "
            "document-completion score (fit with --model medstc for accuracy)\n") in err
    # no labels, nothing to say; and -q leaves only the results
    unlabelled = tmp_path / "test.mtx"
    scipy.io.mmwrite(unlabelled, newsgroups[1].data)
    shutil.copy(svmlight_dir / "vocab.txt", tmp_path / "vocab.txt")
    status, plain, err = run(["evaluate", stc_model, unlabelled], capsys)
    assert status == EXIT_OK and "no classifier" not in err
    status, quiet, err = run(["evaluate", stc_model, data, "-q"], capsys)
    assert status == EXIT_OK and err == "" and quiet == out == plain


def test_info_says_what_the_file_holds(stc_model, capsys):
    status, out, _ = run(["info", stc_model], capsys)
    assert status == EXIT_OK
    assert "checksum ok" in out
    assert "model: STC, 3 topics, 18335 terms, loss poisson (registered)" in out
    assert "fit: 4 iterations" in out
    status, out, _ = run(["info", stc_model, "--json"], capsys)
    import json
    metadata = json.loads(out)
    assert metadata["estimator"] == "STC" and metadata["parameters"]["n_topics"] == 3


# ---- MedSTC on a folder of text files

@pytest.fixture(scope="module")
def medstc_model(tmp_path_factory, text_dir):
    path = tmp_path_factory.mktemp("models") / "medstc.model"
    status = main(["fit", str(text_dir / "train"), "-o", str(path), "--model", "medstc",
                   "--min-df", "2", "-q", *FAST])
    assert status == EXIT_OK
    return path


def test_fit_on_text_remembers_the_vocabulary_and_tokenisation(medstc_model, text_dir):
    model = stc.load(medstc_model)
    corpus = stc.readers.read_text_folder(text_dir / "train", min_df=2)
    assert list(model.vocabulary_) == list(corpus.vocabulary)
    assert model.text_options_["min_df"] == 2
    assert list(model.classes_) == ["comp.graphics", "rec.sport.hockey", "sci.space"]
    expected = MedSTC(n_topics=3, max_iter=4, random_state=0).fit(
        corpus.data, stc.readers.labels_of(corpus))
    assert model.coef_.tobytes() == expected.coef_.tobytes()


def test_evaluate_medstc_gives_accuracy_and_confusion_matrix(medstc_model, text_dir, capsys):
    status, out, _ = run(["evaluate", medstc_model, text_dir / "test"], capsys)
    assert status == EXIT_OK
    model = stc.load(medstc_model)
    corpus = stc.readers.load_corpus(text_dir / "test", model=model)
    y = stc.readers.labels_of(corpus)
    accuracy = float(re.search(r"^accuracy: (\S+)", out, re.M).group(1))
    assert accuracy == pytest.approx(model.score(corpus.data, y), abs=5e-5)
    lines = out.splitlines()
    table = lines[lines.index("confusion matrix (rows: true label, columns: predicted "
                              "label):") + 2:]
    matrix = np.array([[int(v) for v in line.split()[1:]] for line in table])
    assert [line.split()[0] for line in table] == list(model.classes_)
    assert np.array_equal(matrix.sum(axis=1), [20, 20, 20])
    assert np.trace(matrix) == round(accuracy * 60)


def test_transform_of_new_text_uses_the_fitted_terms(tmp_path, medstc_model, capsys):
    model = stc.load(medstc_model)
    known = [w for w in model.vocabulary_[:50]]
    new = tmp_path / "new"
    new.mkdir()
    (new / "a.txt").write_text(" ".join(known[:20]).upper() + " qwertyuiop zxcvbnm")
    (new / "b.txt").write_text("qwertyuiop zxcvbnm")  # no known term at all
    status, _, _ = run(["transform", medstc_model, new, "-o", tmp_path / "new.npz", "-q"],
                       capsys)
    assert status == EXIT_OK
    counts = np.zeros((2, model.n_features_in_))
    counts[0, :20] = 1  # the 20 known terms, lower-cased as in training
    with np.load(tmp_path / "new.npz", allow_pickle=False) as codes:
        assert np.array_equal(codes["document_codes"], model.transform(counts))
        assert [Path(p).name for p in codes["documents"]] == ["a.txt", "b.txt"]
        assert np.all(codes["document_codes"][1] == 0)


# ---- a custom loss, registered by an --import module

LOSS_MODULE = """
import numpy as np
import stc.losses


class HalfSquared(stc.losses.PythonLoss):
    def loss(self, y, mean):
        return 0.5 * (np.asarray(y, float) - mean) ** 2

    def gradient(self, y, mean):
        return mean - np.asarray(y, float)

    def hessian(self, y, mean):
        return np.ones(np.broadcast(y, mean).shape)


stc.losses.register("cli-half-squared", HalfSquared)
"""


@pytest.fixture
def loss_module(tmp_path):
    """A user's module registering a loss; the registry is restored afterwards."""
    saved = dict(stc.losses._REGISTRY)
    path = tmp_path / "my_loss.py"
    path.write_text(LOSS_MODULE)
    yield path
    stc.losses._REGISTRY.clear()
    stc.losses._REGISTRY.update(saved)


def test_a_custom_loss_comes_from_an_imported_module(tmp_path, loss_module, newsgroups,
                                                     capsys):
    train, _ = newsgroups
    dump_svmlight_file(train.data[:60], train.target[:60], str(tmp_path / "small.svm"))
    model = tmp_path / "custom.model"
    status, _, err = run(["fit", tmp_path / "small.svm", "-o", model, "--loss",
                          "cli-half-squared", "-k", "2", "--max-iter", "2", "-q"], capsys)
    _one_line_error(err, "--loss: 'cli-half-squared' is not registered")
    status, _, err = run(["fit", tmp_path / "small.svm", "-o", model, "--import", loss_module,
                          "--loss", "cli-half-squared", "-k", "2", "--max-iter", "2", "-q"],
                         capsys)
    assert status == EXIT_OK, err
    del stc.losses._REGISTRY["cli-half-squared"]  # a new process, without the module
    status, out, _ = run(["info", model], capsys)
    assert status == EXIT_OK and "loss cli-half-squared (NOT registered here)" in out
    status, _, err = run(["transform", model, tmp_path / "small.svm", "-o", tmp_path / "c.npz"],
                         capsys)
    assert status == EXIT_ERROR
    _one_line_error(err, "fitted with the loss 'cli-half-squared', which is not registered in "
                         "this process")
    status, _, err = run(["transform", model, tmp_path / "small.svm", "-o", tmp_path / "c.npz",
                          "--import", loss_module, "-q"], capsys)
    assert status == EXIT_OK, err
    status, _, err = run(["info", model, "--import", tmp_path / "absent.py"], capsys)
    _one_line_error(err, "--import: file", "absent.py not found")


# ---- errors and exit codes

def _one_line_error(err, *needles):
    """The error is the last line on stderr, and the only one (progress lines aside)."""
    lines = err.strip().splitlines()
    errors = [line for line in lines if ": error: " in line]
    assert len(errors) == 1 and errors[0] == lines[-1], err
    assert "Traceback" not in err
    for needle in needles:
        assert str(needle) in lines[-1], (needle, lines[-1])


def test_an_output_that_would_replace_an_input_is_refused(tmp_path, stc_model, svmlight_dir,
                                                           capsys):
    data, model = tmp_path / "train.svm", tmp_path / "stc.model"
    shutil.copy(svmlight_dir / "train.svm", data)
    shutil.copy(stc_model, model)
    before = data.read_bytes(), model.read_bytes()
    for argv, victim in ((["fit", data, "-o", data], data),
                         (["report", model, data, "-o", model], model),
                         (["report", model, data, "-o", data], data)):
        status, _, err = run([*argv, "-q"] if argv[0] == "fit" else argv, capsys)
        assert status == EXIT_ERROR
        _one_line_error(err, f"-o/--output: {victim} is the input", "choose another file name")
    codes = tmp_path / "codes.mtx"
    shutil.copy(data, tmp_path / "codes.word_codes.mtx")  # where --word-codes would write
    status, _, err = run(["transform", model, tmp_path / "codes.word_codes.mtx", "-o", codes,
                          "--word-codes"], capsys)
    assert status == EXIT_ERROR
    _one_line_error(err, "codes.word_codes.mtx is the input")
    status, _, err = run(["fit", data, "-o", tmp_path, "-q"], capsys)
    assert status == EXIT_ERROR
    _one_line_error(err, f"-o/--output: {tmp_path} is a folder")
    assert (data.read_bytes(), model.read_bytes()) == before


@pytest.mark.parametrize("option, value, message", [
    ("--token-pattern", "(", "'(' is not a regular expression: missing )"),
    ("--random-state", "99999999999", "must be <= 4294967295"),
    ("--topic-averaging", "2", "must be <= 1")])
def test_bad_option_values_are_named_by_the_option(tmp_path, svmlight_dir, option, value,
                                                     message, capsys):
    # they reached the estimator or scikit-learn, whose messages named Python's parameters
    status, _, err = run(["fit", svmlight_dir / "train.svm", "-o", tmp_path / "m", option, value],
                         capsys)
    assert status == EXIT_USAGE
    assert f"argument {option}: {message}" in err


def test_nan_counts_in_a_file_are_named(tmp_path, stc_model, capsys):
    # the summary line's int(X.sum()) failed first: "cannot convert float NaN to integer"
    (tmp_path / "nan.svm").write_text("0 1:nan 2:4\n1 3:2\n")
    for argv in (["fit", tmp_path / "nan.svm", "-o", tmp_path / "m", "-q"],
                 ["transform", stc_model, tmp_path / "nan.svm", "-o", tmp_path / "c.npz"]):
        status, _, err = run(argv, capsys)
        assert status == EXIT_ERROR
        _one_line_error(err, "nan.svm holds 1 NaN or infinite values")


def test_missing_and_unreadable_inputs_name_the_file(tmp_path, stc_model, capsys):
    status, _, err = run(["fit", tmp_path / "missing.svm", "-o", tmp_path / "m"], capsys)
    assert status == EXIT_ERROR
    _one_line_error(err, "stc fit: error:", "missing.svm")
    status, _, err = run(["topics", tmp_path / "nope.model"], capsys)
    assert status == EXIT_ERROR
    _one_line_error(err, "nope.model not found")
    status, _, err = run(["fit", tmp_path, "-o", tmp_path / "no" / "m"], capsys)
    assert status == EXIT_ERROR  # refused before reading or fitting anything
    _one_line_error(err, "-o/--output: folder", "does not exist")
    (tmp_path / "prose.txt").write_text("just some words\n")
    status, _, err = run(["transform", stc_model, tmp_path / "prose.txt", "-o",
                          tmp_path / "c.npz"], capsys)
    assert status == EXIT_ERROR
    _one_line_error(err, "prose.txt is neither")


def test_undecodable_text_names_the_commands_options(tmp_path, text_dir, capsys):
    """A text file not valid in the encoding: the message names --encoding and
    --decode-error (the Python spelling is stc.readers's), and either option reads it."""
    root = tmp_path / "texts"
    shutil.copytree(text_dir / "train", root)
    bad = root / "sci.space" / "latin1.txt"
    bad.write_bytes("caf\xe9 orbit".encode("latin-1"))
    model = tmp_path / "m.model"
    status, _, err = run(["fit", root, "-o", model, "-q", *FAST], capsys)
    assert status == EXIT_ERROR and err == (
        f"stc fit: error: {bad} is not valid utf-8 text (byte 3): give its encoding "
        "(--encoding), or --decode-error replace to replace bad bytes\n")
    assert "decode_error" not in err and not model.exists()
    status, _, _ = run(["fit", root, "-o", model, "-q", "--decode-error", "replace", *FAST],
                       capsys)
    assert status == EXIT_OK
    # a model fitted with the default (strict) reads new text the same way
    status, _, _ = run(["fit", text_dir / "train", "-o", model, "-q", *FAST], capsys)
    assert status == EXIT_OK
    status, _, err = run(["evaluate", model, root, "-q"], capsys)
    assert status == EXIT_ERROR and "(--encoding), or --decode-error replace" in err
    status, _, _ = run(["evaluate", model, root, "-q", "--encoding", "latin-1"], capsys)
    assert status == EXIT_OK
    status, _, err = run(["evaluate", model, root, "--encoding", "latin-7"], capsys)
    assert status == EXIT_USAGE and "argument --encoding: unknown encoding 'latin-7'" in err


def test_damaged_model_files_are_refused_in_one_line(tmp_path, stc_model, capsys):
    content = stc_model.read_bytes()
    (tmp_path / "cut.model").write_bytes(content[: len(content) // 2])
    for command in (["info"], ["topics"], ["evaluate"]):
        argv = command + [tmp_path / "cut.model"] + (["x"] if command == ["evaluate"] else [])
        status, _, err = run(argv, capsys)
        assert status == EXIT_ERROR
        _one_line_error(err, "cut.model is truncated or corrupted")


def test_a_model_file_declaring_huge_arrays_is_refused_in_one_line(tmp_path, stc_model,
                                                                   capsys):
    from test_persistence import _crafted

    crafted = _crafted(stc_model, tmp_path / "huge.model", "objective_", "<f8", (10**11,))
    for command in ("info", "topics"):
        status, _, err = run([command, crafted], capsys)
        assert status == EXIT_ERROR
        assert err == (f"stc {command}: error: {crafted} is truncated or corrupted (member "
                       "objective_.npy declares 100000000000 values of 8 bytes, but holds 0 "
                       "bytes); it cannot be loaded\n")


def test_a_folder_of_one_file_is_read_as_one_document(tmp_path, capsys):
    (tmp_path / "texts").mkdir()
    (tmp_path / "texts" / "only.txt").write_text("rocket orbit launch")
    status, out, err = run(["fit", tmp_path / "texts", "-o", tmp_path / "m.stc", "-k", "1",
                            "--max-iter", "2", "--random-state", "0"], capsys)
    assert status == EXIT_OK
    assert f"read {tmp_path / 'texts'} (text): 1 document, 3 terms, 3 words (" in out + err
    status, out, err = run(["transform", tmp_path / "m.stc", tmp_path / "texts", "-o",
                            tmp_path / "codes.npz"], capsys)
    assert status == EXIT_OK and "coded 1 document in " in out + err  # was "1 documents"
    status, out, _ = run(["info", tmp_path / "m.stc"], capsys)
    assert "model: STC, 1 topic, 3 terms" in out and "fit: 2 iterations" in out
    # more topics than documents: said once, in one line
    status, _, err = run(["fit", tmp_path / "texts", "-o", tmp_path / "m.stc", "-k", "2",
                          "--max-iter", "2", "--random-state", "0", "-q"], capsys)
    assert status == EXIT_OK
    warned = [line for line in err.splitlines() if "n_topics" in line]
    assert warned == ["stc fit: warning: n_topics=2 is more than the 1 document of X, too few "
                      "to learn that many distinct topics (some would repeat others); use at "
                      "most 1 topic"]


@pytest.mark.parametrize("options, message", [
    (["--min-df", "3"], "min_df=3 and max_df=1.0 keep no term: its terms are found in 1 to 2 "
                        "of its 3 documents; lower min_df or raise max_df"),
    (["--min-df", "0.9", "--max-df", "0.95"],
     "min_df=0.9 and max_df=0.95 keep no term: its terms are found in 1 to 2 of its 3 "
     "documents; lower min_df or raise max_df"),
    (["--min-df", "1000"], "min_df=1000 keeps only terms found in at least 1000 documents, "
                           "but the folder has 3"),
    (["--stop-words", "none", "--token-pattern", "[0-9]+"],
     "no term occurs in its 3 documents: every word is a stop word or does not match "
     "token_pattern (check the stop words and token_pattern)"),
])
def test_document_frequencies_that_keep_no_term_are_named_in_our_words(tmp_path, capsys,
                                                                      options, message):
    # scikit-learn's "After pruning, no terms remain. Try a lower min_df or a higher max_df."
    # used to be mixed into the message
    folder = tmp_path / "texts"
    folder.mkdir()
    for name, text in (("a", "rocket orbit"), ("b", "rocket goalie"), ("c", "puck pixel")):
        (folder / f"{name}.txt").write_text(text)
    status, _, err = run(["fit", folder, "-o", tmp_path / "m.stc", "-q", *options], capsys)
    assert status == EXIT_ERROR
    assert err == f"stc fit: error: text folder {folder}: {message}\n"


def test_bad_arguments_are_usage_errors_naming_the_option(tmp_path, svmlight_dir, capsys):
    data = svmlight_dir / "train.svm"
    for argv, option in [
        (["fit", data, "-o", tmp_path / "m", "-k", "0"], "-k/--topics"),
        (["fit", data, "-o", tmp_path / "m", "--lambda", "-1"], "--lambda"),
        (["fit", data, "-o", tmp_path / "m", "--min-df", "1.5"], "--min-df"),
        (["fit", data, "-o", tmp_path / "m", "--model", "lda"], "--model"),
        (["fit", data], "-o/--output"),
        (["topics", "m", "-n", "many"], "-n/--words"),
        (["frobnicate"], "frobnicate"),
    ]:
        status, _, err = run(argv, capsys)
        assert status == EXIT_USAGE, argv
        _one_line_error(err, option)
    status, _, err = run(["fit", data, "-o", tmp_path / "m", "--loss", "nope"], capsys)
    assert status == EXIT_ERROR
    _one_line_error(err, "--loss: 'nope' is not registered")
    status, _, err = run(["fit", data, "-o", tmp_path / "m", "--cost", "5"], capsys)
    _one_line_error(err, "--cost: MedSTC options, given with --model stc")
    status, _, err = run(["fit", data, "-o", tmp_path / "m", "--sweeps-per-iteration", "0"],
                         capsys)
    assert status == EXIT_USAGE
    _one_line_error(err, "--sweeps-per-iteration")


def test_medstc_needs_labels(tmp_path, newsgroups, capsys):
    train, _ = newsgroups
    scipy.io.mmwrite(tmp_path / "docs.mtx", train.data[:40])
    status, _, err = run(["fit", tmp_path / "docs.mtx", "-o", tmp_path / "m", "--model",
                          "medstc", "-q", *FAST], capsys)
    assert status == EXIT_ERROR
    assert len(err.splitlines()) == 1
    _one_line_error(err, "docs.mtx has no labels")


def test_debug_shows_the_traceback(tmp_path):
    with pytest.raises(FileNotFoundError):
        main(["info", str(tmp_path / "nope.model"), "--debug"])


def test_every_option_explains_itself_with_its_default(capsys):
    parser = build_parser()
    subcommands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(subcommands.choices) == {"fit", "topics", "transform", "evaluate", "info", "report"}
    for name, sub in subcommands.choices.items():
        for action in sub._actions:
            if not action.option_strings or isinstance(action, argparse._HelpAction):
                continue
            assert action.help and ("default" in action.help or "required" in action.help), \
                (name, action.option_strings)
        status, out, _ = run([name, "--help"], capsys)
        assert status == EXIT_OK and "exit status" in out


def test_help_states_the_estimators_defaults(capsys):
    # the knee of the measured frontier (STC and MedSTC), and MedSTC's l2 penalty on theta
    status, out, _ = run(["fit", "--help"], capsys)
    assert status == EXIT_OK
    text = " ".join(out.split())  # argparse wraps the help
    assert "weight of the word-code penalty (default: 0.02)" in text
    assert "(default: relative)" in text
    assert "penalty on document codes (default: l1 for stc, l2 for medstc)" in text


def test_help_reads_the_defaults_the_estimators_have():
    """The help reads the defaults from the estimators' source (no import): the same values."""
    from stc.cli import _estimator_defaults

    assert _estimator_defaults("_estimators/stc.py", "STC") == STC().get_params()
    assert _estimator_defaults("_estimators/medstc.py", "MedSTC") == MedSTC().get_params()


HEAVY = {"sklearn", "scipy", "matplotlib", "dask"}

LOADED_AFTER = """
import contextlib, io, json, sys
loaded = lambda: sorted({{m.split(".")[0] for m in sys.modules}} & {heavy!r})
seen = {{}}
import stc
seen["import stc"] = loaded()
import stc.cli
seen["import stc.cli"] = loaded()
for argv in {argvs!r}:
    with contextlib.redirect_stdout(io.StringIO()):
        status = stc.cli.main(argv)
    assert status == 0, (argv, status)
    seen[" ".join(argv)] = loaded()
from stc import *
assert [name for name in stc.__all__ if name not in globals()] == []
assert set(stc.__all__) <= set(dir(stc)) and {{"losses", "readers", "inspection"}} <= set(dir(stc))
print(json.dumps(seen))
"""


def test_help_info_and_topics_load_no_heavy_module(stc_model):
    """`stc --help`, `info` and `topics` answer without scikit-learn, scipy, matplotlib or
    dask (which take seconds to load); `from stc import *` still gives every public name."""
    import json

    argvs = [["--help"], ["fit", "--help"], ["info", str(stc_model)],
             ["topics", str(stc_model)]]
    result = subprocess.run([sys.executable, "-c",
                             LOADED_AFTER.format(heavy=HEAVY, argvs=argvs)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen == {step: [] for step in ["import stc", "import stc.cli",
                                          *(" ".join(argv) for argv in argvs)]}


# ---- the installed console script

def _console_script():
    here = Path(sys.executable).parent / ("stc.exe" if os.name == "nt" else "stc")
    script = str(here) if here.exists() else shutil.which("stc")
    assert script is not None, "the stc console script is not installed: pip install -e ."
    return script


def test_ctrl_c_during_fit_saves_the_model_learned_so_far(tmp_path, svmlight_dir, capsys):
    """The installed console script, and a real SIGINT sent to it once the fit is under way."""
    model = tmp_path / "interrupted.model"
    process = subprocess.Popen(
        [_console_script(), "fit", str(svmlight_dir / "train.svm"), "-o", str(model),
         "-k", "3", "--max-iter", "1000", "--tol", "0", "--random-state", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
    try:
        seen = []
        for line in process.stderr:  # wait for the first progress line: the loop is running
            seen.append(line)
            if line.startswith("iter"):
                process.send_signal(signal.SIGINT)
                break
        out, err = process.communicate(timeout=300)
    finally:
        process.kill()
    assert process.returncode == EXIT_INTERRUPTED, err
    assert out == ""
    # after the Ctrl-C: progress lines, the fit's acknowledgement, then one closing line
    said = [line for line in err.splitlines() if not line.startswith("iter")]
    done = said[-1].split()[4]
    assert said == ["stc: interrupt received; stopping after this iteration (Ctrl-C again to "
                    "abort)",
                    f"stc fit: interrupted after {done} iteration{'' if done == '1' else 's'}; "
                    f"saved the model learned so far to {model}"], err
    loaded = stc.load(model)
    assert loaded.interrupted_ is True
    assert 1 <= loaded.n_iter_ < 1000 and loaded.objective_.shape == (loaded.n_iter_,)
    status, out, _ = run(["info", model], capsys)
    plural = "" if loaded.n_iter_ == 1 else "s"
    assert status == EXIT_OK and f"fit: {loaded.n_iter_} iteration{plural}" in out
    assert "interrupted: yes" in out


def _default_sigint():
    """In the child before it runs: SIGINT back to its default. A shell starts background
    jobs with SIGINT ignored, and Python then installs no KeyboardInterrupt handler, so a
    suite run that way would send its Ctrl-C into the void."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


# Runs a command, but first announces on stderr when it starts importing scikit-learn
# and waits there: a Ctrl-C sent then arrives while the command's modules load.
PAUSE_AT_SKLEARN = """
import runpy, sys, time

class PauseAtSklearn:
    def find_spec(self, name, path=None, target=None):
        if name == "sklearn":
            sys.meta_path.remove(self)
            print("importing sklearn", file=sys.stderr, flush=True)
            time.sleep(120)
        return None

sys.meta_path.insert(0, PauseAtSklearn())
sys.argv = sys.argv[1:]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("command, message", [
    (["stc.cli", "fit", "{data}", "-o", "{model}"], "stc fit: interrupted"),
    (["stc.cli", "transform", "{model}", "{data}", "-o", "{codes}"], "stc transform: interrupted"),
    (["stc"], "python -m stc: interrupted"),
])
def test_ctrl_c_while_modules_load_is_one_line(tmp_path, svmlight_dir, stc_model, command,
                                               message):
    """`python -m stc.cli CMD` and `python -m stc` interrupted during their first seconds
    (loading scikit-learn): one line, exit status 130, nothing written."""
    names = {"data": svmlight_dir / "train.svm", "model": stc_model,
             "codes": tmp_path / "codes.npz"}
    if command[1:2] == ["fit"]:
        names["model"] = tmp_path / "new.model"
    argv = [part.format(**names) for part in command]
    process = subprocess.Popen([sys.executable, "-c", PAUSE_AT_SKLEARN, *argv],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=_default_sigint)
    try:
        assert process.stderr.readline() == "importing sklearn\n"
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=120)
    finally:
        process.kill()
    assert (process.returncode, out, err) == (EXIT_INTERRUPTED, "", message + "\n")
    assert not (tmp_path / "new.model").exists() and not (tmp_path / "codes.npz").exists()


# ---- report

def test_report_writes_the_page_stc_report_writes(medstc_model, text_dir, tmp_path, capsys):
    """`stc report` writes the same page as stc.report on the same model and documents."""
    pytest.importorskip("matplotlib")
    out_path = tmp_path / "report.html"
    status, out, err = run(["report", medstc_model, text_dir / "test", "-o", out_path,
                            "-n", "6", "--title", "a test report"], capsys)
    assert status == EXIT_OK and out == "" and f"wrote {out_path}" in err
    page = out_path.read_text(encoding="utf-8")
    assert "<title>a test report</title>" in page
    assert "confusion" in page.lower()  # MedSTC on labelled documents
    model = stc.load(medstc_model)
    corpus = stc.readers.read_text_folder(text_dir / "test", vocabulary=model.vocabulary_,
                                     **{k: v for k, v in model.text_options_.items()
                                        if k not in ("min_df", "max_df")})
    expected = stc.report(model, corpus.data, tmp_path / "expected.html",
                          y=stc.readers.labels_of(corpus), n_words=6, title="a test report")
    def undated(text):  # the footer says when the page was written
        return re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d", "<when>", text)

    assert undated(expected.read_text(encoding="utf-8")) == undated(page)


def test_report_refuses_a_missing_output_folder(stc_model, svmlight_dir, tmp_path, capsys):
    status, _, err = run(["report", stc_model, svmlight_dir / "test.svm",
                          "-o", tmp_path / "nowhere" / "r.html"], capsys)
    assert status != EXIT_OK and len(err.strip().splitlines()) == 1 and "--output" in err


ONLINE = ["--learning-method", "online", "--batch-size", "100", "--n-passes", "1",
          "--learning-decay", "0.7", "--learning-offset", "2", "--topic-averaging", "0.25"]
ONLINE_PARAMS = dict(learning_method="online", batch_size=100, n_passes=1, learning_decay=0.7,
                     learning_offset=2.0, topic_averaging=0.25)


@pytest.mark.parametrize("model", ["stc", "medstc"])
def test_online_options_reach_the_estimator(tmp_path, svmlight_dir, newsgroups, model):
    """`stc fit --learning-method online ...` fits what the estimator fits with them."""
    train, _ = newsgroups
    path = tmp_path / f"{model}-online.model"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        assert main(["fit", str(svmlight_dir / "train.svm"), "-o", str(path), "-q", *FAST,
                     "--model", model, *ONLINE]) == 0
        fitted = stc.load(path)
        if model == "stc":
            expected = STC(n_topics=3, max_iter=4, random_state=0, **ONLINE_PARAMS)
            expected.fit(train.data)
        else:
            expected = MedSTC(n_topics=3, max_iter=4, random_state=0, **ONLINE_PARAMS)
            expected.fit(train.data, train.target)
    assert {name: getattr(fitted, name) for name in ONLINE_PARAMS} == ONLINE_PARAMS
    assert fitted.components_.tobytes() == expected.components_.tobytes()


def test_online_options_are_checked(tmp_path, svmlight_dir, capsys):
    status, _, err = run(["fit", svmlight_dir / "train.svm", "-o", tmp_path / "m",
                          "--batch-size", "0"], capsys)
    assert status != EXIT_OK and "--batch-size" in err and ">= 1" in err
    status, _, err = run(["fit", svmlight_dir / "train.svm", "-o", tmp_path / "m",
                          "--learning-decay", "0.5"], capsys)
    assert status != EXIT_OK and "--learning-decay" in err


@pytest.mark.parametrize("argv, message", [
    (["--topics", "0"], "argument --topics: 0 is not allowed: an integer at least 1"),
    (["--threads", "0"], "argument --threads: 0 is not allowed"),
    (["--seed", "-1"], "argument --seed: -1 is not allowed: an integer in [0, 4294967295]"),
    (["--words", "x"], "argument --words: 'x' is not an integer")])
def test_the_demo_refuses_bad_numbers_in_one_line(argv, message, capsys):
    # they reached the estimator, whose ValueError printed a traceback
    from stc.__main__ import main as demo

    with pytest.raises(SystemExit) as exit_info:
        demo(argv)
    assert exit_info.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1].startswith(f"python -m stc: error: {message}")
    assert "Traceback" not in err
