"""test_pytest.py again, under the newest torch and transformers
(.ci/pyenv-new): the package's pytest suite where transformers 5 hands a
model a DynamicCache (as `cache=`, `past_key_values` being its deprecated
name) instead of tuples, picks sdpa attention by default and calls forward
otherwise from generate(), and where PyPI's torch does its GEMMs with MKL
(the cache hit that differs there is Mixtral's).  Skipped (exit 77,
ctest's SKIP_RETURN_CODE, and a line saying why) only when .ci/pyenv-new
cannot make that environment, e.g. without PyPI; a made environment that
lacks transformers 5, MKL or pytest fails."""
import os
import subprocess
import sys

SRC = os.environ["ULPPROF_SOURCE_DIR"]
made = subprocess.run(["bash", os.path.join(SRC, ".ci", "pyenv-new")], capture_output=True,
                      text=True)
exe = made.stdout.strip()
if made.returncode != 0 or not exe:
    print("SKIPPED: .ci/pyenv-new made no environment (exit %d): %s"
          % (made.returncode, made.stderr.strip()[-500:]))
    sys.exit(77)
probe = ("import pytest, torch, transformers; "
         "print(transformers.__version__.split('.')[0], torch.backends.mkl.is_available())")
got = subprocess.run([exe, "-c", probe], capture_output=True, text=True)
words = got.stdout.split()
if got.returncode != 0 or len(words) != 2 or not words[0].isdigit() or int(words[0]) < 5 \
        or words[1] != "True":
    print("FAIL: %s lacks pytest, transformers >= 5 or an MKL torch: %r %s"
          % (exe, got.stdout.strip(), got.stderr.strip()[-300:]))
    sys.exit(1)
test = os.path.join(os.path.dirname(os.path.abspath(__file__)), "test_pytest.py")
# ULPPROF_PYENV_REEXEC: that interpreter must have what the suite needs, not
# hand it on to .ci/pyenv's.
env = dict(os.environ, ULPPROF_PYENV_REEXEC="1", ULPPROF_PYTEST_TMP="pytest-tmp-new")
sys.exit(subprocess.run([exe, test] + sys.argv[1:], env=env).returncode)
