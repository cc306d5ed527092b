"""The analyse_relations_game binary draws Figs. 6b/6c for a saved model (tiny sizes)."""

import os
import subprocess
import sys

import numpy as np
import pytest

from keras_relational.models import relations_game as rg

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
@pytest.mark.subprocess
def test_binary_writes_the_plots_and_arrays(tmp_path):
    model = rg.build_model("predinet", num_classes=4, central_kwargs={
        "num_heads": 3, "key_dim": 2, "num_relations": 2})
    path = str(tmp_path / "model.keras")
    model.save(path)
    out = str(tmp_path / "analysis")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("KERAS_BACKEND", None)
    result = subprocess.run(
        [sys.executable, "-m", "keras_relational.experiments.analyse_relations_game",
         f"--model={path}", "--num_examples=16", "--num_samples=2", f"--output_dir={out}"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(os.listdir(out)) == ["analysis.npz", "head_pca.png",
                                       "head_pca_hexominoes.png", "pruning.png"]
    with np.load(os.path.join(out, "analysis.npz")) as arrays:
        assert arrays["pca_points"].shape == (16, 3, 2)
        assert arrays["projected_points"].shape == (16, 3, 2)
        assert arrays["head_ablation"].shape == (3,)
        assert arrays["pruning_accuracies"].shape == (4, 2)
    assert "accuracy with head h zeroed: 0:" in result.stdout
