"""MedSTC.fit on a dask array of CSR row blocks, on a LocalCluster of two worker processes:
batch learning, then online learning (learning_method="online")."""
import warnings

import numpy as np
import pytest

from stc import MedSTC, load

from conftest import brief_fit

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from test_distributed import dask_rows, round_indices  # noqa: E402  (after the skips)

# A setting where every part of the loop works: the SVM step moves eta (the training
# accuracy changes), the safeguard rejects steps, the back-off sits documents out.
PARAMS = dict(n_topics=5, C=3e5, cost=100.0, max_iter=8, tol=0.0, random_state=0)


@pytest.fixture(scope="module")
def client():
    """Worker processes: the partitions' labels, eta, the cuts and the safeguard's state
    travel pickled. Starting them takes about 5 s on an idle 2-core machine."""
    with warnings.catch_warnings():
        # starting a cluster, distributed warns of what it finds on this machine (e.g.
        # "Port 8787 is already in use" while another cluster runs, an unclosed socket)
        warnings.simplefilter("ignore")
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           dashboard_address=None)
        with distributed.Client(cluster) as client, client.as_current():
            yield client
        cluster.close()


@pytest.fixture(scope="module")
def labelled(newsgroups):
    """300 training documents drawn across the three groups (the split is ordered by group)."""
    train, _ = newsgroups
    rows = np.sort(np.random.default_rng(0).choice(train.data.shape[0], 300, replace=False))
    return train.data[rows], train.target[rows]


@pytest.fixture(scope="module")
def in_memory(labelled):
    X, y = labelled
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "MedSTC stopped at max_iter=")  # tol=0 on purpose
        return MedSTC(**PARAMS).fit(X, y)


def assert_same_fit(spread, local):
    """Equal up to the order of the sums over documents."""
    assert spread.n_iter_ == local.n_iter_
    np.testing.assert_allclose(spread.objective_, local.objective_, rtol=1e-9, atol=0)
    for name in ("joint_coef_", "coef_"):
        a, b = getattr(spread, name), getattr(local, name)
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9 * np.max(np.abs(b)))
    np.testing.assert_allclose(spread.components_, local.components_, rtol=1e-7, atol=1e-12)
    np.testing.assert_allclose(spread.hinge_, local.hinge_, rtol=1e-9, atol=0)
    np.testing.assert_array_equal(spread.train_accuracy_, local.train_accuracy_)
    np.testing.assert_array_equal(spread.rejected_steps_, local.rejected_steps_)
    assert spread.refit_C_ == pytest.approx(local.refit_C_, rel=1e-9)
    assert spread.refit_train_accuracy_ == local.refit_train_accuracy_
    assert spread.count_scale_ == pytest.approx(local.count_scale_, rel=1e-14)
    np.testing.assert_array_equal(spread.classes_, local.classes_)
    np.testing.assert_array_equal(spread.term_counts_, local.term_counts_)


@brief_fit
# 3 partitions, or 1 (slow: a second cluster fit of the same data)
@pytest.mark.parametrize("rows_per_block", [100, pytest.param(300, marks=pytest.mark.slow)])
def test_fit_matches_the_in_memory_fit(client, labelled, in_memory, rows_per_block):
    X, y = labelled
    # the setting exercises what it should: eta learns, the safeguard rejects
    assert np.ptp(in_memory.train_accuracy_) > 0 and in_memory.rejected_steps_.sum() > 0
    spread = MedSTC(**PARAMS).fit(dask_rows(X, rows_per_block), y)
    assert_same_fit(spread, in_memory)
    rises = np.diff(spread.objective_) / np.abs(spread.objective_[:-1])
    assert np.all(rises <= 1e-9), rises  # objective (4) never increases
    np.testing.assert_array_equal(spread.predict(X), in_memory.predict(X))


@pytest.mark.slow  # a third cluster fit like test_fit_matches_the_in_memory_fit's
@brief_fit
def test_labels_as_a_dask_array_of_other_or_unknown_chunks(client, labelled, in_memory):
    """y is aligned with X by row, whatever its chunks: here 7 blocks of unknown size."""
    X, y = labelled
    labels = da.from_array(y, chunks=45)
    labels = labels[labels >= 0]  # the same labels, chunk sizes unknown (NaN)
    assert np.isnan(labels.shape[0])
    spread = MedSTC(**PARAMS).fit(dask_rows(X, 100), labels)
    assert_same_fit(spread, in_memory)


@brief_fit
def test_string_labels_no_refit_and_progress(client, labelled, capsys):
    X, y = labelled
    names = np.array(["graphics", "hockey", "space"])[y]
    params = dict(PARAMS, max_iter=3, refit_C=None, random_state=1)
    local = MedSTC(**params).fit(X, names)
    spread = MedSTC(**params, verbose=1).fit(dask_rows(X, 150), names)
    assert list(spread.classes_) == ["graphics", "hockey", "space"]
    assert spread.refit_C_ is None and spread.coef_ is spread.joint_coef_
    np.testing.assert_allclose(spread.objective_, local.objective_, rtol=1e-9, atol=0)
    np.testing.assert_allclose(spread.coef_, local.coef_, rtol=1e-9,
                               atol=1e-9 * np.max(np.abs(local.coef_)))
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 3 and "partitions 2" in lines[0] and "skipped" in lines[-1]


