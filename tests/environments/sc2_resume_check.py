"""Run in a fresh process by test_sc2.py (the protobuf variable must precede protobuf's import):
``train_sc2``'s compiled trainer on pysc2's mock, cut after its first update by ``max_seconds``
and resumed, ends with the uninterrupted run's weights, optimizer variables, sampling state,
episode returns and environment states (the mock's state is saved with the checkpoints)."""

import os
import pickle
import sys
import tempfile
import time

START = time.time()

os.environ["PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"] = "python"
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np  # noqa: E402

from keras_relational.agents.sc2 import policy  # noqa: E402
from keras_relational.agents.sc2.train_eval import train_eval  # noqa: E402

# The greedy policy's SavedModel is half of these three tiny runs' time and nothing here reads
# it: test_sc2.py's binary test serves it in a fresh process.
policy.export_policy = lambda model, directory: None

TINY = dict(stem_channels=4, lstm_channels=8, key_dim=8, mlp_units=(16,))
# Episodes of 4 steps (FIRST, MID, MID, LAST) against unrolls of 2: the cut after update 1
# falls inside an episode (the mock must resume its step count).
SETTINGS = dict(mock=True, map_name="MoveToBeacon", num_envs=2, unroll_length=2, screen_size=8,
                num_blocks=1, num_heads=1, compile_mode="eager", mock_episode_length=3,
                num_iterations=2, log_interval=1)


def checkpoint(root, update):
    with np.load(os.path.join(root, "checkpoints", f"ckpt-{update}.npz")) as data:
        return ({name: data[name] for name in data.files if name not in ("meta", "actor")},
                pickle.loads(data["actor"].tobytes()))


def main():
    directory = tempfile.mkdtemp(prefix="sc2_resume_")
    whole, cut = os.path.join(directory, "whole"), os.path.join(directory, "cut")
    expected = train_eval(whole, model_kwargs=TINY, print_fn=lambda line: None, **SETTINGS)
    first = train_eval(cut, model_kwargs=TINY, max_seconds=1e-6, print_fn=print, **SETTINGS)
    assert first["updates"] == 1, first
    lines = []
    second = train_eval(cut, model_kwargs=TINY, print_fn=lines.append, **SETTINGS)
    print("\n".join(lines))
    assert f"Resuming from {cut}: update 1" in lines and not any("WARNING" in x for x in lines)
    arrays, actor = checkpoint(whole, 2)
    resumed, resumed_actor = checkpoint(cut, 2)
    assert sorted(arrays) == sorted(resumed)
    for name, array in arrays.items():
        np.testing.assert_array_equal(resumed[name], array, err_msg=name)
    assert resumed_actor["rng"] == actor["rng"] and resumed_actor["episodes"] == actor["episodes"]
    assert actor["environments"] is not None  # the mock's state was saved
    for saved, restored in zip(actor["environments"], resumed_actor["environments"],
                               strict=True):
        assert saved["episode_steps"] == restored["episode_steps"]
        assert saved["previous_function"] == restored["previous_function"]
    assert second["loss"] == expected["loss"] and second["episodes"] == expected["episodes"]
    print(f"resume ok {time.time() - START:.1f} s")


if __name__ == "__main__":
    sys.exit(main())
