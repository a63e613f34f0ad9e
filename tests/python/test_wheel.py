"""The pip package as a user gets it: `pip wheel` of the repository (once,
with the .ci/pyenv interpreter, which has the build backend), installed into
a fresh venv over Debian's /usr/bin/python3 (--system-site-packages: torch
1.13, numpy, h5py; transformers reached through a .pth to the .ci/pyenv
site-packages, so nothing is downloaded).  From a directory outside the
repository: samples/pytorch/hf_miss_hit.py writes miss.h5 and hit.h5 with the
installed package and its own capture library; the installed `ulpprof`
command lists and diffs them, imports .npy dumps, and `ulpprof record` tells
a child the package's library.  Checked against h5py reads of the files."""
import glob
import os
import subprocess
import sys
import tempfile

SRC = os.environ["ULPPROF_SOURCE_DIR"]
fails = []


def check(cond, msg):
    if not cond:
        fails.append(msg)


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kw)
    return p


py = run(["bash", os.path.join(SRC, ".ci", "pyenv")])
if py.returncode != 0:
    print("FAIL: .ci/pyenv: %s" % py.stderr.strip()[-500:])
    sys.exit(1)
pyenv = py.stdout.strip()
pyenv_site = run([pyenv, "-c", "import transformers, os; "
                  "print(os.path.dirname(os.path.dirname(transformers.__file__)))"]).stdout.strip()

with tempfile.TemporaryDirectory() as tmp:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("ULPPROF_") and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    p = run([pyenv, "-m", "pip", "wheel", SRC, "--no-build-isolation", "--no-deps", "-q",
             "--disable-pip-version-check", "-w", os.path.join(tmp, "dist"),
             "--config-settings=build-dir=" + os.path.join(tmp, "build")], env=env)
    wheels = glob.glob(os.path.join(tmp, "dist", "ulpprof-*.whl"))
    if p.returncode != 0 or len(wheels) != 1:
        print("FAIL: pip wheel: exit %d %s" % (p.returncode, p.stderr[-2000:]))
        sys.exit(1)
    venv = os.path.join(tmp, "venv")
    p = run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv])
    check(p.returncode == 0, "venv: %s" % p.stderr)
    vpy = os.path.join(venv, "bin", "python")
    site = run([vpy, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout
    with open(os.path.join(site.strip(), "ulpprof-test-pyenv.pth"), "w") as f:
        f.write(pyenv_site + "\n")
    p = run([vpy, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
             "--disable-pip-version-check", wheels[0]], env=env)
    check(p.returncode == 0, "pip install: %s" % p.stderr[-2000:])
    ulpprof = os.path.join(venv, "bin", "ulpprof")
    work = os.path.join(tmp, "work")
    os.makedirs(work)

    p = run([ulpprof, "--version"], env=env, cwd=work)
    check(p.returncode == 0 and p.stdout.startswith("ulpprof "), "--version: %r" % p.stdout)
    p = run([vpy, os.path.join(SRC, "samples", "pytorch", "hf_miss_hit.py")], env=env, cwd=work)
    check(p.returncode == 0 and p.stderr == "", "hf_miss_hit.py: %d %s" % (p.returncode, p.stderr))
    p = run([vpy, "-c", "import ulpprof.torch, ulpprof._lib as l, torch; l.library(); "
             "print(l.library_path()); print(ulpprof.__file__)"], env=env, cwd=work)
    lines = p.stdout.split()
    check(p.returncode == 0 and len(lines) == 2 and lines[0].startswith(site.strip())
          and lines[1].startswith(site.strip()),
          "package and library not from the venv: %r %s" % (p.stdout, p.stderr))
    # The compiled hook (capture/torch/hook.c) comes with the wheel and serves
    # the installed package's hooks: all but the logits' (17 of 18 here).
    p = run([vpy, "-c", "import sys; sys.path.insert(0, %r)\n"
             "import tiny_model, ulpprof.torch as ut, ulpprof._hookmod as hm\n"
             "model, ids = tiny_model.make(1, tokens=4, layers=2)\n"
             "with ut.capture(model, 'hooked.h5'):\n"
             "    hooks = [h for m in model.modules() for h in m._forward_hooks.values()]\n"
             "    print(hm.module().__file__, sum(type(h).__name__ == 'Hook' for h in hooks),"
             " len(hooks))" % os.path.join(SRC, "samples", "pytorch")], env=env, cwd=work)
    lines = p.stdout.split()
    check(p.returncode == 0 and len(lines) == 3 and lines[0].startswith(site.strip())
          and lines[0].endswith("_torch_hook.abi3.so") and int(lines[2]) > 1
          and int(lines[1]) == int(lines[2]) - 1,
          "compiled hook not in the wheel: %r %s" % (p.stdout, p.stderr))
    p = run([ulpprof, "ls", "miss.h5", "hit.h5"], env=env, cwd=work)
    check(p.returncode == 0 and "model.layers.3.mlp" in p.stdout, "ls: %s" % p.stderr)
    p = run([ulpprof, "diff", "-f", "json", "miss.h5", "hit.h5"], env=env, cwd=work)
    check(p.returncode in (0, 1), "diff: exit %d %s" % (p.returncode, p.stderr))
    v = run([vpy, "-c", "import h5py, json, sys\n"
             "f = h5py.File('hit.h5', 'r')\n"
             "c = f['captures']\n"
             "print(json.dumps([sorted(c), c['model.layers.3']['1'].attrs['positions'].tolist(),"
             " f['run'].attrs['cache'].decode()]))"], env=env, cwd=work)
    import json
    got = json.loads(v.stdout) if v.returncode == 0 else None
    names = sorted(["input_ids", "model.embed_tokens", "model.norm", "lm_head"] +
                   ["model.layers.%d%s" % (i, x) for i in range(4) for x in ("", ".self_attn",
                                                                              ".mlp")])
    check(got == [names, [list(range(32, 40))], "hit"], "hit.h5: %s %s" % (got, v.stderr))

    # ulpprof import through the console command.
    os.makedirs(os.path.join(work, "dumps"))
    run([vpy, "-c", "import numpy as np; np.save('dumps/x.npy', np.arange(6.0))"], cwd=work)
    p = run([ulpprof, "import", "-o", "x.h5", "dumps"], env=env, cwd=work)
    check(p.returncode == 0 and "1 captures" in p.stdout, "import: %s %s" % (p.stdout, p.stderr))
    # record gives the child the package's own capture library.
    p = run([ulpprof, "record", "--allow-empty", "--no-cuda", "-o", "r.h5", "--", vpy, "-c",
             "import os; print(os.environ['ULPPROF_CAPTURE_LIBRARY'])"], env=env, cwd=work)
    check(p.returncode == 0 and p.stdout.strip().startswith(site.strip()),
          "record: %r %s" % (p.stdout, p.stderr))

for f in fails:
    print("FAIL:", f)
if not fails:
    print("test_wheel: all passed")
sys.exit(1 if fails else 0)
