"""The `ulpprof` console command of the pip package: `ulpprof import` runs
here (ulpprof._import); every other command is the C program shipped in the
package (ulpprof/bin/ulpprof), which this process becomes (exec)."""
import os
import sys


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "import":
        from . import _import

        return _import.main(argv[1:])
    from . import binary

    exe = binary()
    if exe is None:
        print("ulpprof: the ulpprof program is not in this package (%s); install the "
              "package with pip, or run the build tree's programs/ulpprof"
              % os.path.dirname(os.path.abspath(__file__)), file=sys.stderr)
        return 2
    os.execv(exe, [exe] + list(argv))
    return 2  # not reached


if __name__ == "__main__":
    sys.exit(main())
