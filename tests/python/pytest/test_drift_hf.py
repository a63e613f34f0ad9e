"""What transformers 5 changed in how a model is called, under
assert_invariant (the same tests run on transformers 4.44): the cache as an
object (the DynamicCache a call returns, one made by the caller, passed as
`cache=` where transformers 5 names it so, instead of 4.44's tuples),
attention implementations (eager, sdpa), and generate() with and without
its cache.  Each verdict is checked against ref.py's comparison of the
files, and the hit's token positions against the file's attributes."""
import h5py
import numpy as np
import pytest
import torch
import transformers
from hfmodels import ATTNS, TRANSFORMERS_MAJOR, hit_differs, model_of
from ulpprof.testing import InvariantError, assert_invariant

import ref

PROMPT = torch.randint(0, 256, (1, 40), generator=torch.Generator().manual_seed(1))


def verdict(model, runs, tmp_path, prefix_hit=True):
    """assert_invariant's verdict (rung cache) on `runs`, checked against the
    files: it fails iff ref.py finds a shared row that differs, and must for
    a prefix hit where hit_differs says so.  Returns (ref's comparison, the
    error or None)."""
    try:
        assert_invariant(model, runs, rung="cache", directory=str(tmp_path))
        err = None
    except InvariantError as e:
        err = e
    paths = sorted(str(p) for p in tmp_path.glob("*.h5"))
    cmp, _ = ref.compare(*paths)
    assert cmp and all(v[3] > 0 for v in cmp.values())
    first = ref.first_differing(cmp)
    if prefix_hit and hit_differs(model.config.model_type):
        assert first is not None, "this %s hit was expected to differ" % model.config.model_type
    assert (err is None) == (first is None), str(err)
    if err is not None:
        assert "differs from" in str(err) and err.reports[list(runs)[1]].first_divergence.name \
            == first
    return cmp, err


def positions(path, name="lm_head"):
    """The positions of each occurrence of `name`, read with h5py."""
    with h5py.File(path, "r") as f:
        g = f["captures"][name]
        return [np.asarray(g[o].attrs["positions"]).reshape(-1).tolist()
                for o in sorted(g, key=int)]


def suffix_over(model, cache, keyword):
    out = model(PROMPT[:, :32], use_cache=True, **{keyword: cache})
    model(PROMPT[:, 32:], **{keyword: out.past_key_values})


@pytest.mark.parametrize("arch", ["llama", "mixtral"])
@pytest.mark.parametrize("how", ["returned", "made", "cache="])
def test_cache_objects(arch, how, tmp_path):
    if how == "cache=" and TRANSFORMERS_MAJOR < 5:
        pytest.skip("transformers %s has no `cache=` argument" % transformers.__version__)
    model = model_of(arch)
    keyword = "cache" if how == "cache=" else "past_key_values"
    made = transformers.DynamicCache() if how != "returned" else None

    def hit():
        suffix_over(model, made, keyword)

    with torch.no_grad():
        kind = type(model(PROMPT[:, :2]).past_key_values).__name__
        verdict(model, {"miss": lambda: model(PROMPT), "hit": hit}, tmp_path)
    # transformers 5 returns a DynamicCache, 4.44 the tuples it was given none of.
    assert kind == ("DynamicCache" if TRANSFORMERS_MAJOR >= 5 else "tuple")
    assert positions(str(tmp_path / "01-hit.h5")) == [list(range(32)), list(range(32, 40))]


@pytest.mark.parametrize("arch", ["llama", "mixtral"])
@pytest.mark.parametrize("attn", ATTNS)
def test_attention_implementations(arch, attn, tmp_path):
    try:
        model = model_of(arch, attn)
    except ImportError as e:  # transformers 4.44's sdpa wants torch >= 2.1.1
        if int(torch.__version__.split(".")[0]) >= 2:
            raise
        pytest.skip("%s with torch %s: %s" % (attn, torch.__version__, e))
    assert model.config._attn_implementation == attn
    with torch.no_grad():
        past = lambda: model(PROMPT[:, :32]).past_key_values  # noqa: E731
        verdict(model, {"miss": lambda: model(PROMPT),
                        "hit": lambda: model(PROMPT[:, 32:], past_key_values=past())}, tmp_path)


def generate(model, use_cache):
    return lambda: model.generate(PROMPT, attention_mask=torch.ones_like(PROMPT), do_sample=False,
                                  max_new_tokens=3, use_cache=use_cache, pad_token_id=0)


@pytest.mark.parametrize("arch", ["gpt2", "mixtral"])
def test_generate_with_and_without_its_cache(arch, tmp_path):
    model = model_of(arch)
    with torch.no_grad():
        # Decode steps of one row against recomputations: no expectation
        # of either verdict, only that it is the files'.
        cmp, _ = verdict(model, {"miss": generate(model, False), "hit": generate(model, True)},
                         tmp_path, prefix_hit=False)
    layer0 = "transformer.h.0" if arch == "gpt2" else "model.layers.0"
    hit, miss = str(tmp_path / "01-hit.h5"), str(tmp_path / "00-miss.h5")
    # The hit: the prompt, then one decode step per new token but the last.
    assert positions(hit, layer0) == [list(range(40)), [40], [41]]
    # The miss recomputes the prompt each step; the first computation of
    # each position is paired: 42 positions.
    assert positions(miss, layer0) == [list(range(n)) for n in (40, 41, 42)]
    assert cmp[layer0][3] == 42
    # transformers 5's generate() asks for the last position's logits only
    # (logits_to_keep); the capture files that row under its own position.
    if TRANSFORMERS_MAJOR >= 5:
        assert positions(hit) == positions(miss) == [[39], [40], [41]]
        assert cmp["lm_head"][3] == 3
    # Without its cache both runs recompute everything: refused, not passed.
    with pytest.raises(InvariantError, match="'hit' took nothing from its cache"):
        with torch.no_grad():
            assert_invariant(model, {"miss": generate(model, False), "hit": generate(model, False)},
                             rung="cache", directory=str(tmp_path / "never"))


def test_mixtral_hit_differs_without_capture():
    """The divergence the suite expects of Mixtral is the model's, not the
    capture's: plain torch, no ulpprof, the hit's logits against the miss's."""
    if not hit_differs("mixtral"):
        pytest.skip("no divergence is expected of Mixtral with this BLAS")
    model = model_of("mixtral")
    with torch.no_grad():
        miss = model(PROMPT).logits[:, 32:]
        hit = model(PROMPT[:, 32:], past_key_values=model(PROMPT[:, :32]).past_key_values).logits
        again = model(PROMPT).logits[:, 32:]
    assert torch.equal(miss, again)
    assert not torch.equal(miss, hit)
