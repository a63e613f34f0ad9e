"""`python -m ulpprof ...` is the `ulpprof` command (ulpprof._cli)."""
import sys

from ._cli import main

sys.exit(main())
