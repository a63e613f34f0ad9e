"""ulpprof: where does the ULP come from, and how does it grow?

    import ulpprof.torch                    # capture a PyTorch model's layers
    ulpprof.torch.capture(model, "miss.h5", label="miss", run={"cache": "miss"})

    snap = ulpprof.open("miss.h5")          # its runs and captures, numpy arrays
    report = ulpprof.diff("miss.h5", "hit.h5")     # Report: rows, first divergence
    ladder = ulpprof.ladder(["a.h5", "b.h5"])      # Ladder: each rung's verdict

    from ulpprof.testing import assert_invariant   # a determinism test

The `ulpprof` command (diff, ls, plot, record, import, ...) comes with the
package; `ulpprof.binary()` is the path of the program itself.  docs/python.md
is the reference.
"""
import os
from typing import Optional

from ._program import ProgramError, SnapshotError, UlpprofError, UlpprofWarning
from .report import Ladder, Report, diff, ladder
from .snapshot import CaptureInfo, Snapshot, Tensor
from .snapshot import open_snapshot as open

__version__ = "0.2.0"
__all__ = ["binary", "open", "diff", "ladder", "Snapshot", "CaptureInfo", "Tensor", "Report",
           "Ladder", "UlpprofError", "SnapshotError", "ProgramError", "UlpprofWarning",
           "__version__"]


def binary() -> Optional[str]:
    """The path of the `ulpprof` program shipped in this package (None when
    the package was not installed with it, e.g. run from a source tree)."""
    p = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "ulpprof")
    return p if os.path.exists(p) else None
