"""test_hf_invariance.py again, under the newest torch and transformers
(.ci/pyenv-new): transformers 5 calls a model otherwise than 4.44 does
(generate() passes position_ids only to a forward whose signature names
them), so a run under capture must be checked to be the run without it on
both lines.  Skipped (exit 77, ctest's SKIP_RETURN_CODE, and a line saying
why) only when .ci/pyenv-new cannot make that environment, e.g. without
PyPI; a made environment that lacks transformers 5 fails."""
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
ver = subprocess.run([exe, "-c", "import transformers; print(transformers.__version__)"],
                     capture_output=True, text=True)
if ver.returncode != 0 or not ver.stdout.strip().split(".")[0].isdigit() \
        or int(ver.stdout.strip().split(".")[0]) < 5:
    print("FAIL: %s has no transformers >= 5: %r %s" % (exe, ver.stdout.strip(),
                                                        ver.stderr.strip()[-300:]))
    sys.exit(1)
test = os.path.join(os.path.dirname(os.path.abspath(__file__)), "test_hf_invariance.py")
# ULPPROF_PYENV_REEXEC: that interpreter must have what the test needs, not
# hand it on to .ci/pyenv's.
env = dict(os.environ, ULPPROF_PYENV_REEXEC="1")
sys.exit(subprocess.run([exe, test], env=env).returncode)
