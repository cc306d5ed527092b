"""The Keras 3 networks the agents train: builders from ``keras_relational.models``."""

import functools

import numpy as np

from keras_relational import validation
from keras_relational.agents.config import AGENTS
from keras_relational.models import boxworld_agents


def agent_model_fn(agent, observation_shape, num_actions, observation_dtype="uint8",
                   **model_kwargs):
    """A zero-argument (picklable) builder of the Keras 3 network named ``agent``.

    ``"relational"``: Zambaldi et al. 2019's agent, ``"simplicial"``: Clift et al. 2020's,
    ``"baseline"``: Zambaldi et al.'s non-relational one, ``"clift_relational"``: Clift et al.'s
    relational agent (``simplicial_agent(use_simplicial=False)``); ``model_kwargs`` override the
    builder's defaults (the papers'). Pixel observations (uint8) are scaled to [0, 1] inside the
    network; other observations (e.g. BoxWorld's ``observation_type="one_hot"``) are used as they
    are unless ``model_kwargs`` sets ``input_scale``.
    """
    validation.check_choice("agent_model_fn", "agent", agent, AGENTS)
    if np.dtype(observation_dtype) != np.uint8:
        model_kwargs.setdefault("input_scale", 1.0)
    if agent == "clift_relational":  # Clift et al. 2020, Sec. 4: the same agent, M = 0
        agent, model_kwargs = "simplicial", dict(model_kwargs, use_simplicial=False,
                                                    name="clift_relational_agent")
    builder = getattr(boxworld_agents, f"{agent}_agent")
    return functools.partial(builder, observation_shape=tuple(observation_shape),
                             num_actions=num_actions, **model_kwargs)
