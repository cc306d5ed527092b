"""Atari games (``keras_relational.environments.atari``) as a batched TF-Agents environment.

``make_atari_environment`` steps ``num_envs`` games together (TF-Agents'
``BatchedPyEnvironment`` over ``DmControlWrapper``-converted dm_env games), the batched interface
of the actors in :mod:`keras_relational.agents.tf_agents.acting`; the network is e.g.
``keras_relational.models.atari_agents.atari_predinet_agent(recurrent=False)`` in a
``Keras3Network`` (the V-trace learner here is feed-forward; the paper's agents carry an LSTM).
"""

from tf_agents.environments import batched_py_environment
from tf_agents.environments.dm_control_wrapper import DmControlWrapper

from keras_relational import validation
from keras_relational.environments import atari


def make_atari_environment(game="pong", num_envs=2, seed=0, **env_kwargs):
    """``num_envs`` copies of ``atari.AtariEnvironment(game, ...)`` with seeds ``seed + i``."""
    envs = [DmControlWrapper(atari.AtariEnvironment(
        game, seed=validation.offset_seed("seed", seed, i), **env_kwargs))
            for i in range(num_envs)]
    return batched_py_environment.BatchedPyEnvironment(envs, multithreading=False)
