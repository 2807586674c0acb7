"""nitro's own errors and the argument checks they come from.

Every error a user can cause (a bad config, a run directory in use, a corrupt checkpoint, a diverged
run) is a ``NitroError``: its message is one line that says what was expected, what was given and how
to fix it, and the ``nitro`` command prints just that line and exits with code 2.
"""

from __future__ import annotations

import operator


class NitroError(Exception):
    """Base of the errors nitro raises on bad input or a failed run (one-line messages)."""


def as_count(name: str, value, minimum: int | None = 1) -> int:
    """``value`` as a Python int >= ``minimum`` (any int when None): ints and integer scalars
    (``np.int64(8)``, a 0-d integer tensor) pass; bools, floats and strings raise a ``TypeError``,
    smaller values a ``ValueError``."""
    want = "an int" if minimum is None else f"an int >= {minimum}"
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        raise TypeError(f"{name} must be {want}, got the bool {value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be {want}, got {value!r} ({type(value).__name__})") from None
    if minimum is not None and number < minimum:
        raise ValueError(f"{name} must be {want}, got {number}")
    return number
