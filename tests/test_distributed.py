"""STC.fit on a dask array of CSR row blocks, on a LocalCluster with two workers."""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from stc import STC

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client():
    with warnings.catch_warnings():
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
    params = dict(n_topics=4, max_iter=5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # max_iter is small on purpose
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
    with pytest.raises(ValueError, match="learning_method='batch'"):
        STC(n_topics=2, learning_method="online").fit(dask_rows(X, 50))
    with pytest.raises(ValueError, match="Poisson"):
        STC(n_topics=2, loss="gaussian").fit(dask_rows(X, 50))
    with pytest.raises(TypeError, match="scipy.sparse"):
        STC(n_topics=2).fit(da.from_array(np.ones((10, 5)), chunks=(5, 5)))
