"""Run in a fresh process by test_sc2.py (the protobuf variable must precede protobuf's import):
two TF-Agents V-trace train steps of the tiny SC2 agent on pysc2's mock environment, acting
through a PyDriver with the two-stage SC2Policy."""

import os
import time

START = time.time()

os.environ["PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"] = "python"
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_relational.agents.tf_agents.sc2_agent import TFAgentsSC2Trainer  # noqa: E402
from keras_relational.environments.sc2 import SC2Environment  # noqa: E402
from keras_relational.models.sc2_agent import sc2_agent  # noqa: E402

SIZE = 8
TINY = dict(stem_channels=4, lstm_channels=8, key_dim=8, mlp_units=(16,), num_blocks=1,
            num_heads=1)


def main():
    keras.utils.set_random_seed(0)
    environments = [SC2Environment.mock("MoveToBeacon", screen_size=SIZE, minimap_size=SIZE,
                                        episode_length=2) for _ in range(2)]
    names, mask = environments[0].argument_mask()
    trainer = TFAgentsSC2Trainer(
        environments, lambda: sc2_agent(screen_size=SIZE, num_functions=mask.shape[0], **TINY),
        names, mask, unroll_length=3, learning_rate=1e-3, use_tf_function=False)
    print(f"built {time.time() - START:.1f} s")
    before = [keras.ops.convert_to_numpy(v.value) for v in trainer.keras_model.trainable_variables]
    for step in range(2):
        # SC2Environment.step raises on an unavailable function or an argument out of range.
        info = trainer.train_step()
        assert all(np.isfinite(x) for x in info), info
        print(f"train step {step + 1}: loss {info.loss:.4f}, {time.time() - START:.1f} s")
    assert trainer.episode_count >= 2, trainer.episode_count  # 2-step episodes
    moved = sum(not np.allclose(b, keras.ops.convert_to_numpy(v.value)) for b, v in
                zip(before, trainer.keras_model.trainable_variables, strict=True))
    assert moved > len(before) // 2, (moved, len(before))
    trainer.close()
    print(f"tf_agents ok {time.time() - START:.1f} s")


if __name__ == "__main__":
    main()
