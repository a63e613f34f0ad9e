"""`ulpprof diff` and `ulpprof ladder` results as typed objects.

    report = ulpprof.diff("miss.h5", "hit.h5")
    report.identical, report.first_divergence.origin, report.flips
    ladder = ulpprof.ladder(["miss.h5", "hit.h5", "repeat.h5"])
    ladder.rung("cache").verdict                 # "holds", "breaks", "untested"

The numbers are the C analyzer's: these functions run the `ulpprof`
program with `-f json` and read its report, whose keys are the documented
contract of format/FORMAT.md.  Every field here is one of those keys; `raw`
keeps the whole JSON object for the keys not mirrored.
"""
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Union

from ._program import run_json

__all__ = ["Report", "Row", "Divergence", "Key", "Logits", "Flip", "RunKeys", "Ladder",
           "LadderRun", "Pair", "PairDivergence", "Rung", "diff", "ladder"]

PathLike = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class Key:
    """A token: (request, position)."""

    request: int
    position: int

    @classmethod
    def from_json(cls, o: Optional[dict]) -> Optional["Key"]:
        return None if o is None else cls(int(o["request"]), int(o["position"]))


@dataclass
class Row:
    """One report row: one capture name (aligned: all its occurrences), A vs B.
    The four metrics are None for rows not compared (shape/dtype mismatch,
    only in one file)."""

    name: str
    occurrence: int
    layer: Optional[int]
    role: str
    dtype: str
    shape: List[int]
    elements: int
    status: str
    differing: Optional[int]
    max_ulp: Optional[int]
    max_abs_diff: Optional[float]
    nonfinite_mismatch: Optional[int]
    aligned: bool = False
    positions_compared: Optional[int] = None
    positions_differing: Optional[int] = None
    first_differing: Optional[Key] = None
    origin: Optional[str] = None
    inputs: List[str] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, o: dict) -> "Row":
        return cls(name=o["name"], occurrence=int(o["occurrence"]), layer=o.get("layer"),
                   role=o.get("role", ""), dtype=o.get("dtype", ""), shape=list(o.get("shape")
                                                                              or []),
                   elements=int(o.get("elements") or 0), status=o["status"],
                   differing=o.get("differing"), max_ulp=o.get("max_ulp"),
                   max_abs_diff=o.get("max_abs_diff"),
                   nonfinite_mismatch=o.get("nonfinite_mismatch"),
                   aligned=bool(o.get("aligned", False)),
                   positions_compared=o.get("positions_compared"),
                   positions_differing=o.get("positions_differing"),
                   first_differing=Key.from_json(o.get("first_differing")),
                   origin=o.get("origin"), inputs=list(o.get("inputs") or []), raw=o)

    @property
    def compared(self) -> bool:
        """Whether the row's elements were compared at all."""
        return self.differing is not None


@dataclass
class Divergence:
    """The first divergence of a diff: the first differing row in A's order
    (layer order for a forward pass), its first differing token when the
    captures have positions, where it came from (`origin`: introduced,
    carried_in, not_captured, unknown) and the report's sentence."""

    name: str
    occurrence: int
    layer: Optional[int]
    status: str
    row: Optional[int] = None
    request: Optional[int] = None
    position: Optional[int] = None
    origin: Optional[str] = None
    text: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, o: Optional[dict]) -> Optional["Divergence"]:
        if o is None:
            return None
        return cls(name=o["name"], occurrence=int(o.get("occurrence") or 0), layer=o.get("layer"),
                   status=o.get("status", ""), row=o.get("row"), request=o.get("request"),
                   position=o.get("position"), origin=o.get("origin"), text=o.get("text", ""),
                   raw=o)


@dataclass(frozen=True)
class Flip:
    """A logits row whose argmax differs; margins are each run's top-1 minus
    top-2 (None when not finite)."""

    row: int
    argmax_a: int
    argmax_b: int
    margin_a: Optional[float]
    margin_b: Optional[float]


@dataclass
class Logits:
    """The argmax analysis of one logits capture."""

    name: str
    occurrence: int
    rows: int
    argmax_flips: int
    flipped: List[Flip]
    rows_at_risk: int = 0
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, o: dict) -> "Logits":
        flips = [Flip(int(f["row"]), int(f["argmax_a"]), int(f["argmax_b"]), f.get("margin_a"),
                      f.get("margin_b")) for f in o.get("flipped", [])]
        return cls(name=o["name"], occurrence=int(o.get("occurrence") or 0),
                   rows=int(o.get("rows") or 0), argmax_flips=int(o.get("argmax_flips") or 0),
                   flipped=flips, rows_at_risk=int(o.get("rows_at_risk") or 0), raw=o)

    @property
    def margins(self) -> List[Optional[float]]:
        """Run A's top-1 minus top-2 margin per row (`per_row.margin_a`)."""
        return list(self.raw.get("per_row", {}).get("margin_a", []))


