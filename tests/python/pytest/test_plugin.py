"""The five-line user test, run by pytest through the plugin (the way a user
runs it): it fails on a miss/hit pair that differs (Qwen2 under Debian's
OpenBLAS, Mixtral under PyPI's MKL: hfmodels.DIVERGING) with the first
divergence in its message and the report attached, passes on a repeat, and
refuses to pass when the "hit" never hit."""
import os
import re
import shutil

import pytest
from hfmodels import DIVERGING, hit_differs

import ref

pytest_plugins = ["pytester"]

FIVE_LINES = '''
from ulpprof.testing import assert_invariant

def test_prefix_cache(model, prompt):
    hit = lambda: model(prompt[:, 32:], past_key_values=model(prompt[:, :32]).past_key_values)
    assert_invariant(model, {"miss": lambda: model(prompt), "hit": hit}, rung="cache")
'''
CONFTEST = '''
import sys
sys.path.insert(0, %r)
from hfmodels import model, prompt  # noqa: F401  the suite's small models
''' % os.path.dirname(os.path.abspath(__file__))


def run(pytester, body):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_user=body)
    return pytester.runpytest("-p", "ulpprof.pytest_plugin", "-q", "-k", DIVERGING)


@pytest.mark.skipif(not hit_differs(DIVERGING), reason="the hit is known to differ only under "
                    "OPENBLAS_CORETYPE=Haswell (OpenBLAS) or with MKL")
def test_five_lines_fail_on_a_miss_hit_pair(pytester):
    r = run(pytester, FIVE_LINES)
    r.assert_outcomes(failed=1)
    out = r.stdout.str()
    assert "AssertionError: 'hit' differs from 'miss' (rung cache breaks)" in out \
        or "InvariantError: 'hit' differs from 'miss' (rung cache breaks)" in out
    # The first divergence is the one ref.py finds in the files the message names.
    where = re.findall(r"^E +snapshots: (\S+)$", out, re.M)[-1]
    cmp, flips = ref.compare(os.path.join(where, "00-miss.h5"), os.path.join(where, "01-hit.h5"))
    first = ref.first_differing(cmp)
    assert first is not None, "the message says differs, the files do not"
    assert re.search(r"first divergence: .* at (layer \d+ )?%s, " % re.escape(first), out), first
    assert "argmax flips: %d of 40 logits rows" % len(flips) in out
    assert "origin: introduced" in out and "argmax flips: " in out
    assert "ulpprof report" in out  # the plugin's section
    shutil.rmtree(where)  # kept by the failing assertion


def test_five_lines_pass_on_a_repeat(pytester):
    body = FIVE_LINES.replace('rung="cache"', 'rung="repeat"').replace(
        '"hit": hit', '"again": lambda: model(prompt)')
    run(pytester, body).assert_outcomes(passed=1)


def test_five_lines_refuse_a_hit_that_never_hit(pytester):
    body = FIVE_LINES.replace('"hit": hit', '"hit": lambda: model(prompt)')
    r = run(pytester, body)
    r.assert_outcomes(failed=1)
    assert "'hit' took nothing from its cache" in r.stdout.str()


def test_fixtures(pytester):
    pytester.makepyfile(test_fx='''
def test_dirs(ulpprof_snapshots, assert_invariant):
    assert ulpprof_snapshots.is_dir() and ulpprof_snapshots.name == "ulpprof"
    assert assert_invariant.keywords["directory"] == str(ulpprof_snapshots)
''')
    pytester.runpytest("-p", "ulpprof.pytest_plugin", "-q").assert_outcomes(passed=1)


def test_entry_point_declared():
    import tomllib

    src = os.environ["ULPPROF_SOURCE_DIR"]
    with open(os.path.join(src, "pyproject.toml"), "rb") as f:
        proj = tomllib.load(f)["project"]
    assert proj["entry-points"]["pytest11"] == {"ulpprof": "ulpprof.pytest_plugin"}
