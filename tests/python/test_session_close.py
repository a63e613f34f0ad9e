"""Session.close() against library calls on other threads (python/ulpprof/
_lib.py, Session.call): a ctypes call runs without the GIL, so a close on
another thread could free the handle under it.

- A call in flight on another thread is waited for: the handle is freed
  (ulp_session_close, wrapped here to say when) only after it returns.
- A call after the close begins never reaches the library: ULP_ECLOSED.
- A close from inside a call on the same thread does not wait for itself,
  nor a fork child's close for the parent's calls.
- Real captures from 4 threads while the main thread closes: every status
  is 0 or ULP_ECLOSED, the file reads, and it holds exactly the captures
  that returned 0.
"""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
SRC = os.environ.get("ULPPROF_SOURCE_DIR", ".")
os.environ["ULPPROF_CAPTURE_LIBRARY"] = os.path.join(BUILD, "capture", "libulpprof_capture.so")
sys.path.insert(0, os.path.join(SRC, "python"))
from ulpprof import _lib  # noqa: E402

ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
ECLOSED = -14
fails = []


def check(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL:", what)
    return cond


def wrapped_close(s, events):
    real = s._lib.ulp_session_close

    def closing(h):
        events.append("freed")
        return real(h)
    s._lib.ulp_session_close = closing
    return real


def main():
    tmp = tempfile.mkdtemp(prefix="ulpprof-session-close-")
    # 1. A call in flight on another thread.
    s = _lib.Session(os.path.join(tmp, "a.h5"), label="a")
    events, inside, let_go = [], threading.Event(), threading.Event()
    real = wrapped_close(s, events)

    def held(h, x):
        events.append("call")
        inside.set()
        let_go.wait(60)
        events.append("returns")
        return 0
    got = []
    t = threading.Thread(target=lambda: got.append(s.call(held, 1)))
    closer = threading.Thread(target=lambda: got.append(s.close()))
    try:
        t.start()
        check(inside.wait(60), "the call never started")
        closer.start()
        closer.join(0.3)
        check(closer.is_alive() and events == ["call"],
              "close did not wait for the call in flight: %s" % events)
    finally:
        let_go.set()
        t.join(60)
        closer.join(60)
        s._lib.ulp_session_close = real
    check(events == ["call", "returns", "freed"], "order: %s" % events)
    check(got == [0, 0], "statuses %s" % got)
    # 2. After the close: the library is not called.
    called = []
    check(s.call(lambda h: called.append(h) or 0) == ECLOSED and called == [],
          "a call after the close reached the function: %s" % called)
    check(s.close() == 0, "closing twice")
    # 3. Closed from inside a call on the same thread.
    s = _lib.Session(os.path.join(tmp, "b.h5"), label="b")
    done = []
    t = threading.Thread(target=lambda: done.append(s.call(lambda h: s.close())))
    t.start()
    t.join(60)
    check(not t.is_alive() and done == [0], "close inside a call: %s, alive %s"
          % (done, t.is_alive()))
    # 3a. Calls that end out of order: the main thread's call starts another thread's,
    # which is still in flight when the main one returns and closes.
    s = _lib.Session(os.path.join(tmp, "o.h5"), label="o")
    events, inside, let_go = [], threading.Event(), threading.Event()
    real = wrapped_close(s, events)

    def held_b(h):
        inside.set()
        let_go.wait(60)
        events.append("b returns")
        return 0
    tb = threading.Thread(target=lambda: s.call(held_b))

    def outer(h):
        tb.start()
        inside.wait(60)
        return 0
    s.call(outer)  # returns while b's call is in flight

    def later():
        time.sleep(0.3)
        events.append("let go")
        let_go.set()
    timer = threading.Thread(target=later)
    timer.start()
    try:
        s.close()  # on the thread whose call returned first
    finally:
        let_go.set()
        timer.join(60)
        tb.join(60)
        s._lib.ulp_session_close = real
    check(events == ["let go", "b returns", "freed"], "out of order: %s" % events)

    # 3b. A fork while a call is in flight: the child's close does not wait for the
    # parent's thread (its copy closes nothing), and returns.
    s = _lib.Session(os.path.join(tmp, "f.h5"), label="f")
    inside, let_go = threading.Event(), threading.Event()

    def hold(h):
        inside.set()
        let_go.wait(60)
        return 0
    t = threading.Thread(target=lambda: s.call(hold))
    t.start()
    check(inside.wait(60), "the call never started")
    pid = os.fork()
    if pid == 0:
        try:
            s.close()
        finally:
            os._exit(0)
    deadline, status = time.monotonic() + 60, None
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.01)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    let_go.set()
    t.join(60)
    check(status == 0, "the fork child's close: status %s (killed after 60 s when None)"
          % status)
    check(s.close() == 0, "the parent's close after the fork")

    # 4. Real captures racing a close.
    path = os.path.join(tmp, "c.h5")
    s = _lib.Session(path, label="c")
    x = np.arange(64, dtype=np.float32)
    results = {i: [] for i in range(4)}
    start = threading.Barrier(5)

    def writer(i):
        start.wait()
        for k in range(400):
            results[i].append(s.capture("t%d" % i, x.ctypes.data, "f32", [64]))
    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    start.wait()
    check(s.close() == 0, "close under captures")
    for th in threads:
        th.join(60)
    sts = [v for r in results.values() for v in r]
    check(set(sts) <= {0, ECLOSED}, "statuses %s" % sorted(set(sts)))
    p = subprocess.run([ULPPROF, "ls", "--json", path], capture_output=True, text=True,
                       timeout=120)
    if check(p.returncode == 0, "ls: %d %s" % (p.returncode, p.stderr)):
        caps = json.loads(p.stdout)[0]["captures"]
        for i in range(4):
            n = sum(1 for c in caps if c["name"] == "t%d" % i)
            want = results[i].count(0)
            check(n == want, "t%d: %d in the file, %d accepted" % (i, n, want))
    if fails:
        print("%d failure(s)" % len(fails))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
