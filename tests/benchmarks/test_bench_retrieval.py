import bench_retrieval

from faithrag.retrieval.chunking import count_words

TEXTS = ["The bridge opened in 1887. It spans the Wend. Trains cross it daily.",
         "The river Wend rises in the hills. It is short. Mills once lined it."]


def test_read_data_collects_unique_texts_and_each_questions_own_context(tmp_path,
                                                                         write_data_dir):
    write_data_dir(tmp_path / "data", "qa", [
        {"id": "1", "question": "When did the bridge open?", "context": TEXTS[0]},
        {"id": "2", "question": "Where does the Wend rise?", "context": TEXTS[1]},
        {"id": "3", "question": "Same bridge?", "context": TEXTS[0]}])
    write_data_dir(tmp_path / "data", "rank", [
        {"id": "r", "query": "Which river?", "passages": [{"text": TEXTS[1]}, {"text": " "}]}])
    texts, questions = bench_retrieval.read_data(tmp_path / "data")
    assert texts == TEXTS
    assert questions[2] == ("Same bridge?", [TEXTS[0]])
    assert questions[3] == ("Which river?", [TEXTS[1]])


def test_the_corpus_is_topped_up_with_shuffled_real_sentences():
    passages, origin, real = bench_retrieval.build_corpus(TEXTS, 6, seed=0)
    assert real == 2 and origin == [0, 1, -1, -1, -1, -1] and passages[:2] == TEXTS
    sentences = {s.strip() for t in TEXTS for s in t.split(".") if s.strip()}
    for synthetic in passages[2:]:
        assert {s.strip() for s in synthetic.split(".") if s.strip()} <= sentences
        assert count_words(synthetic) >= min(count_words(t) for t in TEXTS)
    assert bench_retrieval.build_corpus(TEXTS, 6, seed=0)[0] == passages  # seeded
    assert bench_retrieval.build_corpus(TEXTS, 1, seed=0) == ([TEXTS[0]], [0], 1)
