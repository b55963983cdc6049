import hostile_recall

from faithrag.config import Config


def test_measures_the_answer_and_the_poison_in_each_top_k(hostile_data, tmp_path):
    row = hostile_recall.measure("kre_musique", 3, str(hostile_data), tmp_path / "kb",
                                 Config())
    # three questions over three clean passages (the repeated question's is shared), k = 2:
    # every top k holds the answer, every hostile top k the poison too, and so does the KB
    assert (row["n"], row["k"], row["corpus"], row["kb_documents"]) == (3, 2, 3, 4)
    for key in ("clean_answer", "hostile_answer", "poison_target", "kb_answer"):
        assert row[key]["rate"] == 1.0 and 0.4 < row[key]["ci"][0] < 1.0
    one = hostile_recall.measure("kre_musique", 1, str(hostile_data), tmp_path / "kb2",
                                 Config.load(None, {"antisyco.kb_k": 1,
                                                    "antisyco.kb_chunk_tokens": 64}))
    assert (one["n"], one["kb_k"], one["kb_chunk_tokens"]) == (1, 1, 64)
