"""The ``stc`` command: fit a model on a corpus, save it, inspect it, code new documents.

    stc fit DATA -o MODEL [--model stc|medstc] [-k K] [model options]
    stc topics MODEL [-n N]
    stc transform MODEL DATA -o OUT [--word-codes]
    stc evaluate MODEL DATA
    stc info MODEL

`build_parser` builds the whole argument parser (the documentation renders
its help); `main` runs one command and returns the exit status.

Only the standard library is imported up front: numpy, scipy, scikit-learn and the
estimators are imported by the commands that use them, so that `stc --help`, `stc info`
and `stc topics` answer at once, and Ctrl-C while they load is caught by `main`.
"""
import argparse
import contextlib
import functools
import importlib
import importlib.util
import json
import math
import os
import re
import sys
import time
import warnings

from stc._utils.text import counted

EXIT_OK = 0
EXIT_ERROR = 1        # a bad file, bad data, or a failure while running
EXIT_USAGE = 2        # bad command-line arguments (argparse's convention)
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report Ctrl-C

EPILOG = (f"exit status: {EXIT_OK} success, {EXIT_ERROR} error (a one-line message on stderr; "
          f"--debug shows the traceback), {EXIT_USAGE} bad arguments, {EXIT_INTERRUPTED} "
          "interrupted (Ctrl-C during fit stops after the current iteration and saves the "
          "model learned so far).")

DATA_HELP = ("a folder of text files (one document a file, sub-folders as labels, the layout "
             "of scikit-learn's load_files), an SVMlight/LibSVM file or a Matrix Market file "
             "(optionally gzip- or bzip2-compressed), recognised by what it is")


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr (exit status 2)."""

    def error(self, message):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# ---------------------------------------------------------------------------
# Argument types: they refuse bad values with a message naming the option
# ---------------------------------------------------------------------------

def _number(kind, low=None, low_inclusive=True, allow_none=False, words=(), high=None):
    """A parser of numbers of ``kind`` >= ``low`` (or > low) and <= ``high``; also "none" and
    the ``words``."""
    def parse(text):
        if allow_none and text.lower() == "none":
            return None
        if text.lower() in words:
            return text.lower()
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {'an integer' if kind is int else 'a number'}, got {text!r}") from None
        if kind is float and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
        if low is not None and (value < low or (value == low and not low_inclusive)):
            raise argparse.ArgumentTypeError(
                f"must be {'>=' if low_inclusive else '>'} {low}, got {text!r}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"must be <= {high}, got {text!r}")
        return value
    return parse


def _regular_expression(text):
    try:
        re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a regular expression: {exc}") from None
    return text


def _document_frequency(text):
    """An int count of documents, or a float share of them in [0, 1] (CountVectorizer's rule)."""
    try:
        value = int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a document count or a share in [0, 1], got {text!r}") from None
        if not 0.0 <= value <= 1.0:
            raise argparse.ArgumentTypeError(f"a share of documents must be in [0, 1], got "
                                             f"{text!r}")
        return value
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return value


def _encoding(text):
    import codecs

    try:
        codecs.lookup(text)
    except LookupError:
        raise argparse.ArgumentTypeError(f"unknown encoding {text!r}") from None
    return text


def _n_jobs(text):
    value = _number(int)(text)
    if value == 0 or value < -1:
        raise argparse.ArgumentTypeError(f"must be a positive number of threads or -1 (all "
                                         f"cores), got {text!r}")
    return value


# ---------------------------------------------------------------------------
# The parser
# ---------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _estimator_defaults(source, class_name):
    """The defaults of an estimator's ``__init__``, read from its source file.

    Importing the estimators loads scikit-learn, which takes seconds; the help texts
    need only these literals (tests check them against ``get_params()``).
    """
    import ast

    # the file itself: importing the estimator to find it would load scikit-learn
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), *source.split("/"))
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    cls = next(node for node in tree.body
               if isinstance(node, ast.ClassDef) and node.name == class_name)
    init = next(node for node in cls.body
                if isinstance(node, ast.FunctionDef) and node.name == "__init__").args
    positional = init.args[len(init.args) - len(init.defaults):]
    return {arg.arg: ast.literal_eval(value)
            for arg, value in [*zip(positional, init.defaults),
                               *zip(init.kwonlyargs, init.kw_defaults)]}


def _stc_default(name):
    return _estimator_defaults("_estimators/stc.py", "STC")[name]


def _medstc_default(name):
    return _estimator_defaults("_estimators/medstc.py", "MedSTC")[name]


def _default(name):
    """'default: ...' for an estimator parameter, from the estimators themselves."""
    ours, theirs = _stc_default(name), _medstc_default(name)
    if ours == theirs:
        return f"default: {ours}"
    return f"default: {ours} for stc, {theirs} for medstc"


