"""Portable model files: `save_model` (behind ``STC.save``) and `load` (``stc.load``).

A model file is a zip archive (numpy can open it as an ``.npz``) holding

* ``metadata.json``: the file format and its version, the package version
  that wrote it, the estimator class, its parameters, the loss's registered
  name, the vocabulary and text tokenisation settings (when known), the
  fitted attributes that are not arrays, a description of every array
  member, and a SHA-256 checksum over all of it;
* one ``<attribute>.npy`` member per fitted array attribute (float64 topics,
  objective path, classifier weights, ...).

Loading runs no code from the file: arrays are read with
``allow_pickle=False`` and everything else is JSON. The estimator is rebuilt
from its class name, looked up in the table the estimator classes register
in (`register_estimator`), with the stored parameters;
arrays come back with their exact bytes, so a loaded model codes and
predicts bit-identically to the saved one.
"""
import hashlib
import io
import json
import math
import os
import pickle
import re
import struct
import warnings
import zipfile
import zlib

import numpy as np

from stc import __version__

FORMAT_NAME = "stc-model"
FORMAT_VERSION = 1
# Parameters added after format version 1: a file written before one existed (so without
# it) was fitted with the value given here, which is not always today's default.
# What a file from before a parameter existed was fitted with (the parameter's default
# has changed since); given to the estimators that have the parameter.
VALUES_BEFORE_THE_PARAMETER = {"rho_units": "absolute", "sweeps_per_iteration": None,
                               "init": "random"}
METADATA_MEMBER = "metadata.json"
ARRAY_SUFFIX = ".npy"

# Attributes the model file keeps apart from the generic fitted attributes.
VOCABULARY_ATTRIBUTE = "vocabulary_"
TEXT_OPTIONS_ATTRIBUTE = "text_options_"
CLASSES_ATTRIBUTE = "classes_"  # kept in the metadata, readable

# A fitted attribute's name: starting with a lower-case letter, ending in an underscore (no
# dunder, no method name); upper case after the first letter as in parameter names (refit_C_).
_ATTRIBUTE_NAME = re.compile(r"^[a-z][A-Za-z0-9_]*_$")

# What a damaged archive can raise while it is read.
_READ_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, KeyError,
                struct.error, NotImplementedError, UnicodeDecodeError, IndexError)


class ModelFileError(ValueError):
    """A model file that cannot be loaded: not a model, damaged, crafted, or incompatible.

    Raised by `stc.load` (public as ``stc.ModelFileError``); the message
    names the file and says what is wrong with it.
    """


# The estimator classes a model file can name, by class name. Each registers itself when its
# module is imported (`register_estimator`): this module is below the estimators and never
# imports them; `stc.load` imports them before it reads a file.
ESTIMATORS = {}


def register_estimator(cls):
    """Class decorator: model files may hold instances of ``cls``, under its name."""
    ESTIMATORS[cls.__name__] = cls
    return cls


def _package_version():
    return __version__


# ---------------------------------------------------------------------------
# Values <-> JSON and arrays
# ---------------------------------------------------------------------------

def _is_json_scalar(value):
    return value is None or isinstance(value, (bool, int, float, str))


def _json_value(value, what):
    """``value`` as JSON if it is made of None, bool, int, float, str, lists and dicts."""
    if _is_json_scalar(value):
        return value
    if isinstance(value, (list, tuple)):
        return [_json_value(v, what) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _json_value(v, what) for k, v in value.items()}
    raise TypeError(f"cannot save {what}: a {type(value).__name__} is not stored in a model "
                    "file (arrays, numbers, strings, None, lists and dicts are)")


def _array_for_file(array, name):
    """(array to write, note) for a fitted array; object arrays must hold only str."""
    if array.dtype == object:
        if not all(isinstance(v, str) for v in array.ravel()):
            raise TypeError(f"cannot save {name}: an object array is stored only when it "
                            "holds strings")
        return np.asarray(array, dtype=str), "object"
    if array.dtype.hasobject or array.dtype.fields is not None:
        raise TypeError(f"cannot save {name}: arrays of dtype {array.dtype} are not stored")
    return np.ascontiguousarray(array), None


