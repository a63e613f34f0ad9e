"""ulpprof.testing.assert_invariant on GPT-2, Llama, Qwen2 and Mixtral: a
prefix-cache miss/hit pair fails with the first divergence, its origin and
the flips in the message (where hfmodels.hit_differs says the hit differs:
every architecture under Debian's OpenBLAS pinned to Haswell, the mixture
of experts under PyPI's MKL pinned to AVX2); a
repeat passes; a "hit" that never hit, a "batch" of one request and a run
that captures nothing are refused.  Each verdict is checked against
ref.py's recomputation from the files."""
import pytest
from hfmodels import hit_differs
from ulpprof.testing import InvariantError, assert_invariant

import ref


def miss(model, prompt):
    return lambda: model(prompt)


def hit(model, prompt):
    def run():
        past = model(prompt[:, :32]).past_key_values  # the prefix, cached
        model(prompt[:, 32:], past_key_values=past)  # the 8 new tokens over it
    return run


def files(tmp_path):
    return sorted(str(p) for p in tmp_path.glob("*.h5"))


def test_cache_hit_matches_its_files(model, prompt, tmp_path):
    runs = {"miss": miss(model, prompt), "hit": hit(model, prompt)}
    try:
        reports = assert_invariant(model, runs, rung="cache", directory=str(tmp_path))
        err = None
    except InvariantError as e:
        err = e
    cmp, flips = ref.compare(*files(tmp_path))
    first = ref.first_differing(cmp)
    assert all(v[3] > 0 for v in cmp.values()) and cmp
    if hit_differs(model.config.model_type):
        assert first is not None, "this %s miss and hit were expected to differ" % (
            model.config.model_type)
    if first is None:  # passed: then every shared row is bitwise equal
        assert err is None and reports["hit"].identical
        return
    assert err is not None, "passed although %s differs" % first
    msg = str(err)
    rep = err.reports["hit"]
    assert "'hit' differs from 'miss' (rung cache breaks)" in msg
    assert rep.first_divergence.name == first
    assert "first divergence: " + rep.first_divergence.text in msg
    assert "origin: introduced" in msg  # every position of both passes was captured
    assert "argmax flips: %d of 40 logits rows" % len(flips) in msg
    assert rep.argmax_flips == len(flips)
    assert {(f.argmax_a, f.argmax_b) for f in rep.flips} == set(flips.values())
    for row in rep.rows:
        if row.name in cmp:
            assert (row.differing, row.max_ulp) == cmp[row.name][:2], row.name
            assert row.positions_compared == cmp[row.name][3]


def test_repeat_passes(model, prompt, tmp_path):
    runs = {"first": miss(model, prompt), "again": miss(model, prompt)}
    reports = assert_invariant(model, runs, rung="repeat", directory=str(tmp_path))
    cmp, _ = ref.compare(*files(tmp_path))
    assert cmp and all(v[0] == 0 and v[3] == 40 for v in cmp.values())
    assert reports["again"].identical and reports["again"].compared == len(cmp)


def test_hit_that_never_hit_is_refused(model, prompt, tmp_path):
    # A fresh cache per call: the "hit" recomputes all 40 positions.
    runs = {"miss": miss(model, prompt), "hit": miss(model, prompt)}
    with pytest.raises(InvariantError, match="'hit' took nothing from its cache"):
        assert_invariant(model, runs, rung="cache", directory=str(tmp_path))


def test_hit_recomputing_the_prefix_in_its_last_pass_is_refused(model, prompt, tmp_path):
    def warm_then_full():
        model(prompt[:, :32])
        model(prompt)  # a fresh cache: starts over at position 0
    runs = {"miss": miss(model, prompt), "hit": warm_then_full}
    with pytest.raises(InvariantError, match="took nothing from its cache"):
        assert_invariant(model, runs, rung="cache", directory=str(tmp_path))


def test_batch_of_one_is_refused(model, prompt, tmp_path):
    runs = {"bs1": miss(model, prompt), "bs4": miss(model, prompt)}
    with pytest.raises(InvariantError, match="'bs4' held one request in every capture"):
        assert_invariant(model, runs, rung="batch", directory=str(tmp_path))


def test_batch_of_four_is_compared(model, prompt, tmp_path):
    runs = {"bs1": miss(model, prompt), "bs4": miss(model, prompt.repeat(4, 1))}
    try:
        assert_invariant(model, runs, rung="batch", directory=str(tmp_path))
        err = None
    except InvariantError as e:
        err = e
    cmp, _ = ref.compare(*files(tmp_path))
    assert cmp and all(v[3] == 40 for v in cmp.values())  # request 0's 40 positions
    first = ref.first_differing(cmp)
    assert (err is None) == (first is None), str(err)
    if err is not None:
        assert "'bs4' differs from 'bs1' (rung batch size breaks)" in str(err)
        assert err.reports["bs4"].first_divergence.name == first


def test_nothing_compared_is_refused(model, prompt, tmp_path):
    with pytest.raises(InvariantError, match="nothing compared: `runs` holds 1"):
        assert_invariant(model, {"only": miss(model, prompt)}, directory=str(tmp_path))
    with pytest.raises(InvariantError, match="nothing compared: 'b' captured nothing"):
        assert_invariant(model, {"a": miss(model, prompt), "b": lambda: None},
                         directory=str(tmp_path / "x"))


def test_temporary_directory_removed_on_pass_kept_on_failure(model, prompt):
    import os
    import re
    assert_invariant(model, {"a": miss(model, prompt), "b": miss(model, prompt)})
    with pytest.raises(InvariantError) as e:
        assert_invariant(model, {"miss": miss(model, prompt), "hit": miss(model, prompt)},
                         rung="cache")
    where = re.search(r"snapshots: (\S+)", str(e.value)).group(1)
    assert os.path.isdir(where) and e.value.directory == where
    assert sorted(os.listdir(where)) == ["00-miss.h5", "01-hit.h5"]
