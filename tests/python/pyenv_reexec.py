"""Runs the calling test under the .ci/pyenv interpreter when this one lacks
a module it needs (Debian's /usr/bin/python3 has torch 1.13, numpy and h5py
but not transformers or safetensors).

    import pyenv_reexec
    pyenv_reexec.unless("transformers")    # returns only when importable

When .ci/pyenv cannot make the interpreter, the test fails (exit 1): a test
that cannot run its checks must not pass.  unless(..., skip=True) exits 77
instead (ctest's skip) for a test of an optional dependency (Ray)."""
import importlib
import os
import subprocess
import sys

SRC = os.environ.get("ULPPROF_SOURCE_DIR", os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))


def unless(*modules, skip=False):
    try:
        for m in modules:
            importlib.import_module(m)
        return
    except ImportError:
        pass
    py = subprocess.run(["bash", os.path.join(SRC, ".ci", "pyenv")], capture_output=True,
                        text=True)
    word, code = ("SKIP", 77) if skip else ("FAIL", 1)
    if py.returncode != 0 or not py.stdout.strip():
        print("%s: .ci/pyenv made no interpreter with %s: %s"
              % (word, ", ".join(modules), py.stderr.strip()[-500:]))
        sys.exit(code)
    exe = py.stdout.strip()
    # Once only: the venv's interpreter links to this one, so names cannot tell them apart.
    if os.environ.get("ULPPROF_PYENV_REEXEC"):
        print("%s: %s lacks %s although .ci/pyenv made it" % (word, exe, ", ".join(modules)))
        sys.exit(code)
    os.environ["ULPPROF_PYENV_REEXEC"] = "1"
    os.execv(exe, [exe] + sys.argv)
