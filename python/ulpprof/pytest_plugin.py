"""The pytest plugin of ulpprof (entry point `pytest11`: loaded by pytest
when the package is installed; `pytest -p ulpprof.pytest_plugin` otherwise).

Fixtures:
- `ulpprof_snapshots`: a scratch directory for this test's snapshots
  (under pytest's tmp_path, so kept for the last few sessions).
- `assert_invariant`: ulpprof.testing.assert_invariant writing there.

A test that fails with ulpprof.testing.InvariantError gets a section
"ulpprof report" in its output: per condition, the rows that differ, and
where the snapshots are.
"""
import functools
from typing import Any, Callable, Generator

import pytest

from .testing import InvariantError, assert_invariant as _assert_invariant


@pytest.fixture
def ulpprof_snapshots(tmp_path: Any) -> Any:
    """A scratch directory for this test's snapshot files."""
    d = tmp_path / "ulpprof"
    d.mkdir()
    return d


@pytest.fixture(name="assert_invariant")
def assert_invariant_fixture(ulpprof_snapshots: Any) -> Callable[..., Any]:
    """assert_invariant(model, runs, rung=None, **options) with its snapshots
    in `ulpprof_snapshots`."""
    return functools.partial(_assert_invariant, directory=str(ulpprof_snapshots))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Generator[None, Any, None]:
    outcome = yield
    rep = outcome.get_result()
    exc = call.excinfo.value if call.excinfo is not None else None
    if isinstance(exc, InvariantError):
        rep.sections.append(("ulpprof report", exc.details()))
