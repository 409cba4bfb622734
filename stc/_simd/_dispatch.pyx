"""Run-time choice of the kernels' vector level (scalar, then the levels of `_levels.h`).

The coding sweep's loops and the built-in losses' closed forms are compiled at every
level the platform has; on import the best level this CPU supports is chosen, capped by
the environment variable ``STC_SIMD_LEVEL`` if it is set. Every level gives the same
bits, so the level changes speed only. `level`, `levels` and `set_level` report and
change it (tests run the pinned fits at every level the machine has); `stc.show_config`
prints it.
"""
import os

cdef extern from "_levels.h":
    enum:
        STC_LEVEL_COUNT
    const char* stc_level_name(int level) nogil
    int stc_level_supported(int level) nogil

LEVEL_NAMES = tuple(stc_level_name(level).decode() for level in range(STC_LEVEL_COUNT))
ENVIRONMENT_VARIABLE = "STC_SIMD_LEVEL"

cdef int active = 0


cdef const int* level_in_use() noexcept nogil:
    return &active


def levels():
    """The levels this build holds and this CPU runs, lowest first."""
    return tuple(name for i, name in enumerate(LEVEL_NAMES) if stc_level_supported(i))


def compiled_levels():
    """The levels this build holds, whether or not this CPU runs them."""
    return LEVEL_NAMES


def level():
    """The level the kernels use now."""
    return LEVEL_NAMES[active]


def _index(name, what):
    if not isinstance(name, str) or name.strip().lower() not in LEVEL_NAMES:
        raise ValueError(f"{what} must be one of {', '.join(LEVEL_NAMES)}; got {name!r}")
    return LEVEL_NAMES.index(name.strip().lower())


def set_level(name):
    """Use level ``name`` (one of `levels`) from now on; returns the previous level.

    Not while a coding call runs in another thread: the kernels read the level
    without a lock.
    """
    global active
    index = _index(name, "level")
    if not stc_level_supported(index):
        raise ValueError(f"level {name!r} is not supported here: this build and CPU "
                         f"run {', '.join(levels())}")
    previous = level()
    active = index
    return previous


def best_level(cap=None):
    """The highest level this CPU runs, no higher than ``cap`` (a level name) if given."""
    top = len(LEVEL_NAMES) - 1 if cap is None else _index(cap, ENVIRONMENT_VARIABLE)
    return max(i for i in range(top + 1) if stc_level_supported(i))


active = best_level(os.environ.get(ENVIRONMENT_VARIABLE) or None)
