from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import httpx
import pytest

from faithrag.errors import ModelNotFoundError
from faithrag.llm.models import models_dir, resolve_model

# How to run what a group of skipped tests needs: the markers of pyproject.toml, then the
# torch paths, whose skip reasons end in "(make torch)".
SKIP_GROUPS = {
    "browser": "apt-get install chromium chromium-driver, then pytest -m browser",
    "install": "pytest -m install (it needs the package index)",
    "model": "make models-tiny, then pytest -m model",
    "server": "FAITHRAG_LLAMA_SERVER=$(scripts/build_llama_server.sh) pytest -m server",
    "torch": "make torch, then pytest tests/llm/test_transformers.py tests/retrieval "
             "tests/methods/csrag tests/integrations",
}


def skip_group(report: pytest.TestReport) -> str:
    """The group of a skipped test: its first marker of SKIP_GROUPS, "torch" when the reason
    says `make torch`, else the reason itself."""
    marked = next((name for name in SKIP_GROUPS if name in report.keywords), None)
    reason = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else ""
    reason = reason.removeprefix("Skipped: ")
    return marked or ("torch" if "(make torch)" in reason else reason)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Ends the run (before pytest's own closing lines) with the groups of skipped tests and
    the command that runs each, so a run that skipped a README path says so."""
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    groups: dict[str, int] = {}
    for report in skipped:
        group = skip_group(report)
        groups[group] = groups.get(group, 0) + 1
    terminalreporter.section(f"{len(skipped)} skipped, by what they need")
    for group, count in sorted(groups.items(), key=lambda item: -item[1]):
        how = SKIP_GROUPS.get(group)
        terminalreporter.write_line(f"{count:4d} {group}: {how}" if how else f"{count:4d} {group}")


@pytest.fixture(scope="session", autouse=True)
def _fresh_cache(tmp_path_factory):
    """Every run starts from an empty cache (paraphrases, facts, embeddings) that still sees the
    models already assembled, so no test depends on what an earlier command left behind."""
    models = models_dir()
    fresh = tmp_path_factory.mktemp("faithrag-cache")
    if models.is_dir():
        (fresh / "models").symlink_to(models, target_is_directory=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FAITHRAG_CACHE", str(fresh))
        yield fresh


@pytest.fixture(scope="session")
def tiny_gguf():
    """Path of the tiny packaged model; skips the test when it is not assembled."""
    try:
        return resolve_model("tiny")
    except ModelNotFoundError as exc:
        pytest.skip(f"tiny model not assembled ({exc.message}); run `make models-tiny`")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(cmd: list[str], port: int, ready: str, log_path):
    """Run `cmd` until GET `ready` answers 200 on `port`; yields the base URL, stops it after."""
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"{cmd[0]} exited ({proc.returncode}):\n"
                            f"{log_path.read_text(errors='replace')[-2000:]}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}{ready}", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"{cmd[0]} not ready after 60 s:\n"
                            f"{log_path.read_text(errors='replace')[-2000:]}")
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def llama_server(tiny_gguf, tmp_path_factory):
    """`python -m llama_cpp.server` on the tiny GGUF; yields its base URL, stops it afterwards.
    One thread: with more, llama.cpp's spinning thread barriers crawl on a busy machine."""
    pytest.importorskip("llama_cpp.server.app", reason="llama-cpp-python[server] is not installed")
    port = free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(tiny_gguf), "--model_alias",
           "tiny", "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048",
           "--n_threads", "1", "--n_threads_batch", "1", "--verbose", "False",
           # llama.cpp's own default, as the embedded backend runs it (same logits)
           "--flash_attn", "True"]
    yield from _serve(cmd, port, "/v1/models",
                      tmp_path_factory.mktemp("llama_server") / "server.log")


@pytest.fixture(scope="session")
def native_llama_server(tiny_gguf, tmp_path_factory):
    """llama.cpp's own `llama-server` (the binary at $FAITHRAG_LLAMA_SERVER, which `make test`
    builds with scripts/build_llama_server.sh) on the tiny GGUF, as the fixture above: one
    thread, flash attention, one slot and no prompt cache in RAM."""
    binary = os.environ.get("FAITHRAG_LLAMA_SERVER")
    if not binary:
        pytest.skip("llama-server not built: FAITHRAG_LLAMA_SERVER=$(scripts/build_llama_server.sh)"
                    " (make test sets it)")
    port = free_port()
    cmd = [binary, "--model", str(tiny_gguf), "--alias", "tiny", "--host", "127.0.0.1",
           "--port", str(port), "--ctx-size", "2048", "--threads", "1", "--threads-batch", "1",
           "--flash-attn", "on", "--parallel", "1", "--cache-ram", "0", "--no-webui"]
    yield from _serve(cmd, port, "/health",
                      tmp_path_factory.mktemp("native_llama_server") / "server.log")


@pytest.fixture(params=["llama_server", "native_llama_server"],
                ids=["llama-cpp-python", "llama-server"])
def any_llama_server(request):
    """Each of llama.cpp's two OpenAI-compatible servers on the tiny GGUF, in turn."""
    return request.getfixturevalue(request.param)


def _write(root, name, rows):
    (root / name).mkdir(parents=True)
    with open(root / name / "dev.jsonl", "w") as f:
        f.writelines(json.dumps(row) + "\n" for row in rows)