def _split_attributes(model):
    """The fitted attributes of ``model``: (JSON-able values, arrays, array notes)."""
    params = model.get_params(deep=False)
    plain, arrays, notes = {}, {}, {}
    for name, value in sorted(vars(model).items()):
        if (not name.endswith("_") or name.startswith("_") or name in params
                or name in (VOCABULARY_ATTRIBUTE, TEXT_OPTIONS_ATTRIBUTE, CLASSES_ATTRIBUTE)):
            continue
        if isinstance(value, np.generic):  # a numpy scalar: a 0-d array, read back as scalar
            arrays[name], _ = _array_for_file(np.asarray(value), name)
            notes[name] = "scalar"
        elif isinstance(value, np.ndarray):
            arrays[name], notes[name] = _array_for_file(value, name)
        else:
            plain[name] = _json_value(value, name)
    return plain, arrays, {k: v for k, v in notes.items() if v is not None}


def _classes_for_file(model):
    """``classes_`` as JSON values and their dtype, or None."""
    classes = getattr(model, CLASSES_ATTRIBUTE, None)
    if classes is None:
        return None
    classes = np.asarray(classes)
    if classes.ndim != 1 or classes.dtype.kind not in "biufUO":
        raise TypeError(f"cannot save classes_ of dtype {classes.dtype} and shape {classes.shape}")
    if classes.dtype == object and not all(isinstance(c, str) for c in classes):
        raise TypeError("cannot save classes_: an object array is stored only when it holds "
                        "strings")
    return {"dtype": classes.dtype.str, "values": classes.tolist()}


def _checksum(metadata, arrays):
    """SHA-256 over the metadata (without the checksum) and every array's dtype, shape, bytes."""
    digest = hashlib.sha256()
    content = {k: v for k, v in metadata.items() if k != "checksum"}
    digest.update(json.dumps(content, sort_keys=True, separators=(",", ":")).encode("utf-8"))
    for name in sorted(arrays):
        array = arrays[name]
        header = json.dumps([name, array.dtype.str, list(array.shape)])
        digest.update(header.encode("utf-8"))
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


# ---------------------------------------------------------------------------
# Saving
# ---------------------------------------------------------------------------

def _loss_name(loss):
    """The registered name of ``loss`` (a name or an instance of a registered class)."""
    from stc.losses import _REGISTRY  # here: reading a file's metadata needs no kernels

    if isinstance(loss, str):
        if loss not in _REGISTRY:
            raise ValueError(f"cannot save: loss={loss!r} is not registered")
        return loss
    for name, cls in sorted(_REGISTRY.items()):
        if type(loss) is cls:
            if not _has_default_settings(loss, cls):
                raise ValueError(
                    f"cannot save: the loss instance {loss!r} has settings other than a new "
                    f"{cls.__name__}()'s, and a model file names its loss ({name!r}), not its "
                    f"settings, so a loaded model would code with the defaults; register a "
                    "subclass whose defaults are these settings and fit with loss=its name")
            return name
    raise ValueError(f"cannot save: the loss is an instance of {type(loss).__name__}, which is "
                     "not registered; register it with stc.losses.register(name, cls) and fit "
                     "with loss=name so the model file can name it")


def _has_default_settings(loss, cls):
    """Whether ``loss`` holds what ``cls()`` holds: the loss a file naming ``cls`` loads.

    Compared by the Python attributes and, for a compiled loss's C-level ones, by
    the pickled state (only to compare: model files hold no pickle).
    """
    default = cls()
    try:
        if vars(loss) != vars(default):
            return False
    except TypeError:  # a cdef class without a __dict__
        pass
    except ValueError:  # attributes that are arrays: compared by the pickled state below
        pass
    try:
        return pickle.dumps(loss) == pickle.dumps(default)
    except (TypeError, pickle.PicklingError, AttributeError):
        return hasattr(loss, "__dict__")  # unpicklable: its Python attributes matched


def _parameters(model):
    params = {name: value.item() if isinstance(value, np.generic) else value
              for name, value in model.get_params(deep=False).items()}
    params["loss"] = _loss_name(params["loss"])
    if params.get("random_state") is not None and not isinstance(params["random_state"], int):
        warnings.warn("random_state is not an int or None and cannot be stored: the model file "
                      "records random_state=None (the fitted topics are stored, so coding and "
                      "prediction are unaffected)", UserWarning, stacklevel=4)
        params["random_state"] = None
    return {name: _json_value(value, f"parameter {name}") for name, value in params.items()}


