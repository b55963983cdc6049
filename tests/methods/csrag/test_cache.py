import os
import threading

from faithrag.methods.csrag import cache as cache_module
from faithrag.methods.csrag.cache import JsonCache


def test_two_threads_writing_one_key_both_succeed(tmp_path, monkeypatch):
    # threads of one eval process share a pid: two items retrieving the same passage may both
    # write its paraphrases at once
    cache, both_written = JsonCache(tmp_path), threading.Barrier(2)
    real_replace = os.replace

    def replace_after_both_wrote(src, dst):
        both_written.wait(timeout=5)
        return real_replace(src, dst)

    monkeypatch.setattr(cache_module.os, "replace", replace_after_both_wrote)
    errors = []

    def put(value):
        try:
            cache.put("ab" * 32, {"texts": [value]})
        except OSError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=put, args=(v,)) for v in ("x", "y")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert cache.get("ab" * 32)["texts"] in (["x"], ["y"])  # one whole write, not a mix

