"""Tests of the Hugging Face backend. Everything that needs torch skips cleanly without it (the base
install is torch-free); token ids are checked against llama.cpp's for the same GGUF through a
fixture (tests/llm/data/tiny_llamacpp_ids.json) that a llama.cpp test below keeps honest."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from faithrag.errors import (
    InputTooLargeError,
    MissingExtraError,
    ModelNotFoundError,
)
from faithrag.llm import transformers as hf
from faithrag.llm.base import ChoiceRequest, GenerationRequest, Message, TokenBias, user_prompt
from faithrag.llm.chat_encoding import common_prefix
from faithrag.methods.schemas import choice_answer_schema

QUESTION = user_prompt("What is the capital of France? Answer with one word.")
STORY = user_prompt("Write a long story about a dragon who learns to cook.")
LLAMACPP_IDS = json.loads((Path(__file__).parent / "data" / "tiny_llamacpp_ids.json")
                          .read_text(encoding="utf-8"))


def fixture_chat() -> tuple[tuple[Message, ...], str, list[int]]:
    chat = LLAMACPP_IDS["chat"]
    return tuple(Message(r, c) for r, c in chat["messages"]), chat["suffix"], chat["ids"]


def need_torch():
    pytest.importorskip("torch", reason="torch is not installed (make torch)")
    pytest.importorskip("transformers", reason="transformers is not installed (make torch)")


# ------------------------------------------------------------------------- no model needed
def test_missing_torch_names_the_hf_extra_and_the_cpu_build(tmp_path, monkeypatch):
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"GGUF")
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` fail
    hf._runtime.cache_clear()
    try:
        with pytest.raises(MissingExtraError) as err:
            hf.TransformersLLM(str(fake))
    finally:
        hf._runtime.cache_clear()
    assert err.value.hint == "pip install 'faithrag[hf]'" and "whl/cpu" in err.value.message


def test_unknown_model_raises_model_not_found(tmp_path):
    with pytest.raises(ModelNotFoundError) as err:
        hf.TransformersLLM(str(tmp_path / "absent.gguf"))
    assert "Hugging Face model directory" in err.value.message


def test_dense_processor_adds_the_same_vector_at_every_step():
    need_torch()
    import torch

    processor = hf.dense_bias_processor(TokenBias.from_mapping({1: 2.0, 4: -1.5, 99: 7.0}), 6)
    vector = processor.bias
    expected = torch.tensor([0, 2, 0, 0, -1.5, 0])  # id 99 is outside the vocabulary
    for step in range(3):
        scores = torch.randn(2, 6)
        out = processor(torch.zeros(2, step + 1, dtype=torch.long), scores)
        torch.testing.assert_close(out - scores, expected.expand(2, 6))
        assert processor.bias is vector  # built once, never per step
    per_row = hf.dense_bias_processor([TokenBias.from_mapping({0: 1.0}), None], 3)
    torch.testing.assert_close(per_row(None, torch.zeros(2, 3)), torch.tensor([[1.0, 0, 0], [0, 0, 0]]))


# ------------------------------------------------------------------------- tiny model
@pytest.fixture(scope="module")
def llm(tiny_gguf):
    need_torch()
    pytest.importorskip("gguf", reason="gguf is not installed (make torch)")
    return hf.TransformersLLM("tiny", n_ctx=1024, torch_dtype="float32")


def first_token(llm, messages, bias=None) -> int:
    [c] = llm.generate([GenerationRequest(messages, max_tokens=1, bias=bias)])
    [token] = llm.tokenize(c.text)
    return token


@pytest.mark.model
def test_fixture_ids_are_llamacpp_ids(tiny_gguf):
    """The fixture the HF tests compare against is what llama.cpp says today."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (make setup)")
    from faithrag.llm.llamacpp import LlamaCppLLM

    llama = LlamaCppLLM("tiny", n_ctx=512)
    try:
        messages, suffix, ids = fixture_chat()
        assert {s: llama.tokenize(s) for s in LLAMACPP_IDS["tokenize"]} == LLAMACPP_IDS["tokenize"]
        assert llama._encode_chat(messages, suffix) == ids
    finally:
        llama.close()


