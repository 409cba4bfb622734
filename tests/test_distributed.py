"""STC.fit on a dask array of CSR row blocks, on a LocalCluster with two workers."""
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from stc import STC

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

# The paper's parameterisation (the defaults when the tests comparing a fit on the
# cluster with one in memory were written): rho in absolute units is the same for an
# online fit on the cluster (w_bar of the whole array) and fit_stream (w_bar of its
# first batch). The defaults are checked on the cluster at the end.
PAPER = dict(rho=0.01, rho_units="absolute", theta_penalty="l2")


@pytest.fixture(scope="module")
def client():
    with warnings.catch_warnings():
        # starting a cluster, distributed warns of what it finds on this machine (e.g.
        # "Port 8787 is already in use" while another cluster runs, an unclosed socket)
        warnings.simplefilter("ignore")
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                           dashboard_address=None)
        with distributed.Client(cluster) as client:
            yield client
        cluster.close()


def dask_rows(X, rows_per_block):
    """X as a dask array whose chunks are CSR row blocks."""
    blocks = [da.from_array(X[i:i + rows_per_block], chunks=X[i:i + rows_per_block].shape,
                            asarray=False)
              for i in range(0, X.shape[0], rows_per_block)]
    return da.concatenate(blocks, axis=0)


def test_batch_fit_matches_the_single_machine_fit(client, newsgroups):
    train, _ = newsgroups
    X = train.data[:600]
    params = dict(n_topics=4, max_iter=5, random_state=0, **PAPER)
    with warnings.catch_warnings():
        # max_iter is small on purpose
        warnings.filterwarnings("ignore", "STC stopped at max_iter=", ConvergenceWarning)
        local = STC(**params).fit(X)
        spread = STC(**params).fit(dask_rows(X, 250))
    assert spread.n_iter_ == local.n_iter_
    np.testing.assert_allclose(spread.objective_, local.objective_, rtol=1e-10)
    np.testing.assert_allclose(spread.components_, local.components_, rtol=1e-7, atol=1e-12)
    np.testing.assert_allclose(spread.transform(X), local.transform(X), rtol=1e-6, atol=1e-10)
    np.testing.assert_array_equal(spread.term_counts_, local.term_counts_)  # for score


def test_dask_input_errors(client, newsgroups):
    X = newsgroups[0].data[:100]
    with pytest.raises(ValueError, match="row blocks only"):
        STC(n_topics=2).fit(da.from_array(X, chunks=(50, 100), asarray=False))
    with pytest.raises(ValueError, match="Poisson"):
        STC(n_topics=2, loss="gaussian").fit(dask_rows(X, 50))
    with pytest.raises(TypeError, match="scipy.sparse"):
        STC(n_topics=2).fit(da.from_array(np.ones((10, 5)), chunks=(5, 5)))
    # blocks whose widths are unknown: "a block has 100 columns, expected nan" before
    unknown = dask_rows(X, 50).map_blocks(lambda block: block, dtype=np.float64)
    unknown._chunks = ((np.nan, np.nan), (np.nan,))
    with pytest.raises(ValueError, match=r"^X must be a 2-D dask array with a known number of "
                                         r"columns, got shape \(nan, nan\)"):
        STC(n_topics=2).fit(unknown)
    # only fit reads a dask array; the methods that take batches in memory say so
    with pytest.raises(TypeError, match="partial_fit takes matrices in memory, not a dask"):
        STC(n_topics=2).partial_fit(dask_rows(X, 50))
    with pytest.raises(TypeError, match="fit_stream takes matrices in memory, not a dask"):
        STC(n_topics=2, n_passes=1).fit_stream([dask_rows(X, 50)])


@pytest.fixture(autouse=True)
def first_step_of_300_documents(monkeypatch):
    """Each pass's first step joins rounds until they hold 300 documents (4,000 by default,
    more than these corpora hold): the fits below have several steps a pass."""
    from stc._learning.learners import online

    monkeypatch.setattr(online, "FIRST_STEP_DOCUMENTS", 300)


