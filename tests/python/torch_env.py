"""What the ulpprof.torch tests share (test_torch_paused, test_torch_quick,
test_torch_step): torch, or exit 77 saying why; the build's capture
library; the package and samples/pytorch (tiny_model) on the path.  Not a
test itself."""
import os
import sys


def setup(test):
    """torch, with the environment the ulpprof.torch test `test` needs."""
    try:
        import torch
    except ImportError:
        print("SKIPPED: %s needs torch (apt-get install python3-torch)" % test)
        sys.exit(77)
    build, src = os.environ["ULPPROF_BUILD_DIR"], os.environ["ULPPROF_SOURCE_DIR"]
    os.environ["ULPPROF_CAPTURE_LIBRARY"] = os.path.join(build, "capture",
                                                         "libulpprof_capture.so")
    sys.path.insert(0, os.path.join(src, "python"))
    sys.path.insert(0, os.path.join(src, "samples", "pytorch"))
    return torch