@dataclass
class RunKeys:
    """The /run keys the two files differ in, and the rung they name
    (`level` None: a key without a rung differs, or neither file has /run)."""

    differing_keys: List[str]
    level: Optional[int]
    level_name: Optional[str]

    @classmethod
    def from_json(cls, o: Optional[dict]) -> Optional["RunKeys"]:
        if o is None:
            return None
        return cls(list(o.get("differing_keys", [])), o.get("level"), o.get("level_name"))


@dataclass
class Report:
    """What `ulpprof diff A B -f json` reports (FORMAT.md)."""

    a: str
    b: str
    identical: bool
    rows: List[Row]
    first_divergence: Optional[Divergence]
    logits: List[Logits]
    ladder: Optional[RunKeys]
    summary: Dict[str, Any]
    label_a: str = ""
    label_b: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, o: dict) -> "Report":
        return cls(a=_path(o["a"]), b=_path(o["b"]), label_a=_label(o["a"]),
                   label_b=_label(o["b"]), identical=bool(o["identical"]),
                   rows=[Row.from_json(r) for r in o.get("rows", [])],
                   first_divergence=Divergence.from_json(o.get("first_divergence")),
                   logits=[Logits.from_json(x) for x in o.get("logits", [])],
                   ladder=RunKeys.from_json(o.get("ladder")), summary=dict(o.get("summary", {})),
                   raw=o)

    @property
    def flips(self) -> List[Flip]:
        """Every argmax flip, over the logits captures."""
        return [f for lg in self.logits for f in lg.flipped]

    @property
    def argmax_flips(self) -> int:
        return sum(lg.argmax_flips for lg in self.logits)

    @property
    def compared(self) -> int:
        """Rows whose elements were compared (both files, same shape and dtype)."""
        return sum(1 for r in self.rows if r.compared)

    def row(self, name: str) -> Row:
        """The row of capture `name`; KeyError when the report has none."""
        for r in self.rows:
            if r.name == name:
                return r
        raise KeyError(name)

    def summary_text(self) -> str:
        """A few lines for a test failure: the first divergence, its origin,
        the argmax flips."""
        if self.identical:
            return "%s and %s are identical (%d rows compared)" % (self.a, self.b, self.compared)
        lines = ["%s vs %s: %d of %d rows differ" % (self.a, self.b,
                                                     sum(1 for r in self.rows
                                                         if r.status != "identical"),
                                                     len(self.rows))]
        d = self.first_divergence
        if d is not None:
            lines.append("first divergence: %s" % (d.text or "%s occurrence %d (%s)"
                                                   % (d.name, d.occurrence, d.status)))
            lines.append("origin: %s" % (d.origin or "unknown"))
        n_rows = sum(lg.rows for lg in self.logits)
        if self.logits:
            flips = self.flips
            shown = ", ".join("row %d: %d -> %d (margins %s, %s)" % (
                f.row, f.argmax_a, f.argmax_b, _g(f.margin_a), _g(f.margin_b)) for f in flips[:5])
            lines.append("argmax flips: %d of %d logits rows%s" % (
                self.argmax_flips, n_rows, (": " + shown) if shown else ""))
        else:
            lines.append("argmax flips: no logits captured")
        return "\n".join(lines)


def _path(v: Any) -> str:
    return v.get("path", "") if isinstance(v, dict) else str(v)


def _label(v: Any) -> str:
    return (v.get("label") or "") if isinstance(v, dict) else ""


def _g(v: Optional[float]) -> str:
    return "n/a" if v is None else "%.3g" % v


def diff(a: PathLike, b: PathLike, match: Optional[str] = None, role: Optional[str] = None,
         rows: Optional[str] = None, temperature: Optional[Sequence[float]] = None,
         threads: Optional[int] = None) -> Report:
    """Compares two snapshots (or run directories of per-rank files: then
    use the `ranks` of `raw`); the options are `ulpprof diff`'s.  Raises
    SnapshotError when either file cannot be compared."""
    args: List[str] = ["diff", "-f", "json"]
    if match is not None:
        args += ["--match", match]
    if role is not None:
        args += ["--role", role]
    if rows is not None:
        args += ["--rows", rows]
    for t in temperature or ():
        args += ["--temperature", repr(float(t))]
    if threads is not None:
        args += ["--threads", str(int(threads))]
    doc, _ = run_json(args + [os.fspath(a), os.fspath(b)], ok=(0, 1))
    return Report.from_json(doc)


@dataclass
class LadderRun:
    index: int
    path: str
    label: str
    group: int
    run: Dict[str, str]


