"""Class labels checked before they are encoded (numpy only: `stc.inspect` uses it too)."""
import numpy as np


def check_labels(y, name="y"):
    """Refuse labels that are None or NaN (missing labels, not a class)."""
    labels = np.asarray(y, dtype=object).ravel()
    for what, missing in (("None", lambda label: label is None),
                          ("NaN", lambda label: isinstance(label, (float, np.floating))
                           and label != label)):
        count = sum(map(missing, labels))
        if count:
            raise ValueError(f"{name} contains {what} ({count} of {labels.size} labels): a "
                             "missing label is not a class, and every document needs one")
