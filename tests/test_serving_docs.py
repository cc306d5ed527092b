"""docs/serving.md's snippets serve tiny exports of each kind in a fresh process."""

import os
import re
import subprocess
import sys

import pytest

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_DOC = os.path.join(_REPO_ROOT, "docs", "serving.md")


def _snippets():
    with open(_DOC) as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), flags=re.S)
    return {name: block for block in blocks
            for name in ("POLICY_DIR", "EXPORT_DIR") if f"\n{name} = " in block}


def _pointed_at(snippet, name, path):
    changed, count = re.subn(rf'^{name} = ".*"$', f"{name} = {path!r}", snippet, flags=re.M)
    assert count == 1, f"docs/serving.md: no `{name} = ...` line"
    return changed


def _tiny_policy_export(root):
    """PolicySaver exports of an untrained tiny V-trace agent (as train_eval writes them)."""
    from tf_agents.specs import tensor_spec
    from tf_agents.train.utils import train_utils

    from keras_relational.agents.config import TFAgentsConfig
    from keras_relational.agents.networks import agent_model_fn
    from keras_relational.agents.tf_agents import export, learning
    from keras_relational.agents.tf_agents.boxworld_environment import make_boxworld_environment
    from keras_relational.agents.tf_agents.keras3_network import Keras3Network
    from keras_relational.environments import BoxWorldConfig

    config = TFAgentsConfig(environment=BoxWorldConfig(goal_length=1, num_distractors=0,
                                                       room_size=5, observation_type="one_hot"),
                            num_envs=2, unroll_length=2, jit_compile=False)
    env = make_boxworld_environment(config.environment, num_envs=2)
    time_step_spec = tensor_spec.from_spec(env.time_step_spec())
    action_spec = tensor_spec.from_spec(env.action_spec())
    model_fn = agent_model_fn("relational", env.observation_spec().shape, 4,
                              observation_dtype=env.observation_spec().dtype, key_dim=4,
                              mlp_hidden_units=(8,), head_units=(8,))
    network = Keras3Network(time_step_spec.observation, model_fn)
    train_step = train_utils.create_train_step()
    agent = learning.make_agent(config, time_step_spec, action_spec, network, model_fn,
                                train_step)
    export.export_policies(agent, os.path.join(root, "policies"), train_step)
    return network.keras_model


@pytest.mark.subprocess
def test_the_serving_snippets_serve_every_kind_of_export(tmp_path):
    from keras_relational.models import tpr_rnn

    snippets = _snippets()
    assert set(snippets) == {"POLICY_DIR", "EXPORT_DIR"}, sorted(snippets)
    keras_model = _tiny_policy_export(str(tmp_path))
    keras_model.export(str(tmp_path / "keras_model"), verbose=False)  # as train_eval does
    # A supervised export with several named integer inputs (bAbI's TPR-RNN).
    babi = tpr_rnn.tpr_rnn(vocab_size=12, max_sentences=3, max_words=4, entity_dim=4,
                           relation_dim=2, hidden_dim=8)
    babi.export(str(tmp_path / "babi"), verbose=False)
    program = "\n".join(
        [_pointed_at(snippets["POLICY_DIR"], "POLICY_DIR", str(tmp_path / "policies" / policy))
         for policy in ("greedy_policy", "collect_policy", "policy")]
        + [_pointed_at(snippets["EXPORT_DIR"], "EXPORT_DIR", str(tmp_path / export_dir))
           for export_dir in ("keras_model", "babi")])
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    for name in ("PYTHONPATH", "TF_USE_LEGACY_KERAS", "KERAS_BACKEND"):
        env.pop(name, None)
    served = subprocess.run([sys.executable, "-c", program], cwd=str(tmp_path), env=env,
                            capture_output=True, text=True, timeout=300)
    assert served.returncode == 0, served.stderr[-3000:]
    lines = served.stdout.strip().splitlines()
    assert len(lines) == 5, served.stdout
    for line in lines[:3]:
        assert line.startswith("actions [") and "logits (2, 4)" in line, line
        assert line.endswith("trained for 0 steps"), line
    assert lines[3] == "{'output_0': ('float32', (2, 4)), 'output_1': ('float32', (2,))}"
    assert lines[4] == "{'output_0': ('float32', (2, 12))}", lines[4]
