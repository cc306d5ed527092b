"""Exports of a trained agent: PolicySaver SavedModels and the Keras 3 network."""

import os

from tf_agents.policies import greedy_policy, policy_saver
from tf_agents.train import learner

from keras_relational import whole_files


def export_policies(tf_agent, policies_dir, train_step):
    """Writes PolicySaver SavedModels of the agent's policies *with their current weights*.

    TF-Agents' ``PolicySavedModelTrigger`` writes each SavedModel once, when it is created (so
    with the initial weights), and afterwards only variable checkpoints under
    ``policies_dir/checkpoints``; a SavedModel loaded from ``policies_dir/collect_policy`` would
    act with untrained weights. This replaces ``policy``, ``collect_policy`` and
    ``greedy_policy`` under ``policies_dir`` by exports of the current weights (each written
    next to the old one first, so an interrupted export never leaves a half-written policy),
    and writes the raw policy's checkpoint of this step where the trigger writes its own.
    """
    tf_agent.post_process_policy()  # what the trigger does before saving (a no-op here)
    raw = tf_agent.policy
    if isinstance(raw, greedy_policy.GreedyPolicy):
        raw = raw.wrapped_policy
    policies = {learner.RAW_POLICY_SAVED_MODEL_DIR: raw,
                learner.COLLECT_POLICY_SAVED_MODEL_DIR: tf_agent.collect_policy,
                learner.GREEDY_POLICY_SAVED_MODEL_DIR: greedy_policy.GreedyPolicy(raw)}
    for name, policy in policies.items():
        saver = policy_saver.PolicySaver(policy, train_step=train_step)
        whole_files.write_whole(os.path.join(policies_dir, name), saver.save,
                                fault_point="export")
        if name == learner.RAW_POLICY_SAVED_MODEL_DIR:
            saver.save_checkpoint(os.path.join(
                policies_dir, learner.POLICY_CHECKPOINT_DIR,
                f"policy_checkpoint_{int(train_step.numpy()):010d}"))


def export_keras_model(keras_model, root_dir):
    """Writes ``root_dir/keras_model`` (``model.export``) and ``root_dir/keras_model.keras``.

    Returns ``(keras_model_dir, keras_file)``; the ``.keras`` file reloads with
    ``keras.saving.load_model``.
    """
    keras_model_dir = os.path.join(root_dir, "keras_model")
    whole_files.write_whole(keras_model_dir,
                            lambda path: keras_model.export(path, verbose=False))
    keras_file = whole_files.write_whole(os.path.join(root_dir, "keras_model.keras"),
                                         keras_model.save)
    return keras_model_dir, keras_file
