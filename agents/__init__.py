"""Reinforcement learning for keras-relational (installed as ``keras_relational.agents``).

One shared core under two trainers, laid out like acme's IMPALA agent (config / networks /
acting / learning / builder). Importing this package, its core or the compiled trainer has no
side effect: only :mod:`keras_relational.agents.tf_agents` routes ``tf.keras`` to tf-keras.

The shared core (pure Python or ``keras.ops``, any backend):

* ``config``: the hyperparameters both trainers share (:class:`TrainConfig`, the papers'
  defaults), the TF-Agents trainer's (:class:`TFAgentsConfig`; the compiled trainer's
  ``CompiledConfig`` is in ``compiled.config``), the environment configs and what a resume may
  change.
* ``presets``: the papers' named runs (Zambaldi et al. 2019, Clift et al. 2020) and fast ones.
* ``networks``: the Keras 3 networks an agent name stands for.
* ``vtrace``: V-trace targets in ``keras.ops`` (Espeholt et al. 2018), used by both trainers.
* ``optimizers``: the papers' RMSProp and Adam, for Keras 3 or tf-keras.
* ``curves``: the ``curves.jsonl`` training curves every trainer writes.
* ``play``: plays an exported policy or Keras model.

The trainers on top:

* ``compiled``: environment steps, acting and V-trace learning in one compiled function per
  update (JAX or TensorFlow; no TF-Agents).
* ``tf_agents``: TF-Agents' actors and learner, V-trace and PPO, Ray actors (sets
  ``TF_USE_LEGACY_KERAS=1`` when imported).
* ``sc2``: StarCraft II on either trainer's learner.
"""
