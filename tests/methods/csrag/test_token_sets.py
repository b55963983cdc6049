import numpy as np
import pytest

from faithrag.llm.fake import FakeLLM
from faithrag.llm.openai import OpenAICompatLLM, logit_bias_payload
from faithrag.methods.csrag.token_sets import (
    content_token_ids,
    csrag_bias,
    decode_ids,
)

TEXT = "The capital of Australia is Sydney, according to the 2031 gazette."


def test_bias_adds_alpha_and_beta_and_sums_on_overlap():
    bias = csrag_bias({1, 2}, {2, 3}, alpha=-1.0, beta=3.0)
    assert bias.as_dict() == {1: -1.0, 2: 2.0, 3: 3.0}
    assert not csrag_bias(set(), set(), -1.0, 3.0)


def test_zero_weights_give_an_empty_bias():
    assert len(csrag_bias({1, 2}, {3}, alpha=0.0, beta=0.0)) == 0


def test_filtering_drops_punctuation_and_stopword_bytes_on_the_byte_tokenizer():
    llm = FakeLLM()
    ids = content_token_ids(llm, "a, b!")
    # "a" is a stopword, "," and "!" are punctuation, " " is whitespace: only "b" stays
    assert ids == {ord("b")}
    unfiltered = content_token_ids(llm, "a, b!", filter_stopwords=False)
    assert {ord("a"), ord(","), ord("!"), ord(" ")} <= unfiltered


def test_case_variants_add_the_lower_cased_and_capitalised_spellings_only_when_asked():
    llm = FakeLLM()
    assert content_token_ids(llm, "XY") == {ord("X"), ord("Y")}
    # "XY" -> "xy" and "Xy"; "the" is still a stopword in any case
    assert content_token_ids(llm, "XY The", case_variants=True) == {ord(c) for c in "XYxy"}


@pytest.mark.model
def test_real_tokenizer_keeps_both_word_initial_spellings_and_drops_function_words(tiny_gguf):
    from faithrag.llm.llamacpp import LlamaCppLLM

    llm = LlamaCppLLM(str(tiny_gguf), n_ctx=512, n_threads=1)
    ids = content_token_ids(llm, TEXT)
    for word in ("Sydney", "Australia", "gazette"):
        assert set(llm.tokenize(word)) <= ids
        assert set(llm.tokenize(" " + word)) <= ids
    for function in (" the", " of", " is", ",", ".", "The"):
        assert not set(llm.tokenize(function)) & ids, function
    decoded = decode_ids(llm, ids)
    assert "S" in decoded  # the first piece of "S|yd|ney" stays, though "s" is a stopword
    assert not {" the", " of", " is", " to", ",", "."} & set(decoded)
    unfiltered = content_token_ids(llm, TEXT, filter_stopwords=False)
    assert set(llm.tokenize(TEXT)) <= unfiltered and ids < unfiltered
    # a lower-cased option ("sydney") earns the boost only with case variants
    cased = content_token_ids(llm, TEXT, case_variants=True)
    assert not set(llm.tokenize(" sydney")) <= ids
    assert set(llm.tokenize(" sydney")) | set(llm.tokenize("sydney")) | ids <= cased


@pytest.mark.model
@pytest.mark.server
def test_the_three_transports_carry_the_same_token_set(tiny_gguf, llama_server):
    """One text, one token set, whether the ids come from the embedded model, the server's
    /tokenize or a local copy of its vocabulary; and each transport carries exactly that set."""
    from faithrag.llm.llamacpp import DenseBias, LlamaCppLLM

    embedded = LlamaCppLLM(str(tiny_gguf), n_ctx=512, n_threads=1)
    via_server = OpenAICompatLLM(llama_server, "tiny", tokenizer="server")
    via_vocab = OpenAICompatLLM(llama_server, "tiny", tokenizer=str(tiny_gguf))
    sets = [content_token_ids(llm, TEXT) for llm in (embedded, via_server, via_vocab)]
    assert sets[0] == sets[1] == sets[2] and len(sets[0]) > 10

    bias = csrag_bias(content_token_ids(embedded, "Canberra is the capital."), sets[0], -1.0, 3.0)
    row = np.zeros(embedded.vocab_size, dtype=np.float32)
    DenseBias(bias, embedded.vocab_size)(None, row)  # llama.cpp: one dense vector per request
    assert set(np.flatnonzero(row).tolist()) == set(bias.ids.tolist())
    payload, _ = logit_bias_payload(bias)  # OpenAI-compatible servers: logit_bias
    assert {int(k) for k in payload} == set(bias.ids.tolist())
    assert all(payload[str(i)] == v for i, v in bias.as_dict().items())


@pytest.mark.model
def test_transformers_processor_carries_the_same_set(tiny_gguf):
    pytest.importorskip("torch", reason="torch is not installed (make torch)")
    pytest.importorskip("transformers", reason="transformers is not installed (make torch)")
    import torch

    from faithrag.llm.llamacpp import LlamaCppLLM
    from faithrag.llm.transformers import TransformersLLM, dense_bias_processor

    hf = TransformersLLM(str(tiny_gguf), torch_dtype="float32")
    embedded = LlamaCppLLM(str(tiny_gguf), n_ctx=512, n_threads=1)
    ids = content_token_ids(hf, TEXT)
    assert ids == content_token_ids(embedded, TEXT)
    bias = csrag_bias(set(), ids, -1.0, 3.0)
    processor = dense_bias_processor(bias, hf.vocab_size)
    scores = processor(torch.zeros(1, 1, dtype=torch.long), torch.zeros(1, hf.vocab_size))
    assert set(torch.nonzero(scores[0]).flatten().tolist()) == ids