@brief_fit
def test_a_dask_fit_saves_loads_and_predicts_bit_identically(client, labelled, tmp_path,
                                                             newsgroups):
    X, y = labelled
    model = MedSTC(n_topics=3, max_iter=3, random_state=0).fit(dask_rows(X, 100), y)
    model.save(tmp_path / "medstc.npz")
    loaded = load(tmp_path / "medstc.npz")
    assert type(loaded) is MedSTC and loaded.get_params() == model.get_params()
    for name in ("components_", "coef_", "joint_coef_", "objective_", "hinge_",
                 "train_accuracy_", "rejected_steps_", "term_counts_", "classes_"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(model, name))
    assert loaded.refit_C_ == model.refit_C_ and loaded.count_scale_ == model.count_scale_
    test = newsgroups[1].data[:200]
    np.testing.assert_array_equal(loaded.decision_function(test), model.decision_function(test))
    np.testing.assert_array_equal(loaded.predict(test), model.predict(test))


def test_bad_input_is_refused_clearly(client, labelled):
    X, y = labelled
    spread = dask_rows(X, 100)
    with pytest.raises(ValueError, match="needs the labels y"):
        MedSTC(n_topics=2).fit(spread, None)
    with pytest.raises(ValueError, match=r"one label per document \(300\), got shape \(299,\)"):
        MedSTC(n_topics=2).fit(spread, y[:-1])
    with pytest.raises(ValueError, match=r"one label per document \(300\), got shape \(299,\)"):
        MedSTC(n_topics=2).fit(spread, da.from_array(y[:-1], chunks=100))
    with pytest.raises(ValueError, match="2 classes"):
        MedSTC(n_topics=2).fit(spread, np.zeros(300))
    with pytest.raises(ValueError, match="Poisson"):
        MedSTC(n_topics=2, loss="gaussian").fit(spread, y)
    with pytest.raises(ValueError, match="init='nndsvd'"):
        MedSTC(n_topics=2, init="nndsvd").fit(spread, y)
    with pytest.raises(ValueError, match="row blocks only"):
        MedSTC(n_topics=2).fit(da.from_array(X, chunks=(100, 100), asarray=False), y)


@pytest.mark.parametrize("learning_method", ["batch", "online"])
def test_labels_are_checked_against_rows_counted_on_the_workers(client, labelled,
                                                                learning_method):
    """X of unknown row count: y's length is checked once the partitions are counted."""
    import dask

    X, y = labelled
    blocks = [da.from_delayed(dask.delayed(X[i:i + 100]), shape=(np.nan, X.shape[1]),
                              dtype=np.float64, meta=X[:0])
              for i in range(0, 300, 100)]
    spread = da.concatenate(blocks, axis=0)
    assert np.isnan(spread.shape[0])
    with pytest.raises(ValueError, match=r"one label per document \(300\), got shape \(299,\)"):
        MedSTC(n_topics=2, learning_method=learning_method).fit(spread, y[:-1])


# ---- online learning

# rho in absolute units: the fit on the cluster takes w_bar of the whole array, fit_stream
# of its first batch. C and cost where the shifted mean moves codes and the safeguard rejects.
ONLINE = dict(n_topics=4, C=3e5, cost=100.0, rho=0.01, rho_units="absolute", random_state=0,
              learning_method="online", batch_size=64, n_passes=2)


class Rounds:
    """The rounds' mini-batches of an online fit of dask_rows(X, rows_per_block), for fit_stream.

    Its k-th iteration yields the (X, y) batches of pass k: the learning passes, then the
    refit's pass (the fit on the cluster takes it in the order of pass n_passes + 1).
    """

    def __init__(self, X, y, rows_per_block, batch_size, entropy=0):
        self.X, self.y, self.rows_per_block = X, y, rows_per_block
        self.batch_size, self.entropy, self.passes = batch_size, entropy, 0

    def __len__(self):
        return -(-self.X.shape[0] // self.batch_size)

    def __iter__(self):
        self.passes += 1
        for rows in round_indices(self.X.shape[0], self.rows_per_block, self.batch_size,
                                  self.passes, self.entropy):
            yield self.X[rows], self.y[rows]


def assert_same_online_fit(spread, local):
    """Equal up to the order of the sums over documents; returns the largest relative gaps.

    eta's entries are sums of terms of both signs: near-zero ones are compared to 1e-9 of
    the largest entry.
    """
    gaps = {}
    for name in ("components_", "joint_coef_", "coef_", "online_code_sums_"):
        a, b = getattr(spread, name), getattr(local, name)
        atol = {"components_": 1e-15, "online_code_sums_": 0.0}.get(
            name, 1e-9 * np.max(np.abs(b)))
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=atol, err_msg=name)
        nonzero = b != 0
        gaps[name] = float(np.max(np.abs(a - b)[nonzero] / np.abs(b[nonzero]), initial=0.0))
    np.testing.assert_allclose(spread.objective_, local.objective_, rtol=1e-12)
    if local.refit_C_ is None:
        assert spread.refit_C_ is None
    else:
        assert spread.refit_C_ == pytest.approx(local.refit_C_, rel=1e-12)
    for name in ("rejected_steps_", "n_docs_seen_", "online_total_samples_", "n_batch_iter_",
                 "online_svm_steps_", "online_refit_steps_", "online_refit_docs_", "classes_",
                 "term_counts_"):
        np.testing.assert_array_equal(getattr(spread, name), getattr(local, name), err_msg=name)
    return gaps


