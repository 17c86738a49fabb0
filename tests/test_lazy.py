"""Lazily imported modules: first loads happen one at a time (concurrent first imports of Bob's
modules, which import each other's parts, can deadlock in the import system's module locks)."""

import threading
import time

from bob_acp.acp import lazy


def test_first_loads_from_two_threads_never_overlap(monkeypatch):
    inside, most = [0], [0]
    lock = threading.Lock()

    def slow_import(name):
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.05)
        with lock:
            inside[0] -= 1
        return type(lazy)(name)

    monkeypatch.setattr(lazy.importlib, "import_module", slow_import)
    namespace: dict = {}
    namespace["a"] = lazy.LazyModule("fake_a", namespace, "a")
    namespace["b"] = lazy.LazyModule("fake_b", namespace, "b")
    proxies = [namespace["a"], namespace["b"]]
    threads = [threading.Thread(target=proxy.load) for proxy in proxies for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert most[0] == 1
    assert namespace["a"].__name__ == "fake_a" and namespace["b"].__name__ == "fake_b"  # in their proxies' place
    assert proxies[0].load() is namespace["a"]