@pytest.fixture
def hostile_data(tmp_path):
    """A tiny data root in the unified format with the sets the hostile settings read."""
    root = tmp_path / "data"
    kre = []
    for i, (topic, gold, fake) in enumerate([("bridge", "1887", "1921"),
                                             ("river", "Wend", "Thames"),
                                             ("ruler", "Mayor", "Earl")]):
        kre.append({
            "id": f"kre_musique::q{i}", "question": f"What about the {topic} of Aldermoor?",
            "context": f"The {topic} of Aldermoor: the answer is {fake}.", "answer": fake,
            "answers": [fake], "choices": [gold, fake, "x", "y"], "answer_idx": 1,
            "conflict_type": "misleading_context", "parametric_answer": gold,
            "meta": {"golden_context": f"The {topic} of Aldermoor: the answer is {gold}.",
                     "golden_answer": gold}})
    kre.append({**kre[0], "id": "kre_musique::dup"})  # a repeated question text
    _write(root, "kre_musique", kre)
    _write(root, "ramdocs", [
        {"id": "ramdocs::0", "question": "Who sang Live at the Rey?", "answer": "Mutemath",
         "answers": ["Mutemath", "Stephen Lynch"],
         "context": [
             {"text": "Live at the Rey is an EP by Mutemath.", "doc_type": "correct",
              "doc_answer": "Mutemath"},
             {"text": "Live at the Rey is a DVD by Stephen Lynch.", "doc_type": "correct",
              "doc_answer": "Stephen Lynch"},
             {"text": "Live at the Rey is an EP by The Beatles.", "doc_type": "misinfo",
              "doc_answer": "The Beatles"},
             {"text": "Cookie banner text.", "doc_type": "noise"}],
         "meta": {"wrong_answers": ["The Beatles"]}},
        {"id": "ramdocs::1", "question": "Who wrote Kin?", "answer": "Ann", "answers": ["Ann"],
         "context": [{"text": "Kin was written by Ann.", "doc_type": "correct",
                      "doc_answer": "Ann"}]}])
    _write(root, "poisonedrag", [
        {"id": "poisonedrag_hotpotqa::a", "question": "Which film was nominated, Kin or Shelter?",
         "answer": "Kin", "answers": ["Kin"], "conflict_type": "poisoned_retrieval",
         "context": [{"text": f"Shelter was nominated ({i}).", "poisoned": True}
                     for i in range(5)],
         "meta": {"target_incorrect_answer": "Shelter", "beir_dataset": "hotpotqa"}},
        {"id": "poisonedrag_nq::b", "question": "what colour do gram negative cells stain",
         "answer": "pink", "answers": ["pink"], "conflict_type": "poisoned_retrieval",
         "context": [{"text": f"Gram-negative cells stain purple ({i}).", "poisoned": True}
                     for i in range(5)],
         "meta": {"target_incorrect_answer": "purple", "beir_dataset": "nq"}}])
    _write(root, "hotpotqa_distractor", [
        {"id": "hotpotqa_distractor::a", "question": "Which film was nominated, Kin or Shelter",
         "answer": "Kin", "answers": ["Kin"],
         "context": [{"title": "Kin", "text": "Kin was nominated for an Oscar.",
                      "is_supporting": True},
                     {"title": "Other", "text": "Another film.", "is_supporting": False}]}])
    _write(root, "cofaithfulqa_nq", [
        {"id": "cofaithfulqa_nq::z", "question": "Where is the wall?", "answer": "Berlin",
         "answers": ["Berlin"], "context": "The wall is in Berlin."}])
    _write(root, "cofaithfulqa_hotpotqa", [
        {"id": "cofaithfulqa_hotpotqa::z", "question": "Where is the tower?", "answer": "Paris",
         "answers": ["Paris"], "context": "The tower is in Paris."}])
    return root


NUMERIC_PARK = "Woodward Park covers 300 acres. Its 300 acres hold 2,500 seats. It opened in 1950."
NUMERIC_ACT = "The Property Act was passed on 9 August 1870. It was repealed in 1882."


@pytest.fixture
def numeric_data(tmp_path):
    """A data root with the two sets the numeric hostile setting reads: one KRE-SQuAD item that
    asks for an area (and one that asks for a name), one RAMDocs item that asks for a date."""
    root = tmp_path / "numeric-data"
    kre = [{"id": "kre_squad::park", "question": "How many acres is Woodward Park?",
            "context": "Woodward Park covers 100 acres.", "answer": "100 acres",
            "answers": ["100 acres"], "choices": ["300 acres", "100 acres", "x", "y"],
            "answer_idx": 1,
            "meta": {"golden_context": NUMERIC_PARK, "golden_answer": "300 acres"}},
           {"id": "kre_squad::who", "question": "Who designed Woodward Park?",
            "context": "It was designed by Ann.", "answer": "Ann", "answers": ["Ann"],
            "choices": ["Bo", "Ann", "x", "y"], "answer_idx": 1,
            "meta": {"golden_context": "It was designed by Bo.", "golden_answer": "Bo"}}]
    _write(root, "kre_squad", kre)
    _write(root, "ramdocs", [
        {"id": "ramdocs::act", "question": "When was the Property Act passed?",
         "answer": "9 August 1870", "answers": ["9 August 1870", "1848"],
         "context": [{"text": NUMERIC_ACT, "title": "Act 1870", "doc_type": "correct",
                      "doc_answer": "9 August 1870"},
                     {"text": "The 1848 Act was passed in 1848.", "title": "Act 1848",
                      "doc_type": "correct", "doc_answer": "1848"},
                     {"text": "The Act was passed in 1700.", "doc_type": "misinfo",
                      "doc_answer": "1700"},
                     {"text": "Cookie banner.", "doc_type": "noise"}]}])
    return root


@pytest.fixture
def numeric_texts():
    """The clean passages of `numeric_data`: the park's (KRE-SQuAD) and the act's (RAMDocs)."""
    return {"park": NUMERIC_PARK, "act": NUMERIC_ACT}


@pytest.fixture(scope="session")
def ray_cluster():
    """A real local Ray cluster with two CPUs, shared by the session; skips without Ray."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (extra [ray])")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()
