"""Runs the `ulpprof` program and reads its JSON: the one way the Python API
gets at the C analyzer (docs/python.md says why)."""
import json
import os
import shutil
import subprocess
import warnings
from typing import Any, List, Optional, Sequence, Tuple

__all__ = ["UlpprofError", "SnapshotError", "ProgramError", "UlpprofWarning", "program", "run_json"]


class UlpprofError(Exception):
    """Base class of the errors the ulpprof Python API raises."""


class SnapshotError(UlpprofError):
    """A snapshot (or another input) cannot be used: the program exited 2.
    str() is the program's one-line message, e.g. "ulpprof: cannot open
    'x.h5': not an HDF5 file"."""

    def __init__(self, message: str, argv: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.argv = list(argv)


class ProgramError(UlpprofError):
    """The `ulpprof` program was not found, crashed, or printed what is not
    the documented JSON."""


class UlpprofWarning(UserWarning):
    """A warning the program printed on stderr (exit 0 or 1)."""


def program() -> str:
    """The `ulpprof` program the API runs: $ULPPROF_PROGRAM, else the one
    shipped in this package (ulpprof.binary()), else `ulpprof` on PATH."""
    env = os.environ.get("ULPPROF_PROGRAM")
    if env:
        return env
    from . import binary

    exe = binary()
    if exe is None:
        exe = shutil.which("ulpprof")
    if exe is None:
        raise ProgramError("the ulpprof program is not in this package nor on PATH; "
                           "set ULPPROF_PROGRAM to its path")
    return exe


def _stderr_lines(text: str) -> List[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


def run_json(args: Sequence[str], ok: Tuple[int, ...] = (0,)) -> Tuple[Any, int]:
    """Runs `ulpprof ARGS` and returns (parsed stdout, exit status).  Exit 2
    raises SnapshotError with the program's message; stderr lines of a run
    that succeeded become UlpprofWarning warnings."""
    out, rc, argv = _run(args, ok)
    try:
        doc = json.loads(out.decode("utf-8", "surrogateescape"))
    except ValueError as e:
        raise ProgramError("%s printed no JSON: %s" % (" ".join(argv), e)) from None
    return doc, rc


def run_text(args: Sequence[str], ok: Tuple[int, ...] = (0,)) -> Tuple[str, int]:
    """As run_json, for a command that prints text: (stdout, exit status)."""
    out, rc, _ = _run(args, ok)
    return out.decode("utf-8", "surrogateescape"), rc


def _run(args: Sequence[str], ok: Tuple[int, ...]) -> Tuple[bytes, int, List[str]]:
    argv = [program()] + [os.fspath(a) for a in args]
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as e:
        raise ProgramError("cannot run %s: %s" % (argv[0], e.strerror)) from None
    err = p.stderr.decode("utf-8", "replace")
    lines = _stderr_lines(err)
    if p.returncode == 2:
        raise SnapshotError(lines[0] if len(lines) == 1 else "; ".join(lines) or
                            "%s exited 2 without a message" % argv[0], argv)
    if p.returncode not in ok:
        raise ProgramError("%s exited %d: %s" % (" ".join(argv), p.returncode,
                                                 "; ".join(lines[-3:]) or "no message"))
    for ln in lines:
        warnings.warn(ln, UlpprofWarning, stacklevel=4)
    return p.stdout, p.returncode, argv


def opt_str(v: Optional[Any]) -> Optional[str]:
    return None if v is None else str(v)
