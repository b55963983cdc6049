import json

import pytest


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