@pytest.mark.model
def test_name_window_and_vocab(llm):
    import torch

    assert llm.name == "tiny" and llm.context_window == 1024
    with torch.inference_mode():
        logits = llm._model(input_ids=torch.tensor([[1, 2]])).logits
    assert llm.vocab_size == logits.shape[-1] == 49152  # the logits dimension
    assert llm.load_seconds > 0


@pytest.mark.model
def test_token_ids_equal_llamacpp_ids(llm):
    for text, ids in LLAMACPP_IDS["tokenize"].items():
        assert llm.tokenize(text) == ids, text
        assert llm.detokenize(ids) == text
    messages, suffix, ids = fixture_chat()
    assert llm._encode_chat(messages, suffix) == ids  # contents stay plain text, as in llama.cpp
    assert llm.count_chat_tokens(messages) == len(llm._encode_chat(messages))
    assert llm.tokenize("") == [] and llm.detokenize([]) == ""


@pytest.mark.model
def test_bias_flips_the_greedy_answer(llm):
    greedy = first_token(llm, QUESTION)
    other = llm.tokenize(" Berlin")[0]
    assert other != greedy
    assert first_token(llm, QUESTION, TokenBias.from_mapping({other: 30.0})) == other
    assert first_token(llm, QUESTION, TokenBias.from_mapping({greedy: -100.0})) != greedy


@pytest.mark.model
def test_generate_adds_one_dense_vector_at_every_step(llm, monkeypatch):
    cls = hf._runtime().DenseBiasLogitsProcessor
    original = cls.__call__
    seen = []

    def spy(self, input_ids, scores):
        out = original(self, input_ids, scores)
        seen.append((id(self.bias), (out - scores).clone()))
        return out

    monkeypatch.setattr(cls, "__call__", spy)
    bias = TokenBias.from_mapping({llm.tokenize(" the")[0]: 1.5, llm.tokenize(" fire")[0]: -2.0})
    [c] = llm.generate([GenerationRequest(STORY, max_tokens=6, bias=bias)])
    assert c.completion_tokens == 6 and len(seen) == 6
    assert len({tensor_id for tensor_id, _ in seen}) == 1
    for _, delta in seen:
        np.testing.assert_allclose(delta[0].numpy(), bias.dense(llm.vocab_size), atol=1e-5)


@pytest.mark.model
def test_choice_scoring_ranks_the_biased_choice_first(llm):
    choices = (" Paris", " Berlin", " Rome")
    plain = llm.score_choices(ChoiceRequest(QUESTION, choices, answer_prefix="Answer:"))
    assert plain.choices[plain.best] == " Paris"
    bias = TokenBias.from_sets([(8.0, llm.tokenize(" Berlin"))])
    biased = llm.score_choices(ChoiceRequest(QUESTION, choices, answer_prefix="Answer:", bias=bias))
    assert biased.choices[biased.best] == " Berlin"
    assert biased.logprobs[0] < plain.logprobs[0]  # a boosted rival takes mass from Paris
    assert all(lp < 0 for lp in plain.logprobs + biased.logprobs)


@pytest.mark.model
def test_choice_scores_equal_a_full_forward_pass_per_choice(llm):
    """The shared-prefix cache gives what one forward pass over prompt+choice gives."""
    import torch

    choices = ("Paris", "Lyon, of course", "Berlin is the answer here")
    bias = TokenBias.from_mapping({llm.tokenize(" Lyon")[0]: 4.0, llm.tokenize("Paris")[0]: -3.0})
    scores = llm.score_choices(ChoiceRequest(QUESTION, choices, answer_prefix="Answer: ", bias=bias))
    base = llm._encode_chat(QUESTION, "Answer: ")
    dense = torch.from_numpy(bias.dense(llm.vocab_size))
    for choice, logprob, count in zip(choices, scores.logprobs, scores.token_counts):
        full = llm._encode_chat(QUESTION, "Answer: " + choice)
        own = common_prefix(base, full)
        with torch.inference_mode():
            logits = llm._model(input_ids=torch.tensor([full])).logits[0].float() + dense
        expected = torch.log_softmax(logits[own - 1:-1], -1).gather(
            1, torch.tensor(full[own:])[:, None]).sum()
        assert count == len(full) - own
        assert logprob == pytest.approx(float(expected), abs=1e-3)
    # the prefix's trailing space joins the choice's first token, as the model sees it
    same = llm.score_choices(ChoiceRequest(QUESTION, (" Paris",), answer_prefix="Answer:", bias=bias))
    assert same.logprobs[0] == pytest.approx(scores.logprobs[0], abs=1e-3)