@pytest.mark.parametrize("rows_per_block", [300, 100])  # 1 partition, or 3
def test_online_fit_is_fit_stream_over_the_rounds_batches(client, labelled, rows_per_block):
    """Online on the cluster: fit_stream over the rounds' mini-batches, then the refit pass's."""
    X, y = labelled
    spread = MedSTC(**ONLINE).fit(dask_rows(X, rows_per_block), y)
    # D of (4) is the array's rows, as fit in memory takes X's
    local = MedSTC(**ONLINE, total_samples=300).fit_stream(
        Rounds(X, y, rows_per_block, 64), classes=np.unique(y))
    gaps = assert_same_online_fit(spread, local)
    print(f"{rows_per_block} rows a block: largest relative gaps {gaps}")
    # the setting exercises what it should: eta learns, the safeguard rejects, the refit runs
    assert spread.rejected_steps_ > 0 and spread.online_total_samples_ == 300
    assert spread.n_docs_seen_ == 600 and spread.online_refit_docs_ == 300
    assert spread.n_iter_ == 2 and spread.count_scale_ == pytest.approx(X.data.mean())
    np.testing.assert_array_equal(spread.predict(X), local.predict(X))


def test_online_fit_with_string_dask_labels_uneven_partitions_and_no_refit(client, labelled):
    """y a dask array of other chunks; a partition of 10 rows gives some rounds no slice."""
    X, y = labelled
    names = np.array(["graphics", "hockey", "space"])[y]
    params = dict(ONLINE, batch_size=16, refit_C=None, total_samples=300)
    spread = MedSTC(**params).fit(dask_rows(X, 290), da.from_array(names, chunks=70))
    # some rounds have no row of the partition of 10 (rows 290 to 299)
    assert any(np.all(rows < 290) for rows in round_indices(300, 290, 16, 1, entropy=0))
    local = MedSTC(**params).fit_stream(Rounds(X, names, 290, 16),
                                        classes=np.unique(names))
    assert_same_online_fit(spread, local)
    assert list(spread.classes_) == ["graphics", "hockey", "space"]
    assert spread.refit_C_ is None and spread.coef_ is spread.joint_coef_


def test_a_dask_online_fit_saves_loads_and_predicts_bit_identically(client, labelled, tmp_path,
                                                                    newsgroups):
    X, y = labelled
    model = MedSTC(**dict(ONLINE, n_passes=1)).fit(dask_rows(X, 100), y)
    model.save(tmp_path / "online.npz")
    loaded = load(tmp_path / "online.npz")
    assert type(loaded) is MedSTC and loaded.get_params() == model.get_params()
    for name in ("components_", "coef_", "joint_coef_", "objective_", "term_counts_",
                 "classes_", "online_responsibilities_", "online_code_sums_"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(model, name))
    assert loaded.refit_C_ == model.refit_C_ and loaded.n_docs_seen_ == model.n_docs_seen_
    test = newsgroups[1].data[:200]
    np.testing.assert_array_equal(loaded.decision_function(test), model.decision_function(test))
    np.testing.assert_array_equal(loaded.predict(test), model.predict(test))
    # it goes on learning in memory, as after an online fit in memory
    loaded.partial_fit(X[:50], y[:50])
    assert loaded.n_docs_seen_ == 350


def test_online_bad_input_is_refused_clearly(client, labelled):
    X, y = labelled
    spread = dask_rows(X, 100)
    online = dict(n_topics=2, learning_method="online")
    with pytest.raises(ValueError, match=r"one label per document \(300\), got shape \(299,\)"):
        MedSTC(**online).fit(spread, y[:-1])
    with pytest.raises(ValueError, match=r"one label per document \(300\), got shape \(299,\)"):
        MedSTC(**online).fit(spread, da.from_array(y[:-1], chunks=100))
    with pytest.raises(ValueError, match="needs the labels y"):
        MedSTC(**online).fit(spread, None)
    with pytest.raises(ValueError, match="Poisson"):
        MedSTC(**online, loss="gaussian").fit(spread, y)
    # partial_fit and fit_stream read batches in memory: they say so, naming themselves
    with pytest.raises(TypeError, match="partial_fit takes .* not a dask array"):
        MedSTC(**online).partial_fit(spread, y, classes=np.unique(y))
    with pytest.raises(TypeError, match="fit_stream takes .* not a dask array"):
        MedSTC(**online, n_passes=1).fit_stream([(spread, y)], classes=np.unique(y))
