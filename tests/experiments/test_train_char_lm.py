import json
import os

import numpy as np
import pytest

from keras_relational.experiments import char_lm_lib


def test_corpus_is_deterministic_text_with_answers():
    text = char_lm_lib.babi_corpus((1,), num_questions=3, seed=0)
    assert text == char_lm_lib.babi_corpus((1,), num_questions=3, seed=0)
    lines = text.splitlines()
    questions = [line for line in lines if "?" in line]
    assert len(questions) == 3
    assert all(q.split("? ")[1] and "\t" not in q for q in questions)
    assert not any(line[:1].isdigit() for line in lines)
    ids = char_lm_lib.encode(text, "".join(sorted(set(text))))
    inputs, targets = char_lm_lib.sequences(ids, 8)
    np.testing.assert_array_equal(inputs[:, 1:], targets[:, :-1])
    np.testing.assert_array_equal(inputs[1:, 0], targets[:-1, -1])


@pytest.mark.slow
def test_train_eval_smoke(tmp_path, capsys):
    root = str(tmp_path / "run")
    tiny = dict(tasks=(1,), train_questions=6, valid_questions=3, sequence_length=16, width=8,
                num_layers=1, num_heads=2, key_dim=4, num_key_value_heads=1, window=(4, 2),
                epochs=1, batch_size=8, jit_compile=False)
    results = char_lm_lib.train_eval(root, **tiny)
    simplicial, dot_product = results["simplicial"], results["dot_product"]
    assert simplicial["parameters"] == dot_product["parameters"]
    for r in (simplicial, dot_product):
        assert 0.0 < r["valid_bpc"] < 10.0 and np.isfinite(r["train_bpc"])
    with open(os.path.join(root, "results.json")) as f:
        assert json.load(f)["simplicial"]["parameters"] == simplicial["parameters"]
    with open(os.path.join(root, "results.md")) as f:
        assert f.read().startswith("| attention | parameters |")
    # Re-run with the same settings: the finished run is re-used, nothing trained again.
    capsys.readouterr()
    again = char_lm_lib.train_eval(root, **tiny)
    assert "not trained again" in capsys.readouterr().out
    assert again == json.loads(json.dumps(results))  # as results.json holds it