@pytest.mark.model
def test_choice_scores_match_the_llamacpp_backend(llm):
    """Same tokens, same positions, same bias: only the arithmetic differs (llama.cpp multiplies
    Q4_1 blocks with quantized activations, in kernels chosen for the CPU it was built on; this
    backend the dequantized float32 weights), by up to 0.7 nats on the CPUs tried."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (make setup)")
    from faithrag.llm.llamacpp import LlamaCppLLM

    llama = LlamaCppLLM("tiny", n_ctx=512)
    try:
        bias = TokenBias.from_sets([(5.0, llm.tokenize(" London"))])
        request = ChoiceRequest(QUESTION, ("Paris", "London", "Berlin", "Rome is nice"),
                                answer_prefix="The answer is ", bias=bias)
        ours, theirs = llm.score_choices(request), llama.score_choices(request)
    finally:
        llama.close()
    assert ours.token_counts == theirs.token_counts and ours.prompt_tokens == theirs.prompt_tokens
    assert ours.best == theirs.best
    np.testing.assert_allclose(ours.logprobs, theirs.logprobs, atol=1.0)


@pytest.mark.model
def test_logprobs_agree_with_choice_scoring(llm):
    bias = TokenBias.from_mapping({llm.tokenize(" dragon")[0]: 2.0})
    [c] = llm.generate([GenerationRequest(STORY, max_tokens=6, logprobs=True, bias=bias)])
    assert len(c.token_logprobs) == c.completion_tokens == 6
    assert all(lp <= 0 for lp in c.token_logprobs)
    scores = llm.score_choices(ChoiceRequest(STORY, (c.text,), bias=bias))
    assert scores.token_counts == [6]  # the text re-tokenizes to the generated tokens
    assert scores.logprobs[0] == pytest.approx(sum(c.token_logprobs), abs=1e-3)
    [plain] = llm.generate([GenerationRequest(STORY, max_tokens=6, bias=bias)])
    assert plain.token_logprobs is None and plain.text == c.text


@pytest.mark.model
def test_stop_strings_and_max_tokens(llm):
    [full] = llm.generate([GenerationRequest(STORY, max_tokens=40)])
    assert full.finish_reason == "length" and full.completion_tokens == 40
    stop = full.text[20:24]
    [stopped] = llm.generate([GenerationRequest(STORY, max_tokens=40, stop=(stop,))])
    assert stopped.finish_reason == "stop"
    assert stopped.text == full.text[: full.text.index(stop)]
    assert stopped.completion_tokens < 40  # the StoppingCriteria ended decoding early
    [short] = llm.generate([GenerationRequest(STORY, max_tokens=5)])
    assert short.completion_tokens == 5 and full.text.startswith(short.text)
    [ended] = llm.generate([GenerationRequest(QUESTION, max_tokens=40)])
    assert ended.finish_reason == "stop" and ended.completion_tokens < 40  # end of turn


@pytest.mark.model
def test_batched_generation_matches_one_by_one(llm):
    requests = [
        GenerationRequest(STORY, max_tokens=12, logprobs=True),
        GenerationRequest(QUESTION, max_tokens=30),
        GenerationRequest(user_prompt("Name a fruit. Answer briefly."), max_tokens=8,
                          bias=TokenBias.from_mapping({llm.tokenize(" Banana")[0]: 5.0})),
        GenerationRequest(user_prompt("Write a poem about the sea."), max_tokens=30, stop=("\n",)),
    ]
    batch = llm.generate(requests)
    single = [llm.generate([r])[0] for r in requests]
    for b, s, r in zip(batch, single, requests):
        assert (b.text, b.completion_tokens, b.finish_reason) == \
            (s.text, s.completion_tokens, s.finish_reason)
        assert b.prompt_tokens == llm.count_chat_tokens(r.messages)
    np.testing.assert_allclose(batch[0].token_logprobs, single[0].token_logprobs, atol=1e-3)
    assert batch[1].token_logprobs is None
    assert "\n" not in batch[3].text and batch[3].finish_reason == "stop"


@pytest.mark.model
def test_a_schema_reply_parses_under_its_schema_and_the_bias_steers_within_it(llm):
    pytest.importorskip("xgrammar", reason="xgrammar is not installed (make torch)")
    schema = choice_answer_schema(["Paris", "London"], max_tokens=64)
    ask = user_prompt("What is the capital of France? Options: Paris, London. Reply as JSON "
                      'with "Reason" and "Answer".')
    [plain] = llm.generate([GenerationRequest(ask, max_tokens=64, schema=schema)])
    value = json.loads(plain.text)
    assert set(value) == {"Reason", "Answer"} and value["Answer"] in ("Paris", "London")
    assert len(value["Reason"]) <= schema["properties"]["Reason"]["maxLength"]
    other = "London" if value["Answer"] == "Paris" else "Paris"
    toward = TokenBias.from_mapping({t: 30.0 for t in llm.tokenize(other)[:1]})
    biased = GenerationRequest(ask, max_tokens=64, schema=schema, bias=toward)
    value = json.loads(llm.generate([biased])[0].text)  # the bias shifts, the grammar masks
    assert value["Answer"] == other


@pytest.mark.model
def test_a_constrained_reply_denser_than_its_budget_runs_past_max_tokens_to_close(llm):
    pytest.importorskip("xgrammar", reason="xgrammar is not installed (make torch)")
    digits = 'root ::= [0-9]{30} "."'  # one token per digit in the tiny model's vocabulary
    request = GenerationRequest(STORY, max_tokens=12, grammar=digits)
    [closed] = llm.generate([request])
    llm.constrain = False
    try:
        [free] = llm.generate([request])
    finally:
        llm.constrain = True
    assert re.fullmatch(r"[0-9]{30}\.", closed.text), closed.text
    assert closed.finish_reason == "stop" and closed.completion_tokens == 31
    assert free.completion_tokens == 12  # no structure applied: max_tokens holds


@pytest.mark.model
def test_sampling_is_seeded(llm):
    def sample(seed: int) -> str:
        request = GenerationRequest(STORY, max_tokens=12, temperature=1.5, seed=seed)
        return llm.generate([request])[0].text

    assert sample(1) == sample(1)
    assert len({sample(1), sample(2), sample(3)}) > 1


@pytest.mark.model
@pytest.mark.slow
def test_loads_a_hugging_face_model_directory(llm, tmp_path):
    import copy

    from transformers import AutoModelForCausalLM

    config = copy.deepcopy(llm._model.config)
    del config.quantization_config  # the dequantized weights are saved as plain tensors
    plain = AutoModelForCausalLM.from_config(config)
    plain.load_state_dict(llm._model.state_dict())
    plain.save_pretrained(tmp_path)
    llm._tok.save_pretrained(tmp_path)
    del plain
    from_dir = hf.TransformersLLM(str(tmp_path), torch_dtype="float32")
    assert from_dir.name == tmp_path.name and from_dir.context_window == 8192  # max positions
    assert from_dir.tokenize("Hello world") == llm.tokenize("Hello world")
    request = GenerationRequest(QUESTION, max_tokens=10)
    assert from_dir.generate([request])[0].text == llm.generate([request])[0].text


@pytest.mark.model
def test_oversize_input_raises(llm):
    huge = user_prompt("word " * 2000)
    with pytest.raises(InputTooLargeError):
        llm.generate([GenerationRequest(huge, max_tokens=8)])
    with pytest.raises(InputTooLargeError):  # prompt fits, prompt + max_tokens does not
        llm.generate([GenerationRequest(QUESTION, max_tokens=1024)])
    with pytest.raises(InputTooLargeError):
        llm.score_choices(ChoiceRequest(huge, ("a", "b")))