def _add_common_options(parser):
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="print no progress or summary, only results, warnings and errors "
                             "(default: off)")
    parser.add_argument("--debug", action="store_true",
                        help="on an error, show the full traceback (default: off)")
    parser.add_argument("--import", dest="imports", action="append", default=[],
                        metavar="MODULE",
                        help="import this Python module (a name or a .py file) first, e.g. one "
                             "that registers a custom loss; may be repeated (default: none)")


def _add_data_options(parser, for_fit):
    group = parser.add_argument_group("data options")
    group.add_argument("--format", choices=("auto", "text", "svmlight", "matrix-market"),
                       default="auto",
                       help="what DATA is (default: auto, recognised from DATA itself)")
    group.add_argument("--vocabulary", metavar="FILE",
                       help="terms of the columns of an SVMlight or Matrix Market file, one a "
                            "line (default: vocab.txt next to DATA if there is one)")
    group.add_argument("--labels", metavar="FILE",
                       help="labels of a Matrix Market file's documents, one a line "
                            "(default: none)")
    group.add_argument("--one-based", action="store_true",
                       help="SVMlight term indices start at 1, as in LibSVM "
                            "(default: off, they start at 0)")
    group.add_argument("--encoding", type=_encoding,
                       help="encoding of text files (default: " +
                            ("utf-8)" if for_fit else "the one the model was fitted with)"))
    group.add_argument("--decode-error", choices=("strict", "replace", "ignore"),
                       help="what to do with bytes that are not valid in the encoding: refuse "
                            "the file, or replace or drop them (default: " +
                            ("strict)" if for_fit else "the model's setting)"))
    if not for_fit:
        return
    from stc._utils.text import TOKEN_PATTERN

    text = parser.add_argument_group("text options (a folder of text files)")
    text.add_argument("--stop-words", default="builtin", metavar="{builtin,none,FILE}",
                      help="words left out: the package's English list, none, or a file with "
                           "one word a line (default: builtin)")
    text.add_argument("--min-df", type=_document_frequency, default=1, metavar="N",
                      help="keep terms found in at least N documents (an integer) or in at "
                           "least this share of them (a number in [0, 1]) (default: 1)")
    text.add_argument("--max-df", type=_document_frequency, default=1.0, metavar="N",
                      help="keep terms found in at most N documents or at most this share of "
                           "them (default: 1.0, no limit)")
    text.add_argument("--no-lowercase", dest="lowercase", action="store_false",
                      help="keep upper case apart (default: off, text is lower-cased)")
    text.add_argument("--token-pattern", type=_regular_expression, default=TOKEN_PATTERN,
                      metavar="REGEX",
                      help="regular expression of a word "
                           f"(default: {TOKEN_PATTERN.replace('%', '%%')}, words of two or more "
                           "characters, inner apostrophes kept)")


