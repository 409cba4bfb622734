"""Text settings and wording shared by `stc.readers`, the estimators' messages and the command
line (kept free of heavy imports, so that `stc fit --help` can show them quickly)."""

# Words of two or more characters; an apostrophe inside a word keeps it whole, so
# that the shipped stop words ("aren't", "can't") match the tokens of the text.
TOKEN_PATTERN = r"(?u)\b\w[\w']*\w\b"


def counted(number, noun):
    """``number`` and ``noun``, plural unless one: "1 document", "3 documents"."""
    return f"{number} {noun}{'' if number == 1 else 's'}"
