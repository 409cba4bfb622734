# What the coding kernel shares with MedSTC's segment helpers (`_segments.pyx`): the
# coding problem's struct and the objective of one document at given codes.
from stc.losses._base cimport CompiledLoss


cdef struct CodingParams:
    # One document's coding problem: objective (2) restricted to the document,
    #   sum_n l(y_n, s_n . beta_n) + lam pen(theta) + sum_n (gamma ||s_n - theta||^2 + rho pen(s_n)),
    # and the sweep's stopping rule.
    double lam
    double gamma
    double rho
    int theta_penalty   # PENALTY_L1 (eq. 3) or PENALTY_L2 (footnote 3)
    int code_penalty    # PENALTY_L1 (STC) or PENALTY_L2 (gaussSTC)
    int max_iter        # sweeps per document
    double tol          # stop at a relative objective decrease under tol
    int newton_steps    # block Newton steps on each theta_k (0: the paper's alternation)


cdef double objective_at_codes(CompiledLoss loss, const CodingParams* p, const double* beta_t,
                               Py_ssize_t n_topics, const int* words, Py_ssize_t n_words,
                               const double* y, double* work, double* loss_part) noexcept nogil
