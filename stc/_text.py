"""Text settings shared by `stc.io` and the command line (kept free of heavy imports, so
that `stc fit --help` can show them quickly)."""

# Words of two or more characters; an apostrophe inside a word keeps it whole, so
# that the shipped stop words ("aren't", "can't") match the tokens of the text.
TOKEN_PATTERN = r"(?u)\b\w[\w']*\w\b"