def _as_path(path):
    """``path`` (str, bytes or os.PathLike) as a str; a TypeError naming it otherwise."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"path must be a file path (str or os.PathLike), got "
                        f"{type(path).__name__}")
    return os.fsdecode(os.fspath(path))


def _checked_output_path(path):
    """``path`` as a str, refused unless a file can be written there (errors name ``path``).

    Without this the errors would name the temporary file written first.
    """
    path = _as_path(path)
    if os.path.isdir(path):
        raise IsADirectoryError(f"cannot save the model to {path}: it is a folder")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"cannot save the model to {path}: folder {folder} does not "
                                "exist")
    return path


def save_model(model, path, *, vocabulary=None, text_options=None):
    """Write the fitted ``model`` to ``path`` as one portable file (see `load`).

    Parameters
    ----------
    model : fitted STC or MedSTC
    path : str or os.PathLike
        Written whole or not at all: the file appears only once complete.
    vocabulary : sequence of str, optional
        Term of each column of the data the model was fitted on; defaults to
        the model's ``vocabulary_`` (set by `stc.load` or the command line).
    text_options : dict, optional
        How text was tokenised into those terms (``stc.readers`` corpora carry it
        as ``text_options``), so that new text can be read the same way;
        defaults to the model's ``text_options_``.
    """
    estimator = type(model).__name__
    if ESTIMATORS.get(estimator) is not type(model):
        raise TypeError(f"save supports {' and '.join(ESTIMATORS)}, not {estimator}")
    if not hasattr(model, "components_"):
        from sklearn.exceptions import NotFittedError  # here: reading a file needs no sklearn

        raise NotFittedError(f"this {estimator} is not fitted yet: call fit before save")
    if vocabulary is None:
        vocabulary = getattr(model, VOCABULARY_ATTRIBUTE, None)
    if text_options is None:
        text_options = getattr(model, TEXT_OPTIONS_ATTRIBUTE, None)
    if vocabulary is not None:
        vocabulary = list(vocabulary)
        if not all(isinstance(term, str) for term in vocabulary):
            raise TypeError("vocabulary must be a sequence of str")
        vocabulary = [str(term) for term in vocabulary]  # numpy str_ -> str, for JSON
        if len(vocabulary) != model.n_features_in_:
            raise ValueError(f"vocabulary has {len(vocabulary)} terms but the model was fitted "
                             f"on {model.n_features_in_} columns")
    plain, arrays, notes = _split_attributes(model)
    metadata = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "package_version": _package_version(),
        "estimator": estimator,
        "parameters": _parameters(model),
        "vocabulary": vocabulary,
        "classes": _classes_for_file(model),
        "text_options": _json_value(text_options, "text_options"),
        "attributes": plain,
        "arrays": {name: {"dtype": a.dtype.str, "shape": list(a.shape)}
                   for name, a in sorted(arrays.items())},
        "array_notes": notes,
    }
    metadata["checksum"] = {"algorithm": "sha256", "value": _checksum(metadata, arrays)}
    path = _checked_output_path(path)
    partial = f"{path}.partial-{os.getpid()}"
    try:
        with zipfile.ZipFile(partial, "w") as archive:
            archive.writestr(METADATA_MEMBER, json.dumps(metadata, indent=1),
                             compress_type=zipfile.ZIP_DEFLATED)
            for name, array in sorted(arrays.items()):
                buffer = io.BytesIO()
                np.lib.format.write_array(buffer, array, allow_pickle=False)
                archive.writestr(name + ARRAY_SUFFIX, buffer.getvalue(),
                                 compress_type=zipfile.ZIP_STORED)
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.remove(partial)


# ---------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------

# The first bytes of a zip archive (a local file header), which every model file starts with.
ZIP_MAGIC = b"PK\x03\x04"


def _damaged(path, detail):
    return ModelFileError(f"{path} is truncated or corrupted ({detail}); it cannot be loaded")


def _check_format(path, metadata):
    if not isinstance(metadata, dict) or metadata.get("format") != FORMAT_NAME:
        raise ModelFileError(f"{path} is not an stc model file (its {METADATA_MEMBER} does "
                             f"not say format {FORMAT_NAME!r})")
    version = metadata.get("format_version")
    writer = metadata.get("package_version", "an unknown version")
    if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION:
        raise ModelFileError(
            f"{path} has model format version {version}, written by stc {writer}; this stc "
            f"({_package_version()}) reads format version {FORMAT_VERSION}: upgrade stc")
    if version != FORMAT_VERSION:
        raise ModelFileError(f"{path} has model format version {version!r}, which this stc "
                             f"({_package_version()}) cannot read (it reads format version "
                             f"{FORMAT_VERSION})")


def read_model_file(path):
    """Checked contents of a model file: (metadata dict, {name: array}).

    Raises `ModelFileError` (a ValueError) when ``path`` is not a model
    file, is truncated or corrupted, has another format version, or fails
    its checksum; FileNotFoundError when it does not exist.
    """
    path = _as_path(path)
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path} is a folder, not a model file")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"model file {path} not found")
    with open(path, "rb") as handle:
        start = handle.read(len(ZIP_MAGIC))
    if not ZIP_MAGIC.startswith(start):  # a cut or damaged model file still starts as one
        raise ModelFileError(f"{path} is not an stc model file (those are zip archives written "
                             f"by STC.save, MedSTC.save or `stc fit`)")
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            if METADATA_MEMBER not in names:
                raise ModelFileError(f"{path} is not an stc model file (no {METADATA_MEMBER})")
            _check_unpacked_size(path, archive.getinfo(METADATA_MEMBER))
            try:
                metadata = json.loads(archive.read(METADATA_MEMBER).decode("utf-8"))
            except json.JSONDecodeError as exc:
                raise _damaged(path, f"{METADATA_MEMBER} is not valid JSON: {exc}") from None
            _check_format(path, metadata)
            described = metadata.get("arrays")
            if not isinstance(described, dict) or not all(
                    isinstance(spec, dict) for spec in described.values()):
                raise _damaged(path, "no description of its arrays")
            _check_declared_arrays(path, metadata)
            arrays = {}
            for name, spec in described.items():
                member = name + ARRAY_SUFFIX
                if member not in names:
                    raise _damaged(path, f"member {member} is missing")
                arrays[name] = _read_array_member(path, archive, member, spec)
    except ModelFileError:
        raise
    except zipfile.BadZipFile as exc:
        raise _damaged(path, f"not a complete zip archive: {exc}") from None
    except zlib.error as exc:
        raise _damaged(path, f"compressed data damaged: {exc}") from None
    except _READ_ERRORS as exc:
        raise _damaged(path, f"{type(exc).__name__}: {exc}") from None
    expected = metadata.get("checksum", {})
    if not isinstance(expected, dict) or expected.get("algorithm") != "sha256":
        raise _damaged(path, "no sha256 checksum")
    if _checksum(metadata, arrays) != expected.get("value"):
        raise ModelFileError(f"{path} fails its checksum: its content was changed or damaged "
                             "after it was written; it cannot be loaded")
    _check_topic_weights(path, arrays)
    return metadata, arrays


# The types of the metadata's fields; None allowed where a model may have nothing to say.
METADATA_FIELDS = {"estimator": (str,), "parameters": (dict,), "attributes": (dict,),
                   "array_notes": (dict,), "vocabulary": (list, type(None)),
                   "classes": (dict, type(None)), "text_options": (dict, type(None))}

# metadata.json is JSON text, which deflate packs a few times smaller; a member that
# unpacks to more than this many times its packed size is a zip bomb, not a model's.
METADATA_MAX_PACKING = 100


def _invalid(path, detail):
    return ModelFileError(f"{path} is not a valid stc model file ({detail}); it cannot be "
                          "loaded")


def _check_unpacked_size(path, info):
    """Refuse a member that would unpack to more than the file could hold (a zip bomb).

    Arrays are stored uncompressed (`save_model`), so an array member is never
    larger than the whole file; metadata.json is deflated JSON.
    """
    if info.filename == METADATA_MEMBER:
        limit = METADATA_MAX_PACKING * info.compress_size
        what = f"{METADATA_MAX_PACKING} times its packed size ({info.compress_size} bytes)"
    else:
        limit = os.path.getsize(path)
        what = f"the whole file ({limit} bytes)"
    if info.file_size > limit:
        raise _invalid(path, f"member {info.filename} unpacks to {info.file_size} bytes, more "
                             f"than {what}")


def _declared(path, name, spec):
    """(dtype string, shape tuple) the metadata gives array ``name``; refused if malformed."""
    dtype, shape = spec.get("dtype"), spec.get("shape")
    if not (isinstance(dtype, str) and isinstance(shape, list)
            and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)):
        raise _invalid(path, f"its metadata describes {name} as dtype {dtype!r}, shape {shape!r}")
    return dtype, tuple(shape)


def _check_declared_arrays(path, metadata):
    """Refuse metadata whose arrays do not fit together, before any array is read.

    The metadata's fields must have their types; the topics must be a 2-D
    float array with a column per term (``n_features_in_``, the vocabulary if
    any); a classifier must have a row per class and a column per topic.
    """
    for field, types in METADATA_FIELDS.items():
        if not isinstance(metadata.get(field), types):
            raise _invalid(path, f"its metadata field {field!r} is a "
                                 f"{type(metadata.get(field)).__name__}")
    shapes = {name: _declared(path, name, spec) for name, spec in metadata["arrays"].items()}
    dtype, shape = shapes.get("components_", (None, None))
    if shape is None or len(shape) != 2 or dtype[1:2] != "f":  # "<f8": order, kind, size
        raise _invalid(path, "components_ must be a 2-D float array, got "
                             f"{None if shape is None else (shape, dtype)}")
    n_topics, n_terms = shape
    vocabulary = metadata["vocabulary"]
    for what, count in (("its vocabulary", n_terms if vocabulary is None else len(vocabulary)),
                        ("n_features_in_", metadata["attributes"].get("n_features_in_", n_terms))):
        if count != n_terms:
            raise _invalid(path, f"{what} gives {count!r} terms for {n_terms} topic columns")
    classes = (metadata["classes"] or {}).get("values")
    for name in ("coef_", "joint_coef_"):
        if name in shapes and (not isinstance(classes, list)
                               or shapes[name][1] != (len(classes), n_topics)):
            raise _invalid(path, f"{name} has shape {shapes[name][1]} for "
                                 f"{len(classes) if isinstance(classes, list) else 'no'} classes "
                                 f"and {n_topics} topics")


def _read_array_member(path, archive, member, spec):
    """The array in ``member``, read only once its header agrees with ``spec`` and its size.

    A crafted header could declare more values than memory holds; numpy
    would allocate them all before finding the data missing.
    """
    info = archive.getinfo(member)
    _check_unpacked_size(path, info)
    with archive.open(member) as handle:
        dtype, shape = _npy_header(handle)
        data_size = info.file_size - handle.tell()
    if dtype.hasobject:
        raise ModelFileError(f"{path}: member {member} holds Python objects (a pickle), which a "
                             "model file never does; it is not loaded")
    if (dtype.str, shape) != _declared(path, member[:-len(ARRAY_SUFFIX)], spec):
        raise _invalid(path, f"member {member} holds a {dtype.str} array of shape {shape}, but "
                             f"its metadata describes {spec.get('dtype')} of shape "
                             f"{tuple(spec.get('shape'))}")
    if math.prod(shape) * dtype.itemsize != data_size:
        raise _damaged(path, f"member {member} declares {math.prod(shape)} values of "
                             f"{dtype.itemsize} bytes, but holds {data_size} bytes")
    with archive.open(member) as handle:
        return np.lib.format.read_array(handle, allow_pickle=False)


def _check_topic_weights(path, arrays):
    """Refuse topics holding weights no fit gives (a file edited by hand, checksum and all)."""
    topics = arrays["components_"]
    if not (np.all(np.isfinite(topics)) and np.all(topics >= 0)):
        raise _invalid(path, "components_ holds negative, NaN or infinite weights")


def _npy_header(handle):
    """(dtype, shape) in a .npy header (parsed as a literal, nothing run)."""
    version = np.lib.format.read_magic(handle)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(handle)
    elif version == (2, 0):
        shape, _, dtype = np.lib.format.read_array_header_2_0(handle)
    else:
        raise ValueError(f".npy format version {version} is not used by model files")
    return dtype, shape


def _restore(array, note):
    if note == "scalar":
        return array[()]
    if note == "object":
        return array.astype(object)
    return array


def load(path):
    """Load a model written by ``STC.save`` or ``MedSTC.save``.

    The file's format version, integrity (zip CRCs and a SHA-256 checksum
    over its metadata and arrays) and loss are checked first; a file that is
    not a model, is truncated or corrupted, has another format version or
    fails its checksum raises `ModelFileError` (a ValueError) saying which;
    so does one whose arrays' declared types and shapes disagree with its
    metadata or its size, checked before they are read. No code from the
    file is run (no pickle). A model fitted with a custom loss needs that
    loss registered (`stc.losses.register`) under the same name before
    loading.

    The returned estimator has the saved parameters and fitted attributes,
    and, when they were saved, ``vocabulary_`` (the term of each column)
    and ``text_options_`` (how text was tokenised, for `stc.readers`).
    """
    from stc.losses import registered_losses  # here: reading a file needs no kernels

    metadata, arrays = read_model_file(path)
    estimator = metadata.get("estimator")
    estimator_classes = ESTIMATORS
    if estimator not in estimator_classes:
        raise ModelFileError(f"{path} holds a {estimator!r} model; this stc loads "
                             f"{sorted(estimator_classes)}")
    params = dict(metadata.get("parameters") or {})
    loss = params.get("loss")
    if loss not in registered_losses():
        raise ModelFileError(
            f"{path} was fitted with the loss {loss!r}, which is not registered in this process: "
            f"import the module that registers it (stc.losses.register({loss!r}, ...)) before "
            f"loading; registered losses: {registered_losses()}")
    cls = estimator_classes[estimator]
    accepted = cls().get_params(deep=False)
    for name, value in VALUES_BEFORE_THE_PARAMETER.items():
        if name in accepted:
            params.setdefault(name, value)
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise ModelFileError(f"{path} sets parameters {unknown} that this stc's {estimator} does "
                             f"not have (written by stc {metadata.get('package_version')})")
    model = cls(**params)
    attributes = dict(metadata.get("attributes") or {})
    notes = metadata.get("array_notes") or {}
    attributes.update((name, _restore(array, notes.get(name))) for name, array in arrays.items())
    classes = metadata.get("classes")
    if classes is not None:
        try:
            attributes[CLASSES_ATTRIBUTE] = np.asarray(classes["values"],
                                                       dtype=np.dtype(classes["dtype"]))
        except (TypeError, ValueError, KeyError) as exc:
            raise ModelFileError(f"{path}: cannot read its classes ({exc})") from None
        if attributes[CLASSES_ATTRIBUTE].dtype.hasobject and not all(
                isinstance(c, str) for c in attributes[CLASSES_ATTRIBUTE]):
            raise ModelFileError(f"{path}: its classes are not numbers or strings")
    for name, value in attributes.items():
        if not _ATTRIBUTE_NAME.match(name) or name in params or hasattr(cls, name):
            raise ModelFileError(f"{path} sets {name!r}, which is not a fitted attribute")
        setattr(model, name, value)
    if not hasattr(model, "components_") or not hasattr(model, "n_features_in_"):
        raise ModelFileError(f"{path} holds no fitted topics (components_, n_features_in_)")
    vocabulary = metadata.get("vocabulary")
    if vocabulary is not None:
        if not (isinstance(vocabulary, list) and len(vocabulary) == model.n_features_in_
                and all(isinstance(term, str) for term in vocabulary)):
            raise ModelFileError(f"{path}: its vocabulary is not one term per column")
        setattr(model, VOCABULARY_ATTRIBUTE, np.asarray(vocabulary, dtype=object))
    if metadata.get("text_options") is not None:
        setattr(model, TEXT_OPTIONS_ATTRIBUTE, metadata["text_options"])
    return model
