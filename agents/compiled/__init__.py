"""The compiled actor-learner loop (installed as ``keras_relational.agents.compiled``).

Environment steps (the tensor BoxWorlds of ``keras_relational.environments``), acting and V-trace
learning in one compiled function per update, under any Keras backend that compiles whole
functions: ``jax.jit`` with ``lax.scan`` under JAX, ``tf.function(jit_compile=True)`` under
TensorFlow (the Podracer "Anakin" layout; Hessel et al. 2021). It needs neither TensorFlow nor
TF-Agents under JAX, and importing it has no side effect. It builds on the shared core
(``keras_relational.agents``: config, presets, networks, V-trace, optimizers, curves). Laid out
like acme's IMPALA agent, one concern a module:

* ``config``: :class:`CompiledConfig`, the core's ``TrainConfig`` (the shared hyperparameters)
  plus the level source and banks, updates per call, learner minibatches and epochs, and
  devices.
* ``backend``: compiling a function and taking gradients, the two backend-specific parts.
* ``acting``: the network's forward pass and actions sampled with ``keras.random``.
* ``learning``: the V-trace loss and a step of a Keras optimizer's stateless API.
* ``loop``: :class:`CompiledLoop`, one compiled update (environment steps, acting, learning).
* ``levels``: level banks from the NumPy generator, drawn ahead on a host thread.
* ``evaluation``, ``progress``, ``checkpointing``: solve rates on fresh levels, progress lines,
  atomic checkpoints (TensorBoard event files without TensorFlow:
  ``keras_relational.without_tensorflow``).
* ``train_eval``: the loop that puts them together (``train_boxworld --trainer=compiled``).

Example::

    from keras_relational.agents.compiled import train_eval

    result = train_eval.train_eval("/tmp/compiled_run", num_envs=16, unroll_length=5,
                                   num_iterations=10, eval_episodes=8,
                                   env_kwargs=dict(goal_length=1, num_distractors=0,
                                                   room_size=6, observation_type="one_hot"))
"""
