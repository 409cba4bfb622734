"""The coding sweep of `stc._core._coding` written with numpy, for pure-Python losses.

Same updates in the same order per word (words are independent given theta,
so sweeping topic by topic over all words of all documents at once gives the
same result as the compiled kernel's per-document loop), same per-document
stopping rule. It calls the loss's vectorised methods once per topic per
sweep; it is also an independent reference for the compiled kernel in tests.
"""
import numpy as np

PENALTY_L1, PENALTY_L2 = 0, 1


def theta_closed_form(mean_code, linear, n_words, lam, gamma, penalty):
    """Vectorised `theta_update`: eq. (3) (l1) or footnote 3 (l2), plus a linear term."""
    n_words = np.asarray(n_words, dtype=np.float64)
    if penalty == PENALTY_L1:
        t = mean_code + (linear - lam) / (2.0 * gamma * n_words)
    else:
        t = (2.0 * gamma * n_words * mean_code + linear) / (2.0 * lam + 2.0 * gamma * n_words)
    return np.maximum(t, 0.0)


def _objective(loss, X, doc_of_entry, means, codes, theta, linear, lam, gamma, rho,
               theta_penalty, code_penalty):
    n_docs = X.shape[0]
    recon = np.bincount(doc_of_entry, weights=loss.loss(X.data, means), minlength=n_docs)
    coupling = ((codes - theta[doc_of_entry]) ** 2).sum(axis=1)
    code_pen = codes.sum(axis=1) if code_penalty == PENALTY_L1 else (codes ** 2).sum(axis=1)
    per_entry = gamma * coupling + rho * code_pen
    doc_pen = theta.sum(axis=1) if theta_penalty == PENALTY_L1 else (theta ** 2).sum(axis=1)
    total = recon + np.bincount(doc_of_entry, weights=per_entry, minlength=n_docs) + lam * doc_pen
    if linear is not None:
        total -= (linear * theta).sum(axis=1)
    return total, recon


def code_documents_numpy(loss, X, beta, codes, theta, means, theta_linear, lam, gamma, rho,
                         theta_penalty, code_penalty, max_iter, tol):
    """In-place coding of the CSR matrix X; same contract as `code_documents`."""
    n_docs, n_topics = theta.shape
    lengths = np.diff(X.indptr)
    doc_of_entry = np.repeat(np.arange(n_docs), lengths)
    quad = gamma + (rho if code_penalty == PENALTY_L2 else 0.0)
    rho_lin = rho if code_penalty == PENALTY_L1 else 0.0
    means[:] = (codes * beta.T[X.indices]).sum(axis=1) if X.nnz else 0.0
    theta[lengths == 0] = 0.0
    objective, recon = _objective(loss, X, doc_of_entry, means, codes, theta, theta_linear,
                                  lam, gamma, rho, theta_penalty, code_penalty)
    n_iter = np.zeros(n_docs, dtype=np.intc)
    active_docs = lengths > 0
    linear = np.zeros_like(theta) if theta_linear is None else theta_linear
    for _ in range(max_iter):
        if not active_docs.any():
            break
        entries = np.flatnonzero(active_docs[doc_of_entry])
        docs = doc_of_entry[entries]
        words = X.indices[entries]
        y = X.data[entries]
        for k in range(n_topics):
            b = beta[k, words]
            rest = np.maximum(means[entries] - b * codes[entries, k], 0.0)
            x = loss.solve_coordinate(y, b, rest, quad, rho_lin - 2.0 * gamma * theta[docs, k],
                                      codes[entries, k])
            codes[entries, k] = x
            means[entries] = rest + b * x
        active = np.flatnonzero(active_docs)
        sums = np.zeros((n_docs, n_topics))
        np.add.at(sums, docs, codes[entries])
        theta[active] = theta_closed_form(sums[active] / lengths[active, None], linear[active],
                                          lengths[active, None], lam, gamma, theta_penalty)
        n_iter[active] += 1
        new_objective, new_recon = _objective(loss, X, doc_of_entry, means, codes, theta,
                                              theta_linear, lam, gamma, rho, theta_penalty,
                                              code_penalty)
        converged = objective - new_objective <= tol * np.abs(objective)
        objective[active] = new_objective[active]
        recon[active] = new_recon[active]
        active_docs[active[converged[active]]] = False
    return objective, recon, n_iter
