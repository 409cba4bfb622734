"""Model files: bit-identical round trips, refusal of damaged or foreign files,
no code run on load."""
import io
import json
import pickle
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning, NotFittedError

import stc
import stc.losses
from stc import STC, MedSTC
from stc._estimators.persistence import FORMAT_VERSION, METADATA_MEMBER, ModelFileError

from conftest import brief_fit


# The fits here are kept small and stop at max_iter on purpose.
pytestmark = brief_fit

@pytest.fixture(scope="module")
def fitted_stc(newsgroups):
    train, _ = newsgroups
    return STC(n_topics=4, max_iter=4, random_state=0).fit(train.data)


@pytest.fixture(scope="module")
def fitted_medstc(newsgroups):
    train, _ = newsgroups
    labels = np.asarray(train.target_names)[train.target]  # string classes
    return MedSTC(n_topics=4, max_iter=3, random_state=0).fit(train.data, labels)


@pytest.fixture
def stc_file(tmp_path, fitted_stc, newsgroups):
    path = tmp_path / "model.stc"
    fitted_stc.save(path, vocabulary=newsgroups[0].vocabulary)
    return path


def fitted_attributes(model):
    """Fitted attributes, leaving out the vocabulary a model file adds."""
    return {k: v for k, v in vars(model).items()
            if k.endswith("_") and not k.startswith("_") and k not in model.get_params()
            and k not in ("vocabulary_", "text_options_")}


def assert_same_attributes(a, b):
    ours, theirs = fitted_attributes(a), fitted_attributes(b)
    assert set(ours) == set(theirs)
    for name, value in ours.items():
        if isinstance(value, np.ndarray):
            assert value.dtype == theirs[name].dtype, name
            assert value.shape == theirs[name].shape, name
            assert value.tobytes() == theirs[name].tobytes(), name
        else:
            assert type(value) is type(theirs[name]) and value == theirs[name], name


# ---- round trips

def test_stc_round_trip_is_bit_identical(stc_file, fitted_stc, newsgroups):
    _, test = newsgroups
    loaded = stc.load(stc_file)
    assert type(loaded) is STC and loaded.get_params() == fitted_stc.get_params()
    assert_same_attributes(fitted_stc, loaded)
    assert loaded.transform(test.data).tobytes() == fitted_stc.transform(test.data).tobytes()
    ours, theirs = loaded.word_codes(test.data), fitted_stc.word_codes(test.data)
    assert ours.data.tobytes() == theirs.data.tobytes()
    assert np.array_equal(ours.indices, theirs.indices)
    assert loaded.score(test.data) == fitted_stc.score(test.data)
    assert list(loaded.vocabulary_) == list(newsgroups[0].vocabulary)


def test_medstc_round_trip_is_bit_identical(tmp_path, fitted_medstc, newsgroups):
    _, test = newsgroups
    fitted_medstc.save(tmp_path / "clf.stc")
    loaded = stc.load(tmp_path / "clf.stc")
    assert type(loaded) is MedSTC and loaded.get_params() == fitted_medstc.get_params()
    assert_same_attributes(fitted_medstc, loaded)
    assert np.array_equal(loaded.predict(test.data), fitted_medstc.predict(test.data))
    assert (loaded.decision_function(test.data).tobytes()
            == fitted_medstc.decision_function(test.data).tobytes())
    assert not hasattr(loaded, "vocabulary_")


def test_integer_classes_and_no_refit_round_trip(tmp_path, newsgroups):
    train, test = newsgroups
    model = MedSTC(n_topics=3, max_iter=2, refit_C=None, random_state=1).fit(
        train.data, train.target)
    model.save(tmp_path / "m.stc")
    loaded = stc.load(tmp_path / "m.stc")
    assert loaded.classes_.dtype == model.classes_.dtype == np.int64
    assert loaded.refit_train_accuracy_ is None and loaded.refit_C is None
    assert np.array_equal(loaded.predict(test.data), model.predict(test.data))


