"""Acting: the agent network's forward pass and actions sampled with ``keras.random``.

The seed is a tensor carried in the loop state (``SeedGenerator`` state, read and advanced
inside a ``keras.StatelessScope``), so acting is a pure function: the same state gives the same
actions, under ``jax.jit`` and ``tf.function`` alike, and a resumed run samples what the
uninterrupted one did.
"""

import keras


def forward(model, params, observation, training=False):
    """``(logits float32 [N, A], value float32 [N], non_trainable)`` of ``model`` at ``params``.

    ``params`` is the ``(trainable, non_trainable)`` pair of value lists; the logits are cast to
    float32 (softmax in float32 under 16-bit policies).
    """
    trainable, non_trainable = params
    (logits, value), non_trainable = model.stateless_call(trainable, non_trainable,
                                                          observation, training=training)
    return (keras.ops.cast(logits, "float32"), keras.ops.cast(value, "float32"),
            non_trainable)


def sample_actions(logits, seed_generator, seed):
    """One action per row of ``logits`` ``[N, A]`` and the advanced seed.

    Args:
        logits: float32 ``[N, A]``.
        seed_generator: the ``keras.random.SeedGenerator`` whose state ``seed`` stands for.
        seed: the current value of its state (a tensor in the loop state).

    Returns:
        ``(actions int32 [N], next_seed)``.
    """
    with keras.StatelessScope(state_mapping=[(seed_generator.state, seed)]) as scope:
        actions = keras.random.categorical(logits, 1, dtype="int32", seed=seed_generator)
    return actions[:, 0], scope.get_current_value(seed_generator.state)


def act(model, params, observation, seed_generator, seed):
    """Samples actions from the policy at ``observation``: ``(actions, logits, next_seed)``."""
    logits, _, _ = forward(model, params, observation)
    actions, seed = sample_actions(logits, seed_generator, seed)
    return actions, logits, seed
