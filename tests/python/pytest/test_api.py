"""ulpprof.open, diff and ladder against ref.py's recomputation with h5py
and numpy; errors and warnings; the ctypes binding's struct sizes."""
import ctypes
import stat
import warnings

import h5py
import numpy as np
import pytest
import torch
import ulpprof
import ulpprof.torch
from hfmodels import model_of
from ulpprof import _lib

import ref


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("pair")
    model = model_of("qwen2")
    ids = torch.randint(0, 256, (1, 40), generator=torch.Generator().manual_seed(1))
    a, b = str(d / "miss.h5"), str(d / "hit.h5")
    with torch.no_grad():
        with ulpprof.torch.capture(model, a, label="miss", run={"cache": "miss"}):
            out = model(ids)
        with ulpprof.torch.capture(model, b, label="hit", run={"cache": "hit"}):
            past = model(ids[:, :32]).past_key_values
            model(ids[:, 32:], past_key_values=past)
    return a, b, out.logits


def test_open_lists_what_the_file_holds(pair):
    a, b, logits = pair
    s = ulpprof.open(b)
    assert (s.label, s.run, s.format_version) == ("hit", {"cache": "hit"}, 1)
    with h5py.File(b, "r") as f:
        keys = {(n, int(o)) for n in f["captures"] for o in f["captures"][n]}
        assert {(c.name, c.occurrence) for c in s.captures} == keys
        for c in s.captures:
            ds = f["captures"][c.name][str(c.occurrence)]
            assert c.shape == ds.shape and c.seq == int(ds.attrs["seq"])
            t = s.read(c.name, c.occurrence)
            if c.name == "input_ids":  # the token ids the helper records, as int64
                assert t.array.dtype == np.int64 and np.array_equal(t.array, ds[()])
            else:
                assert t.array.dtype == np.float32
                assert np.array_equal(t.array.view(np.uint32), ds[()].view(np.uint32))
            assert np.array_equal(t.positions, np.asarray(ds.attrs["positions"]))
    t = s["model.layers.0", 1]  # the suffix pass
    assert t.positions.tolist() == [list(range(32, 40))] and t.requests.tolist() == [[0] * 8]
    miss = ulpprof.open(a)["lm_head"]  # what the model returned, bit for bit
    assert np.array_equal(miss.array.view(np.uint32), logits.numpy().view(np.uint32))
    assert "lm_head" in s and list(s)[:2] == ["input_ids", "model.embed_tokens"]
    with pytest.raises(KeyError):
        s.read("lm_head", 7)


def test_diff_numbers_are_the_files(pair):
    a, b, _ = pair
    rep = ulpprof.diff(a, b)
    cmp, flips = ref.compare(a, b)
    assert (rep.a, rep.b, rep.label_a, rep.label_b) == (a, b, "miss", "hit")
    assert rep.identical == (ref.first_differing(cmp) is None)
    assert {r.name for r in rep.rows} == set(cmp)
    for r in rep.rows:
        assert (r.differing, r.max_ulp, r.positions_compared) == (
            cmp[r.name][0], cmp[r.name][1], cmp[r.name][3]), r.name
    fd = rep.first_divergence
    assert (fd.name if fd else None) == ref.first_differing(cmp)
    assert rep.argmax_flips == len(flips)
    lad = ulpprof.ladder([a, b])
    assert lad.rung("cache").verdict == ("holds" if rep.identical else "breaks")
    assert lad.rung(0).verdict == "untested" and lad.pairs[0].identical == rep.identical
    assert [r.label for r in lad.runs] == ["miss", "hit"]


def test_bad_file_is_snapshot_error(tmp_path):
    p = tmp_path / "x.h5"
    p.write_text("not hdf5")
    with pytest.raises(ulpprof.SnapshotError) as e:
        ulpprof.open(str(p))
    assert str(e.value) == "ulpprof: cannot open '%s': not an HDF5 file" % p
    with pytest.raises(ulpprof.SnapshotError, match="cannot open"):
        ulpprof.diff(str(p), str(p))


def fake(tmp_path, monkeypatch, script):
    exe = tmp_path / "ulpprof"
    exe.write_text("#!/bin/sh\n" + script)
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("ULPPROF_PROGRAM", str(exe))


def test_stderr_is_a_warning_and_exits_are_exceptions(tmp_path, monkeypatch):
    fake(tmp_path, monkeypatch, 'echo "ulpprof: warning: odd" >&2; echo "[]"; exit 0\n')
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with pytest.raises(ulpprof.SnapshotError):  # [] is not one snapshot
            ulpprof.open("a.h5")
    assert [str(x.message) for x in w] == ["ulpprof: warning: odd"]
    assert w[0].category is ulpprof.UlpprofWarning
    fake(tmp_path, monkeypatch, 'echo "ulpprof: cannot open \'a.h5\': gone" >&2; exit 2\n')
    with pytest.raises(ulpprof.SnapshotError) as e:
        ulpprof.diff("a.h5", "b.h5")
    assert str(e.value) == "ulpprof: cannot open 'a.h5': gone"
    fake(tmp_path, monkeypatch, "exit 3\n")
    with pytest.raises(ulpprof.ProgramError, match="exited 3"):
        ulpprof.ladder(["a.h5", "b.h5"])
    fake(tmp_path, monkeypatch, "echo '{'; exit 1\n")
    with pytest.raises(ulpprof.ProgramError, match="printed no JSON"):
        ulpprof.diff("a.h5", "b.h5")


def test_struct_sizes_come_from_the_library():
    lib = _lib.library()
    # The library's sizes; the package mirrors each struct whole, and a
    # newer library may extend it (reading the mirror by its struct_size).
    assert _lib._DESC_BYTES == lib.ulp_capture_desc_size() >= ctypes.sizeof(_lib._Desc)
    assert _lib._OPTIONS_BYTES == lib.ulp_session_options_size() >= ctypes.sizeof(_lib._Options)

    class Old:  # a library older than the package
        ulp_capture_desc_size = staticmethod(lambda: ctypes.sizeof(_lib._Desc) - 8)
        ulp_session_options_size = staticmethod(lambda: ctypes.sizeof(_lib._Options))

    with pytest.raises(OSError, match="older than the package"):
        _lib._check_sizes(Old(), "old.so")


def test_bf16_and_fp8_decode():
    bits = np.array([0x3F80, 0xC000, 0x0001, 0x7F80], np.uint16)
    want = torch.tensor(bits.astype(np.int16)).view(torch.bfloat16).float().numpy()
    assert np.array_equal(ulpprof.snapshot.decode(bits, "bf16"), want)
    # e4m3fn by hand: 0x38 = 1.0, 0x01 = 2^-9, 0xC0 = -2.0, 0x7E = 448, 0x7F NaN
    out = ulpprof.snapshot.decode(np.array([0x38, 0x01, 0xC0, 0x7E, 0x7F], np.uint8), "f8e4m3")
    assert out[:4].tolist() == [1.0, 2.0 ** -9, -2.0, 448.0] and np.isnan(out[4])
    out = ulpprof.snapshot.decode(np.array([0x3C, 0x7C, 0x01], np.uint8), "f8e5m2")
    assert out.tolist() == [1.0, float("inf"), 2.0 ** -16]
