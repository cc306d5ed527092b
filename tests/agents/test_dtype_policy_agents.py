"""``dtype_policy`` of the Box-World trainers (issue 23, Sec. 1): TrainConfig's field (and so
``train_boxworld --dtype_policy``), float32 logits and values under 16-bit policies, the TF-Agents
V-trace learner and the compiled loop with float16 loss scaling, the policy in result.json."""

import json
import os
import re

import keras
import numpy as np
import pytest

from keras_relational.agents.config import TrainConfig
from keras_relational.agents.networks import agent_model_fn

_LEVELS = dict(goal_length=1, num_distractors=0, room_size=5, observation_type="one_hot")
_TINY = dict(env_kwargs=_LEVELS, num_envs=2, unroll_length=3, log_interval=1, eval_episodes=0,
             num_iterations=2, model_kwargs=dict(key_dim=8, mlp_hidden_units=(8,),
                                                 head_units=(8,), conv_filters=(8, 8)))


def _losses(lines):
    return [float(m.group(1)) for line in lines for m in [re.search(r"loss\s+(\S+) \|", line)]
            if m]


def test_config_checks_the_policy():
    assert TrainConfig().dtype_policy == "float32"
    with pytest.raises(ValueError, match=r"`dtype_policy`.*'float16'"):
        TrainConfig(dtype_policy="float16")
    with pytest.raises(ValueError, match=r"mixed_float16.*loss scaling.*PPO"):
        TrainConfig(algorithm="ppo", dtype_policy="mixed_float16")
    TrainConfig(algorithm="ppo", dtype_policy="mixed_bfloat16")


def test_network_computes_in_16_bits_with_float32_logits_and_value():
    model = agent_model_fn("relational", (5, 5, 3), 4, dtype_policy="mixed_bfloat16",
                           **_TINY["model_kwargs"])()
    assert keras.config.dtype_policy().name == "float32"  # the global policy is restored
    assert model.get_layer("relational_module").compute_dtype == "bfloat16"
    logits, value = model(np.zeros((2, 5, 5, 3), "uint8"))
    assert [keras.backend.standardize_dtype(t.dtype) for t in (logits, value)] == [
        "float32", "float32"]


@pytest.mark.parametrize("dtype_policy", ["mixed_bfloat16", "mixed_float16"])
def test_tf_agents_vtrace_trains_under_the_policy(tmp_path, dtype_policy):
    from keras_relational.agents.train_eval import train_eval

    root, lines = str(tmp_path), []
    result = train_eval(root, dtype_policy=dtype_policy, print_fn=lines.append, **_TINY)
    assert result["train_step"] == 2
    losses = _losses(lines)
    assert losses and np.all(np.isfinite(losses)), lines
    with open(os.path.join(root, "result.json")) as f:
        assert json.load(f)["dtype_policy"] == dtype_policy


def test_compiled_loop_mixed_float16_is_loss_scaled(tmp_path):
    from keras_relational.agents.compiled import checkpointing
    from keras_relational.agents.compiled import train_eval as compiled_train_eval

    root, lines = str(tmp_path), []
    result = compiled_train_eval.train_eval(root, dtype_policy="mixed_float16",
                                            print_fn=lines.append, **_TINY)
    losses = _losses(lines)
    assert result["train_step"] == 2 and losses and np.all(np.isfinite(losses)), lines
    with open(os.path.join(root, "result.json")) as f:
        assert json.load(f)["dtype_policy"] == "mixed_float16"
    with np.load(checkpointing.checkpoints(root)[-1]) as data:
        values = {key: data[key] for key in data.files}
    assert all(np.all(np.isfinite(v)) for k, v in values.items() if k != "meta")
    # The LossScaleOptimizer's scale (2**15 to start) is in the checkpointed optimizer state.
    assert any(v.shape == () and v.dtype == np.float32 and v == 2.0**15
               for v in values.values()), sorted(values)