def test_saving_a_loaded_model_gives_the_same_content(tmp_path, stc_file):
    stc.load(stc_file).save(tmp_path / "again.stc")
    first = json.loads(zipfile.ZipFile(stc_file).read(METADATA_MEMBER))
    second = json.loads(zipfile.ZipFile(tmp_path / "again.stc").read(METADATA_MEMBER))
    assert first == second


def test_the_file_is_an_npz_with_json_metadata(stc_file, fitted_stc):
    with np.load(stc_file, allow_pickle=False) as archive:
        assert np.array_equal(archive["components_"], fitted_stc.components_)
    metadata = json.loads(zipfile.ZipFile(stc_file).read(METADATA_MEMBER))
    assert metadata["format_version"] == FORMAT_VERSION
    assert metadata["package_version"] == stc.__version__
    assert metadata["estimator"] == "STC"
    assert metadata["parameters"]["n_topics"] == 4 and metadata["parameters"]["loss"] == "poisson"
    assert metadata["attributes"]["n_iter_"] == fitted_stc.n_iter_
    assert len(metadata["vocabulary"]) == fitted_stc.n_features_in_
    assert metadata["checksum"]["algorithm"] == "sha256"


def test_pickle_still_works(stc_file, newsgroups):
    loaded = stc.load(stc_file)
    again = pickle.loads(pickle.dumps(loaded))
    _, test = newsgroups
    assert again.transform(test.data).tobytes() == loaded.transform(test.data).tobytes()
    assert list(again.vocabulary_) == list(loaded.vocabulary_)


def test_what_cannot_be_saved_is_refused(tmp_path, fitted_stc):
    with pytest.raises(NotFittedError, match="not fitted"):
        STC().save(tmp_path / "x.stc")
    with pytest.raises(ValueError, match="vocabulary has 3 terms but the model was fitted on"):
        fitted_stc.save(tmp_path / "x.stc", vocabulary=["a", "b", "c"])
    assert not (tmp_path / "x.stc").exists()


def test_paths_that_cannot_hold_a_model_are_named(tmp_path, fitted_stc):
    # the errors named the temporary file written first, or said "not found" of a folder
    missing = tmp_path / "no" / "x.stc"
    with pytest.raises(FileNotFoundError, match=f"cannot save the model to {missing}: folder "
                                                f"{missing.parent} does not exist"):
        fitted_stc.save(missing)
    with pytest.raises(IsADirectoryError, match=f"cannot save the model to {tmp_path}: it is "
                                                "a folder"):
        fitted_stc.save(tmp_path)
    with pytest.raises(IsADirectoryError, match=f"{tmp_path} is a folder, not a model file"):
        stc.load(tmp_path)
    for call in (fitted_stc.save, stc.load):
        with pytest.raises(TypeError, match="path must be a file path .* got NoneType"):
            call(None)
    assert list(tmp_path.iterdir()) == []


# ---- damaged and foreign files

