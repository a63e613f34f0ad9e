"""The Python package's own suite, tests/python/pytest, under pytest: the
API (ulpprof.open, diff, ladder), ulpprof.testing and its pytest plugin,
the HF cases over GPT-2, Llama, Qwen2 and Mixtral.  Runs pytest under the
.ci/pyenv interpreter (transformers 4.44, pytest; test_pytest_new.py runs
this under .ci/pyenv-new's) with the build tree's program and capture
library, and OPENBLAS_CORETYPE=Haswell when the CPU has AVX2 (the
cache-hit divergence the suite expects of Debian's OpenBLAS; PyPI's torch
does its GEMMs with MKL, where the suite expects Mixtral's hit to differ)."""
import os
import subprocess
import sys

SRC = os.environ.get("ULPPROF_SOURCE_DIR", os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
BUILD = os.environ.get("ULPPROF_BUILD_DIR", os.path.join(SRC, "build"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyenv_reexec  # noqa: E402

pyenv_reexec.unless("transformers", "pytest")


def avx2():
    try:
        with open("/proc/cpuinfo") as f:
            return " avx2 " in f.read().replace("\n", " ")
    except OSError:
        return False


env = dict(os.environ, ULPPROF_SOURCE_DIR=SRC, ULPPROF_PROGRAM=os.path.join(
    BUILD, "programs", "ulpprof"), ULPPROF_CAPTURE_LIBRARY=os.path.join(
    BUILD, "capture", "libulpprof_capture.so"), OMP_NUM_THREADS="1",
    PYTHONPATH=os.pathsep.join([os.path.join(SRC, "python")] + [
        p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
if "OPENBLAS_CORETYPE" not in os.environ and avx2():
    env["OPENBLAS_CORETYPE"] = "Haswell"
# Each interpreter its own scratch tree: ctest -j runs both suites at once.
base = os.path.join(BUILD, "tests", os.environ.get("ULPPROF_PYTEST_TMP", "pytest-tmp"))
cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
       "ulpprof.pytest_plugin", "--basetemp", base, os.path.join(SRC, "tests", "python",
                                                                  "pytest")] + sys.argv[1:]
sys.exit(subprocess.run(cmd, env=env).returncode)
