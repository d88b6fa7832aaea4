"""Numpy reference implementations of the wl ops: the float64 ground truth kernels are compared against."""
from .ops import *  # noqa: F401,F403
from .ops import __all__  # noqa: F401