def test_truncated_files_are_refused(tmp_path, stc_file):
    content = stc_file.read_bytes()
    for size in (0, 10, len(content) // 2, len(content) - 1):
        damaged = tmp_path / f"cut{size}.stc"
        damaged.write_bytes(content[:size])
        with pytest.raises(ModelFileError, match=f"cut{size}.stc is truncated or corrupted"):
            stc.load(damaged)


def _member_offset(path, member):
    """Offset in the file of the first data byte of an uncompressed zip member."""
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(member)
    raw = Path(path).read_bytes()
    name_length = int.from_bytes(raw[info.header_offset + 26:info.header_offset + 28], "little")
    extra_length = int.from_bytes(raw[info.header_offset + 28:info.header_offset + 30], "little")
    return info.header_offset + 30 + name_length + extra_length, info.file_size


@pytest.mark.parametrize("where", ["array data", "metadata", "zip directory"])
def test_flipped_bytes_are_refused(tmp_path, stc_file, where):
    content = bytearray(stc_file.read_bytes())
    if where == "array data":
        start, size = _member_offset(stc_file, "components_.npy")
        position = start + size // 2
    elif where == "metadata":
        start, size = _member_offset(stc_file, METADATA_MEMBER)
        position = start + 5  # inside the deflated JSON
    else:
        position = len(content) - 30
    content[position] ^= 0xFF
    damaged = tmp_path / "flipped.stc"
    damaged.write_bytes(bytes(content))
    with pytest.raises(ValueError, match="flipped.stc (is truncated or corrupted|fails its "
                                         "checksum)"):
        stc.load(damaged)


def _rewrite(source, target, change_metadata=None, change_member=None):
    """Copy a model file, editing its metadata or a member, with valid zip CRCs."""
    with zipfile.ZipFile(source) as archive, zipfile.ZipFile(target, "w") as out:
        for info in archive.infolist():
            data = archive.read(info.filename)
            if info.filename == METADATA_MEMBER and change_metadata is not None:
                metadata = json.loads(data)
                change_metadata(metadata)
                data = json.dumps(metadata).encode()
            elif change_member is not None:
                data = change_member(info.filename, data)
            out.writestr(info.filename, data)
    return target


def test_a_changed_array_fails_the_checksum(tmp_path, stc_file):
    def nudge(name, data):
        if name != "components_.npy":
            return data
        array = np.lib.format.read_array(io.BytesIO(data))
        array[0, 0] = np.nextafter(array[0, 0], 1.0)  # one ulp: still a valid model
        buffer = io.BytesIO()
        np.lib.format.write_array(buffer, array)
        return buffer.getvalue()

    damaged = _rewrite(stc_file, tmp_path / "nudged.stc", change_member=nudge)
    with pytest.raises(ValueError, match="nudged.stc fails its checksum"):
        stc.load(damaged)
    edited = _rewrite(stc_file, tmp_path / "edited.stc",
                      change_metadata=lambda m: m["parameters"].update(rho=0.5))
    with pytest.raises(ValueError, match="edited.stc fails its checksum"):
        stc.load(edited)


def _edited_with_its_checksum(source, target, edit_metadata=None, edit_array=None):
    """``source`` with its metadata or arrays edited and the checksum made anew (by hand)."""
    from stc._estimators.persistence import _checksum, read_model_file

    metadata, arrays = read_model_file(source)
    if edit_array is not None:
        edit_array(arrays)
        for name, array in arrays.items():
            metadata["arrays"][name] = {"dtype": array.dtype.str, "shape": list(array.shape)}
    if edit_metadata is not None:
        edit_metadata(metadata)
    metadata["checksum"]["value"] = _checksum(metadata, arrays)

    def member(name, data):
        buffer = io.BytesIO()
        np.lib.format.write_array(buffer, arrays[name[:-len(".npy")]])
        return buffer.getvalue()

    return _rewrite(source, target, change_metadata=lambda m: (m.clear(), m.update(metadata)),
                    change_member=member)


@pytest.mark.parametrize("edit_metadata, edit_array, message", [
    (lambda m: m.update(parameters=[]), None, "its metadata field 'parameters' is a list"),
    (None, lambda a: a.update(components_=a["components_"][0]),
     r"components_ must be a 2-D float array, got \(\(\d+,\), '<f8'\)"),
    (None, lambda a: a.update(components_=-a["components_"]),
     "components_ holds negative, NaN or infinite weights"),
    (lambda m: m["attributes"].update(n_features_in_=10), None,
     r"n_features_in_ gives 10 terms for \d+ topic columns")])
def test_a_file_edited_by_hand_with_its_checksum_is_refused(tmp_path, stc_file, edit_metadata,
                                                            edit_array, message):
    # such files failed later: "'list' object has no attribute 'get'", "tuple index out of
    # range" in stc info and stc topics, NaN or negative topic weights printed
    edited = _edited_with_its_checksum(stc_file, tmp_path / "edited.stc", edit_metadata,
                                       edit_array)
    with pytest.raises(ModelFileError, match=f"edited.stc is not a valid stc model file "
                                             f"\\({message}\\); it cannot be loaded"):
        stc.load(edited)


def test_a_classifier_of_the_wrong_shape_is_refused(tmp_path, fitted_medstc):
    fitted_medstc.save(tmp_path / "medstc.stc")
    edited = _edited_with_its_checksum(tmp_path / "medstc.stc", tmp_path / "edited.stc",
                                       edit_array=lambda a: a.update(coef_=a["coef_"][:, :2]))
    with pytest.raises(ModelFileError, match=r"coef_ has shape \(\d+, 2\) for \d+ classes "
                                             r"and \d+ topics"):
        stc.load(edited)


# ---- crafted files: refused from their headers and sizes, before anything is read

def _crafted(source, target, name, dtype, shape, data=b"", described=True, deflated=False):
    """``source`` with member ``name``.npy replaced by a .npy header declaring ``dtype`` and
    ``shape``, followed by ``data``; ``described``: the metadata describes the same array
    (so that only its size can give it away); ``deflated``: the member compressed."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": dtype, "fortran_order": False,
                                                  "shape": shape})
    with zipfile.ZipFile(source) as archive, zipfile.ZipFile(target, "w") as out:
        for info in archive.infolist():
            content, compression = archive.read(info.filename), zipfile.ZIP_STORED
            if info.filename == f"{name}.npy":
                content = header.getvalue() + data
                compression = zipfile.ZIP_DEFLATED if deflated else compression
            elif info.filename == METADATA_MEMBER and described:
                metadata = json.loads(content)
                metadata["arrays"][name] = {"dtype": dtype, "shape": list(shape)}
                content = json.dumps(metadata).encode()
            out.writestr(info.filename, content, compress_type=compression)
    return target


def _topics_shape(stc_file):
    from stc._estimators.persistence import read_model_file

    return read_model_file(stc_file)[1]["components_"].shape


# (what the crafted member declares, what the file says); K, V: the model's topics and terms.
# Each was refused with numpy's words or read whole: "Unable to allocate 745. GiB", "EOF:
# reading array data", "negative dimensions are not allowed", "fails its checksum".
CRAFTED = {
    "1e11 doubles": (dict(name="objective_", dtype="<f8", shape=(10**11,), data=bytes(16)),
                     "is truncated or corrupted (member objective_.npy declares 100000000000 "
                     "values of 8 bytes, but holds 16 bytes)"),
    "2e9 doubles": (dict(name="objective_", dtype="<f8", shape=(2 * 10**9,), data=bytes(16)),
                    "is truncated or corrupted (member objective_.npy declares 2000000000 "
                    "values of 8 bytes, but holds 16 bytes)"),
    "overflowing shape": (dict(name="objective_", dtype="<f8", shape=(2**62, 2**62)),
                          "is truncated or corrupted (member objective_.npy declares "
                          f"{2**124} values of 8 bytes, but holds 0 bytes)"),
    "negative shape": (dict(name="components_", dtype="<f8", shape=(-1, 8), described=False),
                       "is not a valid stc model file (member components_.npy holds a <f8 "
                       "array of shape (-1, 8), but its metadata describes <f8 of shape "
                       "({K}, {V}))"),
    "negative shape described": (dict(name="objective_", dtype="<f8", shape=(-4,)),
                                 "is not a valid stc model file (its metadata describes "
                                 "objective_ as dtype '<f8', shape [-4])"),
    "wrong dtype": (dict(name="components_", dtype="<i8", shape="KV", described=False),
                    "is not a valid stc model file (member components_.npy holds a <i8 array "
                    "of shape ({K}, {V}), but its metadata describes <f8 of shape ({K}, {V}))"),
    "shape unlike the metadata": (dict(name="components_", dtype="<f8", shape=(10**6, 10**6),
                                       described=False),
                                  "is not a valid stc model file (member components_.npy holds "
                                  "a <f8 array of shape (1000000, 1000000), but its metadata "
                                  "describes <f8 of shape ({K}, {V}))"),
    "shape unlike the vocabulary": (dict(name="components_", dtype="<f8", shape=(4, 10**6)),
                                    "is not a valid stc model file (its vocabulary gives {V} "
                                    "terms for 1000000 topic columns)"),
    "zip bomb": (dict(name="objective_", dtype="<f8", shape=(10**6,), data=bytes(8 * 10**6),
                      deflated=True),
                 r"is not a valid stc model file (member objective_.npy unpacks to 8000128 "
                 "bytes, more than the whole file ({size} bytes))"),
}


def _load_costs(path):
    """(seconds, peak bytes allocated, the error) of ``stc.load(path)``."""
    import time
    import tracemalloc

    tracemalloc.start()
    start = time.perf_counter()
    error = None
    try:
        stc.load(path)
    except stc.ModelFileError as exc:
        error = exc
    finally:
        took, peak = time.perf_counter() - start, tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return took, peak, error


@pytest.mark.parametrize("case", CRAFTED)
def test_a_crafted_member_is_refused_before_it_is_read(tmp_path, stc_file, case):
    how, message = CRAFTED[case]
    n_topics, n_terms = _topics_shape(stc_file)
    if how["shape"] == "KV":
        how = dict(how, shape=(n_topics, n_terms), data=bytes(8 * n_topics * n_terms))
    crafted = _crafted(stc_file, tmp_path / "crafted.stc", **how)
    took, peak, error = _load_costs(crafted)
    expected = message.format(K=n_topics, V=n_terms, size=crafted.stat().st_size)
    assert str(error) == f"{crafted} {expected}; it cannot be loaded"
    # no more memory than loading the valid file takes, nothing of what the header declares
    assert took < 1.0 and peak <= _load_costs(stc_file)[1]


def test_a_metadata_zip_bomb_is_refused(tmp_path, stc_file):
    with zipfile.ZipFile(stc_file) as archive, \
            zipfile.ZipFile(tmp_path / "bomb.stc", "w") as out:
        for info in archive.infolist():
            content = archive.read(info.filename)
            compression = zipfile.ZIP_STORED
            if info.filename == METADATA_MEMBER:  # valid JSON: blanks after the object
                content, compression = content + b" " * 10**7, zipfile.ZIP_DEFLATED
            out.writestr(info.filename, content, compress_type=compression)
        packed = out.getinfo(METADATA_MEMBER).compress_size
        unpacked = out.getinfo(METADATA_MEMBER).file_size
    with pytest.raises(stc.ModelFileError) as refused:
        stc.load(tmp_path / "bomb.stc")
    assert str(refused.value) == (
        f"{tmp_path / 'bomb.stc'} is not a valid stc model file (member metadata.json unpacks "
        f"to {unpacked} bytes, more than 100 times its packed size ({packed} bytes)); it "
        "cannot be loaded")


def test_model_file_error_is_public():
    assert stc.ModelFileError is ModelFileError and issubclass(stc.ModelFileError, ValueError)
    assert "ModelFileError" in stc.__all__


def _file_from_before(model, tmp_path, parameter):
    """``model`` saved, then rewritten as a file from before ``parameter`` existed: the
    parameter dropped from the metadata, the checksum made anew. Returns its path."""
    from stc._estimators.persistence import _checksum, read_model_file

    model.save(tmp_path / "model.stc")
    _, arrays = read_model_file(tmp_path / "model.stc")

    def drop(metadata):
        del metadata["parameters"][parameter]
        metadata["checksum"]["value"] = _checksum(metadata, arrays)

    old = _rewrite(tmp_path / "model.stc", tmp_path / "old.stc", change_metadata=drop)
    assert parameter not in read_model_file(old)[0]["parameters"]
    return old


def test_a_file_from_before_rho_units_is_read_in_absolute_units(tmp_path, newsgroups):
    """rho_units came after format version 1 and its default is now "relative": a file
    without it was fitted with rho in absolute units and must keep them."""
    train, test = newsgroups
    model = STC(n_topics=3, max_iter=3, random_state=0, rho=0.01, rho_units="absolute",
                theta_penalty="l2").fit(train.data)
    loaded = stc.load(_file_from_before(model, tmp_path, "rho_units"))
    assert loaded.rho_units == "absolute" and loaded.rho == 0.01
    assert np.array_equal(loaded.transform(test.data), model.transform(test.data))


def test_a_file_from_before_sweeps_per_iteration_refits_with_the_exact_coding_step(
        tmp_path, newsgroups):
    """sweeps_per_iteration came later, with default 1: a file without it was fitted with
    the exact coding step (None), which a refit of the loaded model must use again."""
    train, _ = newsgroups
    model = STC(n_topics=3, max_iter=3, random_state=0, sweeps_per_iteration=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(train.data[:300])
    loaded = stc.load(_file_from_before(model, tmp_path, "sweeps_per_iteration"))
    assert loaded.sweeps_per_iteration is None


def test_a_medstc_file_from_before_sweeps_per_iteration_loads_with_the_exact_coding_step(
        tmp_path, newsgroups):
    """MedSTC got the parameter later still (default 2); its older files coded every
    document to inner_tol, and load with None."""
    train, _ = newsgroups
    model = MedSTC(n_topics=3, max_iter=2, random_state=0, sweeps_per_iteration=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(train.data[::20], train.target[::20])
    loaded = stc.load(_file_from_before(model, tmp_path, "sweeps_per_iteration"))
    assert loaded.sweeps_per_iteration is None
    assert np.array_equal(loaded.predict(train.data[:50]), model.predict(train.data[:50]))


@pytest.mark.parametrize("version, message", [
    (FORMAT_VERSION + 1, "format version 2, written by stc .*reads format version 1: upgrade"),
    (0, "format version 0, which this stc .* cannot read"),
    ("1", "format version '1', which this stc"),
])
def test_another_format_version_is_refused(tmp_path, stc_file, version, message):
    changed = _rewrite(stc_file, tmp_path / "v.stc",
                       change_metadata=lambda m: m.update(format_version=version))
    with pytest.raises(ValueError, match=message):
        stc.load(changed)


def test_files_that_are_not_models_are_refused(tmp_path):
    np.savez(tmp_path / "plain.npz", a=np.arange(3))
    with pytest.raises(ValueError, match="plain.npz is not an stc model file"):
        stc.load(tmp_path / "plain.npz")
    # a text file is no model file at all, not a damaged one
    (tmp_path / "text.stc").write_text("hello")
    with pytest.raises(ValueError, match="text.stc is not an stc model file .those are zip "
                                         "archives written by STC.save"):
        stc.load(tmp_path / "text.stc")
    with pytest.raises(FileNotFoundError, match="missing.stc"):
        stc.load(tmp_path / "missing.stc")


class _Trap:
    """Unpickling this creates a file: proof that code from the file ran."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


def test_loading_runs_no_code_from_the_file(tmp_path, stc_file):
    proof = tmp_path / "code-ran"
    trap = np.array([_Trap(proof)], dtype=object)

    def plant(name, data):
        if name != "objective_.npy":
            return data
        buffer = io.BytesIO()
        np.lib.format.write_array(buffer, trap, allow_pickle=True)
        return buffer.getvalue()

    planted = _rewrite(stc_file, tmp_path / "planted.stc", change_member=plant)
    with pytest.raises(ValueError, match="planted.stc: member objective_.npy holds Python objects"):
        stc.load(planted)
    assert not proof.exists()


# ---- custom losses

class SquaredLoss(stc.losses.PythonLoss):
    """Half the squared error, in numpy (a stand-in for a user's loss)."""

    def loss(self, y, mean):
        return 0.5 * (np.asarray(y, float) - mean) ** 2

    def gradient(self, y, mean):
        return mean - np.asarray(y, float)

    def hessian(self, y, mean):
        return np.ones(np.broadcast(y, mean).shape)


@pytest.fixture
def registry():
    saved = dict(stc.losses._REGISTRY)
    yield stc.losses._REGISTRY
    stc.losses._REGISTRY.clear()
    stc.losses._REGISTRY.update(saved)


def test_a_custom_loss_is_recorded_by_name(tmp_path, registry, newsgroups):
    train, test = newsgroups
    stc.losses.register("half-squared", SquaredLoss)
    X = train.data[:60]
    for loss in ("half-squared", SquaredLoss()):  # a name, or an instance of the class
        model = STC(n_topics=2, max_iter=2, loss=loss, random_state=0).fit(X)
        model.save(tmp_path / "custom.stc")
        metadata = json.loads(zipfile.ZipFile(tmp_path / "custom.stc").read(METADATA_MEMBER))
        assert metadata["parameters"]["loss"] == "half-squared"
    loaded = stc.load(tmp_path / "custom.stc")
    assert np.array_equal(loaded.transform(test.data[:20]), model.transform(test.data[:20]))
    del registry["half-squared"]
    with pytest.raises(ValueError, match=r"custom.stc was fitted with the loss 'half-squared', "
                                         r"which is not registered in this process"):
        stc.load(tmp_path / "custom.stc")


def test_an_unregistered_loss_instance_cannot_be_saved(tmp_path, newsgroups):
    model = STC(n_topics=2, max_iter=2, loss=SquaredLoss(), random_state=0).fit(
        newsgroups[0].data[:60])
    with pytest.raises(ValueError, match="SquaredLoss, which is not registered"):
        model.save(tmp_path / "x.stc")


def test_a_random_state_object_is_stored_as_none(tmp_path, newsgroups):
    train, test = newsgroups
    model = STC(n_topics=2, max_iter=2, random_state=np.random.RandomState(0)).fit(
        train.data[:80])
    with pytest.warns(UserWarning, match="records random_state=None"):
        model.save(tmp_path / "m.stc")
    loaded = stc.load(tmp_path / "m.stc")
    assert loaded.random_state is None
    assert loaded.transform(test.data).tobytes() == model.transform(test.data).tobytes()
    model.set_params(random_state=np.int64(7))  # a numpy integer is stored as an int
    model.save(tmp_path / "m.stc")
    assert stc.load(tmp_path / "m.stc").random_state == 7


FRESH_STARTS = {
    "STC fit (batch)": lambda m, X, y: m.fit(X),
    "STC fit (online)": lambda m, X, y: m.set_params(learning_method="online", n_passes=1).fit(X),
    "STC fit_stream": lambda m, X, y: m.set_params(n_passes=1).fit_stream([X[:100], X[100:]]),
    "MedSTC fit (batch)": lambda m, X, y: m.fit(X, y),
    "MedSTC fit (online)": lambda m, X, y: m.set_params(learning_method="online",
                                                        n_passes=1).fit(X, y),
    "MedSTC fit_stream": lambda m, X, y: m.set_params(n_passes=1).fit_stream(
        [(X[:100], y[:100]), (X[100:], y[100:])], classes=np.unique(y)),
}


@pytest.mark.parametrize("how", sorted(FRESH_STARTS))
def test_a_fresh_fit_of_a_loaded_model_forgets_its_vocabulary(how, tmp_path, newsgroups):
    """fit and fit_stream start afresh, so the file's vocabulary no longer names the columns
    (saving would store it with topics it does not describe); partial_fit continues."""
    train, _ = newsgroups
    X, y = train.data[::9], train.target[::9]  # the corpus is sorted by class
    estimator = MedSTC if how.startswith("MedSTC") else STC
    path = tmp_path / "model.stc"
    first = estimator(n_topics=3, max_iter=2, random_state=0)
    (first.fit(X, y) if estimator is MedSTC else first.fit(X)).save(
        path, vocabulary=train.vocabulary)
    loaded = stc.load(path)
    assert list(loaded.vocabulary_) == list(train.vocabulary)
    FRESH_STARTS[how](loaded, X, y)
    assert not hasattr(loaded, "vocabulary_") and not hasattr(loaded, "text_options_")


def test_partial_fit_of_a_loaded_model_keeps_its_vocabulary(tmp_path, newsgroups):
    train, _ = newsgroups
    X = train.data[:200]
    path = tmp_path / "model.stc"
    STC(n_topics=3, learning_method="online", random_state=0).partial_fit(X).save(
        path, vocabulary=train.vocabulary)
    loaded = stc.load(path)
    loaded.partial_fit(train.data[200:300])
    assert list(loaded.vocabulary_) == list(train.vocabulary)