def _add_model_options(parser):
    # Options left out are not passed on, so the estimator's own default applies.
    model = parser.add_argument_group(
        "model options (defaults are the estimators')",
        "The defaults of --rho, --rho-units and --theta-penalty are the sparsest setting "
        "measured within 2 points of the best accuracy; the paper's setting is "
        "--rho 0.01 --rho-units absolute, with --theta-penalty l2 for stc.")
    model.argument_default = argparse.SUPPRESS
    model.add_argument("--model", choices=("stc", "medstc"), default="stc",
                       help="STC (unsupervised) or MedSTC (supervised: needs labelled "
                            "documents) (default: stc)")
    model.add_argument("-k", "--topics", dest="n_topics", type=_number(int, 1), metavar="K",
                       help=f"number of topics ({_default('n_topics')})")
    model.add_argument("--lambda", dest="lambda_", type=_number(float, 0), metavar="X",
                       help=f"weight of the document-code penalty ({_default('lambda_')})")
    model.add_argument("--gamma", type=_number(float, 0, low_inclusive=False), metavar="X",
                       help="coupling of word and document codes (default: equal to --lambda)")
    model.add_argument("--rho", type=_number(float, 0), metavar="X",
                       help=f"weight of the word-code penalty ({_default('rho')})")
    model.add_argument("--rho-units", choices=("absolute", "relative"),
                       help="units of --rho: the paper's weight, or relative to "
                            f"sqrt(2 gamma mean count) ({_default('rho_units')})")
    model.add_argument("--loss", metavar="NAME",
                       help="a registered loss: poisson, gaussian, bernoulli, or one registered "
                            f"by an --import module ({_default('loss')})")
    model.add_argument("--theta-penalty", choices=("l1", "l2"),
                       help=f"penalty on document codes ({_default('theta_penalty')})")
    model.add_argument("--code-penalty", choices=("l1", "l2"),
                       help=f"penalty on word codes ({_default('code_penalty')})")
    model.add_argument("--max-iter", type=_number(int, 1), metavar="N",
                       help=f"outer iterations at most ({_default('max_iter')})")
    model.add_argument("--tol", type=_number(float, 0), metavar="X",
                       help="stop when the objective's relative decrease falls under this "
                            f"({_default('tol')})")
    model.add_argument("--inner-max-iter", type=_number(int, 1), metavar="N",
                       help=f"coding sweeps per document at most ({_default('inner_max_iter')})")
    model.add_argument("--inner-tol", type=_number(float, 0), metavar="X",
                       help=f"coding tolerance per document ({_default('inner_tol')})")
    model.add_argument("--dictionary-max-iter", type=_number(int, 1), metavar="N",
                       help="dictionary steps per outer iteration "
                            f"({_default('dictionary_max_iter')})")
    model.add_argument("--sweeps-per-iteration", type=_number(int, 1, allow_none=True),
                       metavar="N", help="coding sweeps per document in each outer "
                       "iteration of batch learning; 'none' codes every document to "
                       f"--inner-tol, the paper's step ({_default('sweeps_per_iteration')})")
    model.add_argument("--init", choices=("auto", "random", "nndsvd"),
                       help="starting topics: a few random documents per topic (random) or "
                            "a truncated SVD of the counts (nndsvd); auto: nndsvd for batch "
                            "learning from 50 topics on, else random "
                            f"({_default('init')})")
    model.add_argument("--random-state", type=_number(int, 0, high=2 ** 32 - 1), metavar="SEED",
                       help="seed of the initial topics; give one for a repeatable fit "
                            f"({_default('random_state')}, a fresh seed each run)")
    _add_online_options(parser)
    _add_medstc_options(parser)


def _add_online_options(parser):
    online = parser.add_argument_group(
        "online learning (with --learning-method online)",
        "Mini-batches in a few passes: the word codes of one batch in memory at a time, "
        "not the whole corpus's.")
    online.argument_default = argparse.SUPPRESS
    online.add_argument("--learning-method", choices=("batch", "online"),
                        help="batch: the whole corpus alternated to convergence; online: "
                             f"mini-batches ({_default('learning_method')})")
    online.add_argument("--batch-size", type=_number(int, 1, words=("auto",)), metavar="N",
                        help="documents per mini-batch; auto: 20 per topic, in [256, 4096] "
                             f"({_default('batch_size')})")
    online.add_argument("--n-passes", type=_number(int, 1), metavar="N",
                        help=f"passes over the documents ({_default('n_passes')})")
    online.add_argument("--learning-decay", type=_number(float, 0.5, low_inclusive=False),
                        metavar="X", help="kappa of the weight (tau0 + t)^-kappa of batch t, "
                                          f"in (0.5, 1] ({_default('learning_decay')})")
    online.add_argument("--learning-offset", type=_number(float, 0), metavar="X",
                        help="tau0 of that weight: a larger one weighs the first batches less "
                             f"({_default('learning_offset')})")
    online.add_argument("--topic-averaging", type=_number(float, 0, high=1), metavar="X",
                        help="share of the last pass whose topics are averaged, in [0, 1] "
                             f"({_default('topic_averaging')})")


def _add_medstc_options(parser):
    supervised = parser.add_argument_group("MedSTC options (with --model medstc)")
    supervised.argument_default = argparse.SUPPRESS
    supervised.add_argument("--C", dest="C", type=_number(float, 0, low_inclusive=False),
                            metavar="X", help=f"weight of the hinge loss (default: "
                                              f"{_medstc_default('C')})")
    supervised.add_argument("--cost", type=_number(float, 0, low_inclusive=False), metavar="X",
                            help="cost of a wrong label (default: "
                                 f"{_medstc_default('cost')})")
    supervised.add_argument("--svm-tol", type=_number(float, 0, low_inclusive=False),
                            metavar="X", help="cutting-plane tolerance, relative to --cost "
                                              f"(default: {_medstc_default('svm_tol')})")
    supervised.add_argument("--svm-max-iter", type=_number(int, 1), metavar="N",
                            help="cutting-plane iterations per SVM step (default: "
                                 f"{_medstc_default('svm_max_iter')})")
    supervised.add_argument("--refit-C", dest="refit_C",
                            type=_number(float, 0, low_inclusive=False, allow_none=True,
                                         words=("auto",)),
                            metavar="X", help="C of the final classifier refit on label-free "
                                              "codes; auto follows the codes' scale (C = "
                                              "constant / mean squared norm of the codes); "
                                              "none keeps the joint one (default: "
                                              f"{_medstc_default('refit_C')})")


