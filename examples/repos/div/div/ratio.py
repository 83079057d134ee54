"""Ratios."""


def ratio(a, b):
    """Return a divided by b as a float."""
    return a // b