@dataclass
class PairDivergence:
    """Where a ladder pair first diverges (no origin: `diff` the pair for it)."""

    capture: str
    occurrence: int
    layer: Optional[int]
    status: str
    request: Optional[int]
    position: Optional[int]
    differing: Optional[int]
    elements: Optional[int]
    max_ulp: Optional[int]

    @classmethod
    def from_json(cls, o: Optional[dict]) -> Optional["PairDivergence"]:
        if o is None:
            return None
        return cls(o["capture"], int(o.get("occurrence") or 0), o.get("layer"),
                   o.get("status", ""), o.get("request"), o.get("position"), o.get("differing"),
                   o.get("elements"), o.get("max_ulp"))


@dataclass
class Pair:
    a: int
    b: int
    identical: bool
    differing_keys: List[str]
    rung: Optional[int]
    first_divergence: Optional[PairDivergence]
    argmax_flips: int


@dataclass
class Rung:
    """One rung of the determinism ladder: `verdict` is "holds" (every pair
    that differs only in this rung's keys is bitwise identical), "breaks" or
    "untested" (no pair decides it)."""

    level: int
    name: str
    keys: List[str]
    verdict: str
    deciding_pairs: int
    breaking_pairs: int
    first_break: Optional[Pair]

    @property
    def holds(self) -> bool:
        return self.verdict == "holds"


_RUNG_ALIASES = {"batch": 1, "batch_size": 1, "cache": 2, "split": 2, "chunk": 3,
                 "prefill_chunk": 3, "block": 3, "block_size": 3, "tp": 4, "parallelism": 4,
                 "quant": 5, "quantization": 5, "engine": 6, "vendor": 7, "device": 7,
                 "repeat": 0}


def rung_level(rung: Union[int, str]) -> int:
    """The ladder level of a rung given by number, name ("batch size") or
    /run key ("batch_size", "cache", "prefill_chunk", ...)."""
    if isinstance(rung, int):
        if not 0 <= rung <= 7:
            raise ValueError("rung levels are 0..7, not %d" % rung)
        return rung
    key = str(rung).strip().lower().replace(" ", "_")
    if key in _RUNG_ALIASES:
        return _RUNG_ALIASES[key]
    raise ValueError("unknown rung %r (one of %s)" % (rung, ", ".join(sorted(_RUNG_ALIASES))))


@dataclass
class Ladder:
    """What `ulpprof ladder -f json` reports (FORMAT.md)."""

    runs: List[LadderRun]
    pairs: List[Pair]
    rungs: List[Rung]
    groups: List[List[int]]
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, o: dict) -> "Ladder":
        pairs = [Pair(int(p["a"]), int(p["b"]), bool(p["identical"]),
                      list(p.get("differing_keys", [])), p.get("rung"),
                      PairDivergence.from_json(p.get("first_divergence")),
                      int(p.get("argmax_flips") or 0)) for p in o.get("pairs", [])]
        rungs = []
        for r in o.get("rungs", []):
            fb = r.get("first_break")
            brk = None
            if fb is not None:
                brk = Pair(int(fb["a"]), int(fb["b"]), False, [], int(r["level"]),
                           PairDivergence.from_json(fb.get("first_divergence")),
                           int(fb.get("argmax_flips") or 0))
            rungs.append(Rung(int(r["level"]), r.get("name", ""), list(r.get("keys", [])),
                              r["verdict"], int(r.get("deciding_pairs") or 0),
                              int(r.get("breaking_pairs") or 0), brk))
        runs = [LadderRun(int(x["index"]), x["path"], x.get("label") or "", int(x["group"]),
                          dict(x.get("run") or {})) for x in o.get("runs", [])]
        return cls(runs, pairs, rungs, [list(g) for g in o.get("groups", [])], raw=o)

    def rung(self, rung: Union[int, str]) -> Rung:
        """A rung by level, name or /run key: ladder.rung("cache")."""
        level = rung_level(rung)
        for r in self.rungs:
            if r.level == level:
                return r
        raise KeyError(rung)


def ladder(runs: Sequence[PathLike], ignore: Sequence[str] = (), match: Optional[str] = None,
           role: Optional[str] = None, jobs: Optional[int] = None) -> Ladder:
    """Compares every pair of runs (snapshot files or run directories) and
    gives each rung's verdict; the options are `ulpprof ladder`'s.  Raises
    SnapshotError when a run cannot be read."""
    args: List[str] = ["ladder", "-f", "json"]
    for k in ignore:
        args += ["--ignore", k]
    if match is not None:
        args += ["--match", match]
    if role is not None:
        args += ["--role", role]
    if jobs is not None:
        args += ["-j", str(int(jobs))]
    doc, _ = run_json(args + [os.fspath(r) for r in runs], ok=(0, 1))
    return Ladder.from_json(doc)
