"""StarCraft II training (installed as ``keras_relational.agents.sc2``; Zambaldi et al. 2019).

The agent (:func:`keras_relational.models.sc2_agent.sc2_agent`) on pysc2 environments
(:class:`keras_relational.environments.sc2.SC2Environment`), trained with V-trace (Espeholt et
al. 2018) on its composite action distribution, in ``keras.ops`` as the compiled loop's learner
or through TF-Agents' V-trace agent:

* ``learning``: :class:`SC2Unroll`, the composite V-trace loss and update
  (:class:`SC2VTraceLearner`);
* ``acting``: :class:`SC2Actor`, two-stage sampling (function id, then its arguments) on ``B``
  environments;
* ``policy``: the greedy policy as one Keras model and its SavedModel export;
* the TF-Agents route (``--trainer=tf_agents``) lives with the TF-Agents trainer:
  ``keras_relational.agents.tf_agents.sc2_network`` (:class:`SC2Network`, the recurrent TF-Agents
  network), ``sc2_policy`` (:class:`SC2Policy`, two-stage sampling) and ``sc2_agent`` (the V-trace
  agent with the composite target and :class:`TFAgentsSC2Trainer`, a ``PyDriver`` and
  ``agent.train``);
* ``checkpointing``: ``root_dir/checkpoints`` (weights, optimizer, update count, sampling state,
  episode returns and, on pysc2's mock, the environments' state) and the resume from them;
* ``train_eval``: the loop that puts them together (the ``train_sc2`` binary).

Needs no pysc2 itself; the environments do (``pip install 'keras-relational[sc2]'``).
"""
