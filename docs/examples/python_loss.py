"""A pure-Python loss for stc: the pseudo-Huber (robust Gaussian) loss.

Run:  python python_loss.py [n_docs]

Defines the loss with vectorised numpy, registers it under the name
"pseudo_huber", fits STC with it on n_docs (default 500) randomly chosen
training documents of the embedded three-newsgroup corpus, and prints the top
words of every topic.
"""
import sys

import numpy as np

import stc
import stc.datasets
import stc.losses


class PseudoHuberLoss(stc.losses.PythonLoss):
    """delta^2 (sqrt(1 + ((mean - y) / delta)^2) - 1).

    Quadratic for residuals much smaller than delta, linear (slope delta) for
    larger ones, so a few very large counts pull the reconstruction less
    than under the squared error. Convex in the mean.
    """

    name = "pseudo_huber"
    mean_domain = (-np.inf, np.inf)  # open interval the mean must lie in

    def __init__(self, delta=1.0):
        self.delta = float(delta)

    # All three methods are elementwise on numpy arrays y and mean, and
    # differentiate with respect to the mean. They are written so that no
    # intermediate overflows at huge residuals (r * r does beyond 1e154).
    def loss(self, y, mean):
        a = np.abs(mean - y) / self.delta
        # sqrt(1 + a^2) - 1 = a^2 / (sqrt(1 + a^2) + 1): no cancellation for small a
        return self.delta ** 2 * a * (a / (sqrt_one_plus_square(a) + 1.0))

    def gradient(self, y, mean):
        r = (mean - y) / self.delta
        return self.delta * r / sqrt_one_plus_square(np.abs(r))

    def hessian(self, y, mean):
        q = 1.0 / sqrt_one_plus_square(np.abs(mean - y) / self.delta)
        return q * q * q

    def check_data(self, values):
        # Called on the non-zero entries of every X given to fit/transform.
        # Any non-negative value is fine here; a loss for binary or bounded
        # data would raise ValueError for values it cannot model.
        pass


def sqrt_one_plus_square(a):
    """sqrt(1 + a^2) for a >= 0, as a sqrt(1 + 1 / a^2) above 1 so that a^2 cannot overflow."""
    # (np.where computes both branches: silence the one not taken)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        return np.where(a > 1.0, a * np.sqrt(1.0 + 1.0 / (a * a)), np.sqrt(1.0 + a * a))


# Checks the class (derivatives, convexity on sample points) and makes it
# available as STC(loss="pseudo_huber").
stc.losses.register("pseudo_huber", PseudoHuberLoss)


def main(n_docs=500):
    train = stc.datasets.load_newsgroups("train")
    docs = np.sort(np.random.default_rng(0).choice(train.data.shape[0], n_docs, replace=False))
    X = train.data[docs]
    # Optional: check the loss against the actual data values too.
    stc.losses.check_loss(PseudoHuberLoss(), data=X.data)

    # The topics lie on the probability simplex (weights ~1e-4), so word
    # codes must be ~1e4 to reconstruct counts. The pseudo-Huber gradient is
    # bounded by delta, so the penalties must be small enough not to
    # overwhelm it (the defaults suit the Poisson loss, whose gradient is
    # unbounded as the mean goes to zero).
    # rho is the weight in the objective as given (absolute units), theta has the
    # paper's l2 penalty.
    model = stc.STC(n_topics=10, loss="pseudo_huber", lambda_=1e-4, rho=1e-5,
                    rho_units="absolute", theta_penalty="l2", max_iter=5, random_state=0)
    theta = model.fit_transform(X)
    print(f"pseudo_huber: {X.shape[0]} documents, objective {model.objective_[-1]:.1f}, "
          f"{np.mean(theta == 0):.0%} of document codes are zero")
    for k, words in enumerate(model.top_words(train.vocabulary, n=8)):
        print(f"topic {k}: {' '.join(words)}")
    return model


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 500)