def round_indices(n_docs, rows_per_block, batch_size, pass_number, entropy, *, first_step=0):
    """The rows of each round of one pass of an online fit of dask_rows(X, rows_per_block).

    One array of row indices of X per round, in the order the round's mini-batch holds
    them: every partition's slice (`round_rows` of its `partition_order`), in partition order.
    With ``first_step`` documents (the first pass's, `online.first_step_documents`), per
    step instead: the first joins the first rounds until they hold that many, each
    partition's rows of them in turn.
    """
    from stc._learning.learners.dask_online import partition_order, round_rows

    starts = range(0, n_docs, rows_per_block)
    orders = [start + partition_order(min(rows_per_block, n_docs - start), entropy,
                                      pass_number, i)
              for i, start in enumerate(starts)]
    n_rounds = -(-n_docs // batch_size)
    joined = 1
    while joined < n_rounds and sum(round_rows(o.size, n_rounds, joined - 1)[1]
                                    for o in orders) < first_step:
        joined += 1
    bounds = [(0, joined)] + [(r, r + 1) for r in range(joined, n_rounds)]
    return [np.concatenate([order[round_rows(order.size, n_rounds, first)[0]:
                                  round_rows(order.size, n_rounds, stop - 1)[1]]
                            for order in orders])
            for first, stop in bounds]


class Schedule:
    """The steps' mini-batches of an online fit of dask_rows(X, rows_per_block), for
    fit_stream: its k-th iteration yields those of pass k (the first pass's first step
    joins the first rounds, so fit_stream joins no more)."""

    def __init__(self, X, rows_per_block, batch_size, n_topics, entropy=0):
        self.X, self.rows_per_block, self.batch_size = X, rows_per_block, batch_size
        self.n_topics, self.entropy, self.passes = n_topics, entropy, 0

    def __len__(self):
        """Batches a pass after the first (the rounds): what fit_stream counts for the topic
        averaging, as the fit on the cluster does."""
        return -(-self.X.shape[0] // self.batch_size)

    def __iter__(self):
        from stc._learning.learners import online

        self.passes += 1
        first_step = online.first_step_documents(self.n_topics) if self.passes == 1 else 0
        for rows in round_indices(self.X.shape[0], self.rows_per_block, self.batch_size,
                                  self.passes, self.entropy, first_step=first_step):
            yield self.X[rows]


@pytest.mark.parametrize("rows_per_block, init", [(250, "auto"), (600, "auto"),  # 3, 1 or 5
                                                   (120, "auto"), (250, "nndsvd")])  # partitions
def test_online_fit_is_fit_stream_over_the_partitions_batches(client, newsgroups,
                                                              rows_per_block, init):
    """Online on the cluster: the batches of the schedule, learned as fit_stream learns them
    (with init="nndsvd" too: the first step's slices make the first batch on the client),
    the topics averaged over the same last steps."""
    X = newsgroups[0].data[:600]
    params = dict(n_topics=4, random_state=0, learning_method="online", batch_size=128,
                  dictionary_max_iter=2, topic_averaging=0.5, init=init, n_passes=2, **PAPER)
    spread = STC(**params).fit(dask_rows(X, rows_per_block))
    local = STC(**params).fit_stream(Schedule(X, rows_per_block, 128, params["n_topics"]))
    # 5 rounds a pass, the first pass's first three (384 documents) joined into one step
    assert spread.n_batch_iter_ == local.n_batch_iter_ == 8 and spread.n_iter_ == 2
    np.testing.assert_allclose(spread.components_, local.components_, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(spread.online_code_sums_, local.online_code_sums_, rtol=1e-9)
    np.testing.assert_allclose(spread.objective_, local.objective_, rtol=1e-12)
    np.testing.assert_array_equal(spread.term_counts_, local.term_counts_)  # for score
    assert np.all(spread.components_ >= 0)
    np.testing.assert_allclose(spread.components_.sum(axis=1), 1.0, rtol=0, atol=1e-12)


def test_the_slices_sums_are_added_up_by_a_tree_of_merges():
    """merge_round_sums over neighbours gives the sums over the union of the slices' terms,
    the slices' answers in partition order; with two slices the bits of adding them in order."""
    from stc._learning.learners.dask_online import RoundSums, merge_round_sums

    rng = np.random.default_rng(0)
    n_terms, K = 40, 3
    slices = []
    for i in range(5):
        terms = np.sort(rng.choice(n_terms, size=rng.integers(0, 15), replace=False))
        slices.append(RoundSums(terms, rng.random((K, terms.size)), rng.random((K, terms.size)),
                                [f"slice {i}"]))
    expected_plain, expected_resp = np.zeros((K, n_terms)), np.zeros((K, n_terms))
    for s in slices:
        expected_plain[:, s.terms] += s.plain
        expected_resp[:, s.terms] += s.responsibilities
    union = np.unique(np.concatenate([s.terms for s in slices]))
    level = slices
    while len(level) > 1:  # the tree of DaskOnlineTraining.trip
        pairs = [merge_round_sums(a, b) for a, b in zip(level[0::2], level[1::2])]
        level = pairs + level[len(pairs) * 2:]
    total = level[0]
    np.testing.assert_array_equal(total.terms, union)
    np.testing.assert_allclose(total.plain, expected_plain[:, union], rtol=1e-15)
    np.testing.assert_allclose(total.responsibilities, expected_resp[:, union], rtol=1e-15)
    assert total.answers == [f"slice {i}" for i in range(5)]
    two = merge_round_sums(slices[0], slices[1])
    in_order = np.zeros((K, n_terms))
    in_order[:, slices[0].terms] += slices[0].plain
    in_order[:, slices[1].terms] += slices[1].plain
    np.testing.assert_array_equal(two.plain, in_order[:, two.terms])
    later = merge_round_sums(slices[2]._replace(plain=None), slices[3]._replace(plain=None))
    assert later.plain is None


def test_online_fit_with_uneven_partitions_and_empty_rounds(client, newsgroups, monkeypatch):
    """Partitions smaller than the number of rounds leave some rounds empty: they are skipped."""
    from stc._learning.learners import online

    monkeypatch.setattr(online, "FIRST_STEP_DOCUMENTS", 1)  # rounds 1-3 make the first step
    X = newsgroups[0].data[:9]
    spread = STC(n_topics=2, random_state=1, learning_method="online", batch_size=1,
                 n_passes=1, topic_averaging=0.0, **PAPER).fit(dask_rows(X, 3))
    batches = [b for b in Schedule(X, 3, 1, 2, entropy=1) if b.shape[0]]
    local = STC(n_topics=2, random_state=1, n_passes=1, topic_averaging=0.0,
                **PAPER).fit_stream(batches)
    assert spread.n_batch_iter_ == len(batches) == 3  # rounds 3, 6 and 9 of 9
    np.testing.assert_allclose(spread.components_, local.components_, rtol=1e-9, atol=1e-15)


@pytest.mark.slow  # starts a cluster of worker processes
def test_online_fit_with_workers_in_their_own_processes(newsgroups):
    """Worker processes: the problem, the topic columns and the sums all travel pickled.

    One pass, so that the topics averaged over its last rounds (the default
    topic_averaging) are those fit_stream averages over the same batches. Starting
    the two worker processes takes about 5 s on an idle 2-core machine.
    """
    X = newsgroups[0].data[:300]
    params = dict(n_topics=3, random_state=0, learning_method="online", batch_size=100,
                  n_passes=1, **PAPER)
    with warnings.catch_warnings():
        # starting a cluster, distributed warns of what it finds on this machine (e.g.
        # "Port 8787 is already in use" while another cluster runs, an unclosed socket)
        warnings.simplefilter("ignore")
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           dashboard_address=None)
        with distributed.Client(cluster) as processes, processes.as_current():
            spread = STC(**params).fit(dask_rows(X, 150))
        cluster.close()
    local = STC(**params).fit_stream(Schedule(X, 150, 100, params["n_topics"]))
    np.testing.assert_allclose(spread.components_, local.components_, rtol=1e-9, atol=1e-15)


def test_the_defaults_on_the_cluster(client, newsgroups):
    """rho in relative units (the default) and the l1 penalty on theta, in both modes.

    w_bar (count_scale_) is gathered from the partitions: that of the whole array, as
    fit in memory takes it. Batch: the fit in memory. Online: fit_stream over the same
    mini-batches with the absolute rho that w_bar gives.
    """
    X = newsgroups[0].data[:600]
    w_bar = float(X.sum() / X.nnz)
    assert STC().get_params()["rho_units"] == "relative"
    with warnings.catch_warnings():
        # max_iter is small on purpose
        warnings.filterwarnings("ignore", "STC stopped at max_iter=", ConvergenceWarning)
        local = STC(n_topics=4, max_iter=5, random_state=0).fit(X)
        spread = STC(n_topics=4, max_iter=5, random_state=0).fit(dask_rows(X, 250))
    assert spread.count_scale_ == pytest.approx(w_bar, rel=1e-14)
    assert spread.effective_rho_ == pytest.approx(0.02 * np.sqrt(2 * 0.1 * w_bar), rel=1e-14)
    assert spread.n_iter_ == local.n_iter_
    np.testing.assert_allclose(spread.objective_, local.objective_, rtol=1e-10)
    np.testing.assert_allclose(spread.components_, local.components_, rtol=1e-7, atol=1e-12)

    online = dict(n_topics=4, random_state=0, learning_method="online", batch_size=128,
                  dictionary_max_iter=2, topic_averaging=0.0)
    spread = STC(**online, n_passes=2).fit(dask_rows(X, 250))
    assert spread.count_scale_ == pytest.approx(w_bar, rel=1e-14)
    local = STC(**online, n_passes=2, rho=spread.effective_rho_, rho_units="absolute").fit_stream(
        Schedule(X, 250, 128, 4))
    assert local.theta_penalty == spread.theta_penalty == "l1"
    np.testing.assert_allclose(spread.components_, local.components_, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(spread.objective_, local.objective_, rtol=1e-12)


def test_a_worker_that_leaves_the_cluster_stops_the_fit_with_a_clear_error(newsgroups):
    """Partitions are pinned to their workers: a lost worker's codes are gone, so say so.

    Without the check, a task pinned to the retired worker would wait for ever.
    """
    from stc._learning.learners.dask_online import _size
    from stc._learning.learners.partitions import Partitions
    from stc.losses import get_loss

    X = newsgroups[0].data[:120]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                           dashboard_address=None)
        with distributed.Client(cluster) as own:
            parts = Partitions(own, dask_rows(X, 30), get_loss("poisson"))
            assert [rows for rows, _, _ in parts.run(_size)] == [30, 30, 30, 30]
            lost = parts.workers[0]
            own.retire_workers([lost])
            with pytest.raises(RuntimeError, match="left the cluster during the fit"):
                parts.run(_size)
        cluster.close()
