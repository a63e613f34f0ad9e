"""`ulpprof diff` of files of many small captures gives numpy's
numbers whatever the threads, the chunk size and the way of reading.

Small captures are compared in groups that lie within one read-ahead
window of each file (analyzer/diff_jobs.c, snapshot_window.c); past a few
thousand captures the writer may place their data at odd offsets, which
the window copies out rather than load misaligned.  The pair: 3,000
captures of bf16[256] from capture_loop under the first name count from
98 on whose layout puts the last 10 at odd offsets (where they fall moves
with the writer's file layout: 98 names did it for one layout, 99 for the
one before; some counts put none there), B with one bit flipped in each
of those 10.  Every run must print
the same rows, and those must be numpy's (tests/perf/diff_numpy.py,
checked by check_numpy.py).
"""
import os
import shutil
import subprocess
import sys
import tempfile

import h5py

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import diff_runs  # noqa: E402

BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
ULPPROF = os.environ.get("ULPPROF") or os.path.join(BUILD, "programs", "ulpprof")
LOOP = os.path.join(BUILD, "tests", "reliability", "capture_loop")
COUNT, FLIP = 3000, 2990


def odd_offsets(path):
    """Seqs of the captures whose data starts at an odd byte of the file."""
    out = []
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset) and name.startswith("captures/"):
                off = obj.id.get_offset()
                if off is not None and off % 2:
                    out.append(int(obj.attrs["seq"]))
        f.visititems(visit)
    return sorted(out)


def main():
    tmp = tempfile.mkdtemp(prefix="ulpdiff-many-")
    try:
        pa, pb = os.path.join(tmp, "a.h5"), os.path.join(tmp, "b.h5")

        def write(path, names, extra):
            subprocess.run([LOOP, "--out", path, "--count", str(COUNT), "--elements", "256",
                            "--names", str(names)] + extra, check=True,
                           stdout=subprocess.DEVNULL)

        for names in range(98, 130):
            write(pb, names, ["--flip-from", str(FLIP)])
            odd = odd_offsets(pb)
            if all(s in odd for s in range(FLIP, COUNT)):
                break
        else:
            print("FAIL: no name count in 98..129 puts the last captures at odd offsets")
            return 1
        write(pa, names, [])
        runs = {"default": [], "j1": ["-j", "1"], "j3": ["-j", "3"],
                "j2-100": ["-j", "2", "--chunk-elements", "100"]}
        runs = {"%s-%s" % (tag, way): (args, way) for tag, args in runs.items()
                for way in ("map", "copy")}
        reports = diff_runs.json_reports(ULPPROF, runs, pa, pb, tmp)
        if reports is None:
            return 1
        reports = {tag: rep["rows"] for tag, rep in reports.items()}
        fails = [t for t in runs if reports[t] != reports["default-map"]]
        if fails:
            print("FAIL: rows differ from the default mapped run's in", fails)
            return 1
        rows = reports["default-map"]
        bad = [r for r in rows if r["status"] != "identical"]
        if len(rows) != COUNT or [r["seq"] for r in bad] != list(range(FLIP, COUNT)) or \
                any(r["differing"] != 1 or r["max_ulp"] != 1 for r in bad):
            print("FAIL: not the pair written: %d rows, %d differ" % (len(rows), len(bad)))
            return 1
        if not diff_runs.agrees(pa, pb, os.path.join(tmp, "default-map.json"), tmp):
            return 1
        print("ok: %d runs agree with each other and with numpy on %d captures (%d at odd "
              "offsets, %d names)" % (len(runs), len(rows), len(odd), names))
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
