"""The Keras 3 networks the agents train: builders from ``keras_relational.models``."""

import functools

import numpy as np

from keras_relational import validation
from keras_relational.agents.config import AGENTS
from keras_relational.models import boxworld_agents, precision


def agent_model_fn(agent, observation_shape, num_actions, observation_dtype="uint8",
                   dtype_policy=validation.DEFAULT_DTYPE_POLICY, **model_kwargs):
    """A zero-argument (picklable) builder of the Keras 3 network named ``agent``.

    ``"relational"``: Zambaldi et al. 2019's agent, ``"simplicial"``: Clift et al. 2020's,
    ``"baseline"``: Zambaldi et al.'s non-relational one, ``"clift_relational"``: Clift et al.'s
    relational agent (``simplicial_agent(use_simplicial=False)``); ``model_kwargs`` override the
    builder's defaults (the papers'). Pixel observations (uint8) are scaled to [0, 1] inside the
    network; other observations (e.g. BoxWorld's ``observation_type="one_hot"``) are used as they
    are unless ``model_kwargs`` sets ``input_scale``. The network is built under the Keras
    ``dtype_policy`` (``validation.DTYPE_POLICIES``) each time the builder is called (target
    networks, Ray actors); its logits and value are float32 under every policy.
    """
    validation.check_choice("agent_model_fn", "agent", agent, AGENTS)
    validation.check_dtype_policy("agent_model_fn", dtype_policy)
    if np.dtype(observation_dtype) != np.uint8:
        model_kwargs.setdefault("input_scale", 1.0)
    if agent == "clift_relational":  # Clift et al. 2020, Sec. 4: the same agent, M = 0
        agent, model_kwargs = "simplicial", dict(model_kwargs, use_simplicial=False,
                                                    name="clift_relational_agent")
    builder = getattr(boxworld_agents, f"{agent}_agent")
    return functools.partial(_build_under_policy, builder, dtype_policy,
                             observation_shape=tuple(observation_shape), num_actions=num_actions,
                             **model_kwargs)


def _build_under_policy(builder, dtype_policy, **kwargs):
    with precision.dtype_policy_scope(dtype_policy):
        return builder(**kwargs)