def _add_threads(parser):
    parser.add_argument("-j", "--n-jobs", type=_n_jobs, metavar="N",
                        help="threads, -1 for all cores; results do not depend on it "
                             "(default: 1)")


def build_parser():
    """The argument parser of the ``stc`` command, with one sub-parser per command."""
    from stc import __version__

    parser = _Parser(prog="stc", description="Sparse Topical Coding from the command line: fit "
                     "STC or MedSTC on a corpus, save the model in one portable file, inspect "
                     "it, and code new documents with it.", epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"stc {__version__}",
                        help="print the version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    common = _Parser(add_help=False)
    _add_common_options(common)

    def command(name, help, description):
        sub = commands.add_parser(name, help=help, description=description, epilog=EPILOG,
                                  parents=[common])
        sub.set_defaults(handler=globals()[f"_run_{name}"])
        return sub

    for add in (_add_fit_command, _add_topics_command, _add_transform_command,
                _add_evaluate_command, _add_report_command, _add_info_command):
        add(command)
    return parser


def _add_fit_command(command):
    """The ``fit`` sub-parser, made by ``command`` (see `build_parser`)."""
    fit = command("fit", "fit a model on DATA and save it",
                  "Fit STC or MedSTC on DATA and save the model to MODEL. Progress (iteration, "
                  "objective, sparsity, elapsed and remaining time) goes to stderr unless -q.")
    fit.add_argument("data", metavar="DATA", help=DATA_HELP)
    fit.add_argument("-o", "--output", required=True, metavar="MODEL",
                     help="model file to write (required)")
    _add_model_options(fit)
    _add_threads(fit)
    _add_data_options(fit, for_fit=True)


def _add_topics_command(command):
    """The ``topics`` sub-parser."""
    topics = command("topics", "print the top words of every topic",
                     "Print the highest-weight terms of every topic with their weights, one "
                     "topic a line.")
    topics.add_argument("model", metavar="MODEL", help="model file written by stc fit")
    topics.add_argument("-n", "--words", type=_number(int, 1), default=10, metavar="N",
                        help="words shown per topic (default: 10)")


def _add_transform_command(command):
    """The ``transform`` sub-parser."""
    transform = command("transform", "write the codes of DATA's documents",
                        "Code DATA's documents with the model's topics and write the document "
                        "codes (and the word codes with --word-codes) to OUT. Text is read "
                        "into the model's own terms; terms it never saw are left out.")
    transform.add_argument("model", metavar="MODEL", help="model file written by stc fit")
    transform.add_argument("data", metavar="DATA", help=DATA_HELP)
    transform.add_argument("-o", "--output", required=True, metavar="OUT",
                           help="output file: .npz (numpy: document_codes, and word_codes_* "
                                "arrays of a CSR matrix) or .mtx (Matrix Market; the word codes "
                                "go to OUT's name with .word_codes.mtx) (required)")
    transform.add_argument("--word-codes", action="store_true",
                           help="also write the word codes: one row per distinct term of each "
                                "document, in document order (default: off)")
    _add_threads(transform)
    _add_data_options(transform, for_fit=False)


def _add_evaluate_command(command):
    """The ``evaluate`` sub-parser."""
    evaluate = command("evaluate", "score the model on DATA",
                       "MedSTC: accuracy and confusion matrix on DATA's labelled documents. "
                       "STC (no classifier: DATA's labels, if any, are not used): the "
                       "objective of coding DATA, its reconstruction loss, its word-code "
                       "zeros, and the document-completion score (STC.score: every second "
                       "word of each document held out, the rest coded, the held-out words' "
                       "log-likelihood per token).")
    evaluate.add_argument("model", metavar="MODEL", help="model file written by stc fit")
    evaluate.add_argument("data", metavar="DATA", help=DATA_HELP)
    _add_threads(evaluate)
    _add_data_options(evaluate, for_fit=False)


def _add_report_command(command):
    """The ``report`` sub-parser."""
    report = command("report", "write an HTML report of the model on DATA",
                     "Write one self-contained HTML page (no network needed to view it) "
                     "describing the model on DATA's documents: fit summary, each topic's top "
                     "words with their coherence, code sparsity, the codes of representative "
                     "words and, when DATA has labels, per-class codes (and MedSTC's confusion "
                     "matrix). Needs matplotlib: pip install 'sparse-topical-coding[plot]'.")
    report.add_argument("model", metavar="MODEL", help="model file written by stc fit")
    report.add_argument("data", metavar="DATA", help=DATA_HELP)
    report.add_argument("-o", "--output", required=True, metavar="HTML",
                        help="page to write (required)")
    report.add_argument("-n", "--words", type=_number(int, 1), default=10, metavar="N",
                        help="top words shown per topic (default: 10)")
    report.add_argument("--title", default=None,
                        help="page title (default: '<model> model report')")
    _add_threads(report)
    _add_data_options(report, for_fit=False)


def _add_info_command(command):
    """The ``info`` sub-parser."""
    info = command("info", "say what a model file holds",
                   "Check a model file (format version, checksum) and describe it: model, "
                   "parameters, vocabulary, classes, fitted attributes.")
    info.add_argument("model", metavar="MODEL", help="model file written by stc fit")
    info.add_argument("--json", action="store_true",
                      help="print the file's metadata as JSON instead (default: off)")


# ---------------------------------------------------------------------------
# Shared steps
# ---------------------------------------------------------------------------

class CommandError(Exception):
    """An error reported to the user as one line (exit status 1)."""


def _say(args, message):
    if not args.quiet:
        print(message, file=sys.stderr, flush=True)


def _import_modules(names):
    for name in names:
        if name.endswith(".py"):
            if not os.path.isfile(name):
                raise CommandError(f"--import: file {name} not found")
            spec = importlib.util.spec_from_file_location(
                os.path.splitext(os.path.basename(name))[0], name)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            try:
                importlib.import_module(name)
            except ImportError as exc:
                raise CommandError(f"--import: cannot import {name}: {exc}") from None


def _check_output(path, args, inputs=("data",)):
    """Refuse, before any long work, an output that is a folder, lies in no folder or is an input.

    ``inputs``: the attributes of ``args`` naming the command's input paths
    (the labels, vocabulary and stop-word files are checked too).
    """
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise CommandError(f"-o/--output: folder {os.path.dirname(path)} does not exist")
    if os.path.isdir(path):
        raise CommandError(f"-o/--output: {path} is a folder; give a file name")
    if not os.path.exists(path):
        return
    for name in (*inputs, "labels", "vocabulary", "stop_words"):
        given = getattr(args, name, None)
        if isinstance(given, str) and os.path.isfile(given) and os.path.samefile(path, given):
            raise CommandError(f"-o/--output: {path} is the input {given}; writing there would "
                               "replace it, so choose another file name")


def _word_codes_path(output):
    """Where ``stc transform --word-codes`` writes the word codes next to a .mtx OUT."""
    return os.path.splitext(output)[0] + ".word_codes.mtx"


def _load_model(path):
    from stc import load

    return load(path)


def _read_data(args, model=None):
    import numpy as np

    from stc.readers import UndecodableTextError, load_corpus

    options = {}
    for name in ("encoding", "decode_error"):
        if getattr(args, name, None) is not None:
            options[name] = getattr(args, name)
    if model is None:
        options.update(stop_words=args.stop_words, min_df=args.min_df, max_df=args.max_df,
                       lowercase=args.lowercase, token_pattern=args.token_pattern)
    start = time.perf_counter()
    try:
        corpus = load_corpus(args.data, format=args.format, vocabulary=args.vocabulary,
                             labels=args.labels, zero_based=not args.one_based, model=model,
                             **options)
    except UndecodableTextError as exc:  # in the command's spelling, not Python's
        raise CommandError(exc.advice("--encoding", "--decode-error replace")) from None
    X = corpus.data
    bad = X.nnz - int(np.count_nonzero(np.isfinite(X.data)))
    if bad:
        raise CommandError(f"{args.data} holds {bad} NaN or infinite values; counts must be "
                           "finite and non-negative")
    _say(args, f"read {args.data} ({corpus.format}): {counted(X.shape[0], 'document')}, "
               f"{counted(X.shape[1], 'term')}, {counted(int(X.sum()), 'word')}"
               + (f", {counted(len(np.unique(corpus.target)), 'label')}"
                  if corpus.target is not None else "")
               + f" ({time.perf_counter() - start:.1f} s)")
    return corpus


def _one_line(exc):
    text = str(exc) if str(exc) else type(exc).__name__
    if isinstance(exc, KeyError):
        text = f"missing {text}"
    return " ".join(text.split())


# ---------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------

_STC_OPTIONS = ("n_topics", "lambda_", "gamma", "rho", "rho_units", "loss", "theta_penalty",
                "code_penalty", "max_iter", "tol", "inner_max_iter", "inner_tol",
                "dictionary_max_iter", "sweeps_per_iteration", "init", "random_state", "n_jobs",
                "learning_method", "batch_size", "n_passes", "learning_decay",
                "learning_offset", "topic_averaging")
_MEDSTC_OPTIONS = ("C", "cost", "svm_tol", "svm_max_iter", "refit_C")


def _estimator(args):
    from stc import STC, MedSTC
    from stc.losses import registered_losses

    given = {name: getattr(args, name) for name in _STC_OPTIONS if hasattr(args, name)}
    supervised = {name: getattr(args, name) for name in _MEDSTC_OPTIONS if hasattr(args, name)}
    if "loss" in given and given["loss"] not in registered_losses():
        raise CommandError(f"--loss: {given['loss']!r} is not registered; known losses: "
                           f"{', '.join(registered_losses())} (--import a module that "
                           "registers yours)")
    if args.model == "stc":
        if supervised:
            names = ", ".join("--" + n.replace("_", "-") if n != "C" else "--C"
                              for n in supervised)
            raise CommandError(f"{names}: MedSTC options, given with --model stc")
        return STC(**given, verbose=0 if args.quiet else 1)
    return MedSTC(**given, **supervised, verbose=0 if args.quiet else 1)


def _run_fit(args):
    from stc import FitInterruptedWarning

    _check_output(args.output, args)
    model = _estimator(args)
    corpus = _read_data(args)
    labels = None
    if args.model == "medstc":
        from stc.readers import labels_of

        labels = labels_of(corpus)
        if labels is None:
            raise CommandError(f"{args.data} has no labels, which MedSTC needs: use a text "
                               "folder with one sub-folder per label, an SVMlight file, or "
                               "--labels for a Matrix Market file")
    start = time.perf_counter()
    with warnings.catch_warnings():
        # said below, as the command's own message
        warnings.simplefilter("ignore", FitInterruptedWarning)
        # verbose=1 unless -q: the estimator prints one progress line per iteration
        # on stderr; Ctrl-C ends the fit after the current iteration (interrupted_).
        if labels is None:
            model.fit(corpus.data)
        else:
            model.fit(corpus.data, labels)
    elapsed = time.perf_counter() - start
    model.set_params(verbose=0)  # progress was the command's, not the saved model's
    model.save(args.output, vocabulary=corpus.vocabulary, text_options=corpus.text_options)
    if model.interrupted_:
        print(f"stc fit: interrupted after {counted(model.n_iter_, 'iteration')}; saved the "
              f"model learned so far to {args.output}", file=sys.stderr)
        return EXIT_INTERRUPTED
    _say(args, f"{type(model).__name__}: {counted(model.n_iter_, 'iteration')} in "
               f"{elapsed:.1f} s, "
               f"objective {model.objective_[-1]:.6g}"
               + (f", train accuracy {model.refit_train_accuracy_:.4f}"
                  if getattr(model, "refit_train_accuracy_", None) is not None else "")
               + f"; saved to {args.output}")
    return EXIT_OK


def _run_topics(args):
    from types import SimpleNamespace

    from stc._estimators.persistence import read_model_file
    from stc.inspection import top_words

    # The file's topics and vocabulary suffice: no need for the model's loss to be registered.
    metadata, arrays = read_model_file(args.model)
    topics = SimpleNamespace(components_=arrays["components_"],
                             vocabulary_=metadata.get("vocabulary"))
    width = len(str(topics.components_.shape[0] - 1))
    for k, pairs in enumerate(top_words(topics, n=args.words)):
        words = "  ".join(f"{term} {weight:.4f}" for term, weight in pairs)
        print(f"topic {k:>{width}}: {words}")
    return EXIT_OK


def _word_code_entries(X):
    """(document, term) of each row of the word codes: X's stored entries in CSR order."""
    import numpy as np

    documents = np.repeat(np.arange(X.shape[0], dtype=np.int64), np.diff(X.indptr))
    return documents, X.indices.astype(np.int64)


def _run_transform(args):
    import numpy as np
    import scipy.io
    import scipy.sparse as sp

    extension = os.path.splitext(args.output)[1].lower()
    if extension not in (".npz", ".mtx"):
        raise CommandError(f"-o/--output: {args.output} must end in .npz or .mtx")
    _check_output(args.output, args, ("data", "model"))
    if args.word_codes and extension == ".mtx":
        _check_output(_word_codes_path(args.output), args, ("data", "model"))
    model = _load_model(args.model)
    if args.n_jobs is not None:
        model.set_params(n_jobs=args.n_jobs)
    corpus = _read_data(args, model=model)
    X = corpus.data
    start = time.perf_counter()
    theta = model.transform(X)
    word_codes = sp.csr_matrix(model.word_codes(X)) if args.word_codes else None
    _say(args, f"coded {counted(X.shape[0], 'document')} in "
               f"{time.perf_counter() - start:.1f} s; "
               f"{float(np.mean(theta == 0)):.3f} of the document codes are zero")
    written = [args.output]
    if extension == ".npz":
        arrays = {"document_codes": theta}
        if corpus.filenames is not None:
            arrays["documents"] = np.asarray(corpus.filenames, dtype=str)
        if word_codes is not None:
            documents, terms = _word_code_entries(X)
            arrays.update(word_codes_data=word_codes.data, word_codes_indices=word_codes.indices,
                          word_codes_indptr=word_codes.indptr,
                          word_codes_shape=np.asarray(word_codes.shape),
                          word_code_document=documents, word_code_term=terms)
        np.savez(args.output, **arrays)
    else:
        scipy.io.mmwrite(args.output, sp.csr_matrix(theta),
                         comment="document codes: row d is document d, column k topic k")
        if word_codes is not None:
            path = _word_codes_path(args.output)
            scipy.io.mmwrite(path, word_codes, comment=(
                "word codes: row i is the i-th non-zero of the documents x terms count matrix "
                "in row-major order (document by document, terms in increasing column "
                "order); column k is topic k"))
            written.append(path)
    _say(args, f"wrote {' and '.join(written)}")
    return EXIT_OK


def _held_out_loss(model, X):
    """Reconstruction loss of X's words with their codes, over terms the topics know."""
    import numpy as np

    from stc.losses import get_loss

    codes = model.word_codes(X)
    beta = model.components_
    known = beta.sum(axis=0)[X.indices] > 0
    # mean of entry i: its word code times its term's column of beta
    means = np.asarray(codes.multiply(beta.T[X.indices]).sum(axis=1)).ravel()
    values = get_loss(model.loss).loss(X.data[known], means[known])
    zeros = 1.0 - codes.nnz / max(codes.shape[0] * codes.shape[1], 1)
    return float(np.sum(values)), float(X.data[known].sum()), float(X.data[~known].sum()), zeros


def _run_evaluate(args):
    import numpy as np
    from sklearn.metrics import confusion_matrix

    from stc import MedSTC
    from stc.readers import labels_of

    model = _load_model(args.model)
    if args.n_jobs is not None:
        model.set_params(n_jobs=args.n_jobs)
    corpus = _read_data(args, model=model)
    X = corpus.data
    print(f"documents: {X.shape[0]}")
    if isinstance(model, MedSTC):
        y = labels_of(corpus)
        if y is None:
            raise CommandError(f"{args.data} has no labels to evaluate a MedSTC model on")
        predicted = model.predict(X)
        correct = int(np.sum(predicted == y))
        print(f"accuracy: {correct / X.shape[0]:.4f} ({correct} of {X.shape[0]})")
        unseen = sorted(set(np.unique(y).tolist()) - set(model.classes_.tolist()))
        labels = list(model.classes_) + unseen
        matrix = confusion_matrix(y, predicted, labels=labels)
        names = [str(label) for label in labels]
        corner = "true \\ predicted"
        width = max(len(n) for n in names + [corner])
        cell = max(max(len(n) for n in names), len(str(matrix.max())))
        print("confusion matrix (rows: true label, columns: predicted label):")
        print(f"{corner:<{width}}  " + "  ".join(f"{n:>{cell}}" for n in names))
        for name, row in zip(names, matrix):
            print(f"{name:<{width}}  " + "  ".join(f"{v:>{cell}}" for v in row))
        return EXIT_OK
    if labels_of(corpus) is not None:  # e.g. every SVMlight file: say why there is no accuracy
        _say(args, f"stc evaluate: {args.data} has labels, but an {type(model).__name__} model "
                   "has no classifier to predict them; reporting the objective, held-out loss, "
                   "word-code zeros and document-completion score (fit with --model medstc for "
                   "accuracy)")
    objective = model.objective(X)
    loss, words, unknown, zeros = _held_out_loss(model, X)
    print(f"objective: {objective:.6g} ({objective / max(X.shape[0], 1):.6g} per document)")
    print(f"held-out loss ({model.loss}): {loss:.6g} ({loss / max(words, 1):.6g} per word, "
          f"{counted(int(words), 'word')} of known terms; {counted(int(unknown), 'word')} of "
          "terms the model never "
          "saw left out)")
    print(f"word-code zeros: {zeros:.3f}")
    print(_completion_line(model, X))
    return EXIT_OK


def _completion_line(model, X):
    """The model's `score` on X (document completion), as one line of `evaluate`."""
    import numpy as np

    from stc.losses import get_loss

    try:
        score = model.score(X)
    except ValueError as exc:
        return f"document completion: not available ({exc})"
    if get_loss(model.loss).score_kind == "multinomial":
        return (f"document completion: {score:.6g} log-likelihood per held-out token "
                f"(perplexity {np.exp(-score):.6g}; every second word of each document held "
                "out, the rest coded)")
    return (f"document completion: {score:.6g} minus the mean loss per held-out entry (every "
            "second word of each document held out, the rest coded)")


def _run_report(args):
    from stc import report
    from stc.readers import labels_of

    _check_output(args.output, args, ("data", "model"))
    model = _load_model(args.model)
    if args.n_jobs is not None:
        model.set_params(n_jobs=args.n_jobs)
    corpus = _read_data(args, model=model)
    try:
        path = report(model, corpus.data, args.output, y=labels_of(corpus),
                      n_words=args.words, title=args.title)
    except ImportError as exc:
        raise CommandError(f"report needs matplotlib ({exc}); pip install 'sparse-topical-coding[plot]'") from None
    _say(args, f"stc report: wrote {path}")
    return EXIT_OK


def _describe_value(value):
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _run_info(args):
    from stc._estimators.persistence import read_model_file
    from stc.losses import registered_losses

    metadata, arrays = read_model_file(args.model)
    if args.json:
        print(json.dumps(metadata, indent=1))
        return EXIT_OK
    params = metadata["parameters"]
    beta = arrays["components_"]
    loss = params.get("loss")
    lines = [
        f"file: {args.model} ({os.path.getsize(args.model)} bytes), checksum ok",
        f"format: {metadata['format']} version {metadata['format_version']}, written by stc "
        f"{metadata['package_version']}",
        f"model: {metadata['estimator']}, {counted(beta.shape[0], 'topic')}, "
        f"{counted(beta.shape[1], 'term')}, loss "
        f"{loss} ({'registered' if loss in registered_losses() else 'NOT registered here'})",
    ]
    vocabulary = metadata.get("vocabulary")
    if vocabulary is None:
        lines.append("vocabulary: none (columns are numbered; text cannot be coded)")
    else:
        lines.append(f"vocabulary: {counted(len(vocabulary), 'term')} "
                     f"({', '.join(vocabulary[:8])}"
                     f"{', ...' if len(vocabulary) > 8 else ''})")
    options = metadata.get("text_options")
    if options is not None:
        stop = options.get("stop_words")
        lines.append(f"text: {counted(len(stop) if stop else 0, 'stop word')}, min_df "
                     f"{options.get('min_df')}, max_df {options.get('max_df')}, "
                     f"{'lower-cased' if options.get('lowercase') else 'case kept'}, encoding "
                     f"{options.get('encoding')}, token pattern {options.get('token_pattern')}")
    classes = metadata.get("classes")
    if classes is not None:
        lines.append(f"classes: {len(classes['values'])} "
                     f"({', '.join(str(c) for c in classes['values'])})")
    attributes = metadata.get("attributes", {})
    if "objective_" in arrays and arrays["objective_"].size:
        fit_line = (f"fit: {counted(attributes.get('n_iter_'), 'iteration')}, final objective "
                    f"{arrays['objective_'][-1]:.6g}")
        if "interrupted_" in attributes:
            fit_line += f", interrupted: {'yes' if attributes['interrupted_'] else 'no'}"
        lines.append(fit_line)
    lines.append("parameters: " + ", ".join(f"{k}={_describe_value(v)}"
                                            for k, v in sorted(params.items())))
    lines.append("fitted attributes: " + ", ".join(
        [f"{k} {a.dtype} {tuple(a.shape)}" for k, a in sorted(arrays.items())]
        + [f"{k}={_describe_value(v)}" for k, v in sorted(attributes.items())]))
    print("\n".join(lines))
    return EXIT_OK


# ---------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------

@contextlib.contextmanager
def _warnings_as_lines(command):
    """Show warnings as one 'stc CMD: warning: ...' line each on stderr."""
    def show(message, category, filename, lineno, file=None, line=None):
        print(f"stc {command}: warning: {' '.join(str(message).split())}", file=sys.stderr,
              flush=True)

    with warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings.showwarning = show
        yield


def main(argv=None):
    """Run the ``stc`` command with ``argv`` (default: sys.argv[1:]); return the exit status."""
    args = None
    try:  # everything, the commands' imports included: Ctrl-C at any moment is one line
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as exit:  # --help, --version, or a usage error (already printed)
            return exit.code if isinstance(exit.code, int) else EXIT_USAGE
        with _warnings_as_lines(args.command):
            _import_modules(args.imports)
            return args.handler(args)
    except KeyboardInterrupt:
        print(f"stc{'' if args is None else ' ' + args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # e.g. `stc topics MODEL | head`: the reader left
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_ERROR
    except Exception as exc:
        if args is None or args.debug:  # before the arguments are read, a bug: show it
            raise
        print(f"stc {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    raise SystemExit(main())
