"""Use the compiled pseudo-Huber loss built from pseudo_huber.pyx.

Build first, in this directory:  python setup.py build_ext --inplace
Then run:                        python use_compiled_loss.py [n_docs]

Registers the compiled loss as "pseudo_huber_compiled", fits STC with it on
n_docs (default 500) randomly chosen training documents of the embedded
three-newsgroup corpus (the same documents and settings as
../python_loss.py), and prints the top words of every topic.
"""
import sys
import time

import numpy as np

import stc
import stc.datasets
import stc.losses

from pseudo_huber import PseudoHuberLoss  # the extension module built by setup.py

stc.losses.register("pseudo_huber_compiled", PseudoHuberLoss)


def main(n_docs=500, n_jobs=None):
    train = stc.datasets.load_newsgroups("train")
    docs = np.sort(np.random.default_rng(0).choice(train.data.shape[0], n_docs, replace=False))
    X = train.data[docs]
    stc.losses.check_loss(PseudoHuberLoss(), data=X.data)

    start = time.perf_counter()
    model = stc.STC(n_topics=10, loss="pseudo_huber_compiled", lambda_=1e-4, rho=1e-5,
                    rho_units="absolute", theta_penalty="l2", max_iter=5, random_state=0,
                    n_jobs=n_jobs)
    theta = model.fit_transform(X)
    elapsed = time.perf_counter() - start
    print(f"pseudo_huber_compiled: {X.shape[0]} documents, objective "
          f"{model.objective_[-1]:.1f}, {np.mean(theta == 0):.0%} of document codes are zero "
          f"({elapsed:.1f} s)")
    for k, words in enumerate(model.top_words(train.vocabulary, n=8)):
        print(f"topic {k}: {' '.join(words)}")
    return model


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 500)
