"""ulpprof: where does the ULP come from, and how does it grow?

    import ulpprof.torch                    # capture a PyTorch model's layers
    ulpprof.torch.capture(model, "miss.h5", label="miss", run={"cache": "miss"})

The `ulpprof` command (diff, ls, plot, record, import, ...) comes with the
package; `ulpprof.binary()` is the path of the program itself.
"""
import os

__version__ = "0.1.0"
__all__ = ["binary", "__version__"]


def binary():
    """The path of the `ulpprof` program shipped in this package (None when
    the package was not installed with it, e.g. run from a source tree)."""
    p = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "ulpprof")
    return p if os.path.exists(p) else None
