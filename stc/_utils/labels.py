"""Class labels checked before they are encoded (numpy only: `stc.inspection` uses it too)."""
import numpy as np


def check_labels(y, name="y"):
    """Refuse labels that are None or NaN (missing labels, not a class)."""
    labels = np.asarray(y)
    if labels.dtype.kind == "f":  # numbers: NaN is the only missing value, counted in C
        counts = (("NaN", int(np.count_nonzero(np.isnan(labels)))),)
    elif labels.dtype.kind == "O":  # anything: a Python loop
        labels = labels.ravel()
        counts = (("None", sum(label is None for label in labels)),
                  ("NaN", sum(isinstance(label, (float, np.floating)) and label != label
                              for label in labels)))
    else:  # integers, strings, booleans: nothing can be missing
        return
    for what, count in counts:
        if count:
            raise ValueError(f"{name} contains {what} ({count} of {labels.size} labels): a "
                             "missing label is not a class, and every document needs one")
