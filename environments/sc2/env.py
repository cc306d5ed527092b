"""A dm_env adapter over pysc2's StarCraft II environment (Vinyals et al. 2017, SC2LE).

Observations are what :func:`keras_relational.models.sc2_agent.sc2_agent` takes: ``screen``
``[S, S, 27]`` and ``minimap`` ``[M, M, 11]`` int32 feature layers (channels last), ``player``
``[11]`` float32, ``available_actions`` ``[573]`` float32 0/1 mask, and the adapter's record of its
previous action: ``previous_function`` int32 and ``previous_spatial`` ``[2]`` float32 (did it take a
screen / a minimap argument; Zambaldi et al. 2019, App. C tile these over the spatial inputs).

An action is a dict: ``function`` (pysc2 function id) and one int32 scalar per argument type
(``screen``, ``minimap``, ``screen2``: flat index ``row * size + column``; non-spatial: the index).
The arguments the chosen function does not take are ignored, so a policy emits all of them. A
function that is not available raises ValueError (pysc2 would fail later, less clearly). As
dm_env asks, a step on a fresh environment or after the last step of an episode resets it.

Example (needs pysc2 and ``PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python``; no game for ``mock``):

```python
env = SC2Environment.mock(map_name="MoveToBeacon")
timestep = env.reset()
timestep = env.step({"function": 0})  # no_op
```
"""

import dm_env
import numpy as np
from dm_env import specs

from ._pysc2_import import import_pysc2
from .maps import check_game

PREVIOUS_SPATIAL = ("screen", "minimap")  # screen2 goes with screen


class SC2Environment(dm_env.Environment):
    """dm_env view of one agent of a ``pysc2`` environment (``SC2Env`` or ``SC2TestEnv``).

    Args:
        env: the pysc2 environment, built with feature layers of square screen and minimap.
    """

    def __init__(self, env):
        self._pysc2 = import_pysc2()
        self._env = env
        (observation_spec,) = env.observation_spec()
        (self._action_spec,) = env.action_spec()
        self._screen_shape = tuple(observation_spec["feature_screen"])
        self._minimap_shape = tuple(observation_spec["feature_minimap"])
        # The environment's own specs: pysc2's global actions.FUNCTIONS has unsized spatial args.
        self._functions = self._action_spec.functions
        self._types = {t.name: t for t in self._action_spec.types}
        self._previous = (0, np.zeros(2, np.float32))
        self._available = None
        self._needs_reset = True

    @classmethod
    def from_map(cls, map_name, screen_size=32, minimap_size=32, step_mul=8, random_seed=None,
                 visualize=False):
        """Plays ``map_name`` (e.g. ``"MoveToBeacon"``) in the game found through ``SC2PATH``.

        Raises FileNotFoundError naming ``SC2PATH`` when the game or the map is missing.
        """
        modules = import_pysc2()
        check_game(map_name)
        features = modules["features"]
        return cls(modules["sc2_env"].SC2Env(
            map_name=map_name, step_mul=step_mul, random_seed=random_seed, visualize=visualize,
            players=[modules["sc2_env"].Agent(modules["sc2_env"].Race.terran)],
            agent_interface_format=features.AgentInterfaceFormat(
                feature_dimensions=features.Dimensions(screen=screen_size,
                                                       minimap=minimap_size))))

    @classmethod
    def mock(cls, map_name="MoveToBeacon", screen_size=32, minimap_size=32, episode_length=10):
        """pysc2's ``SC2TestEnv``: spec-true observations without the game."""
        modules = import_pysc2()
        features = modules["features"]
        env = modules["mock_sc2_env"].SC2TestEnv(
            map_name=map_name, agent_interface_format=[features.AgentInterfaceFormat(
                feature_dimensions=features.Dimensions(screen=screen_size,
                                                       minimap=minimap_size))])
        env.episode_length = episode_length
        return cls(env)

    def observation_spec(self):
        num_functions = len(self._functions)
        screen = self._screen_shape[1:] + self._screen_shape[:1]
        minimap = self._minimap_shape[1:] + self._minimap_shape[:1]
        return {
            "screen": specs.Array(screen, np.int32, "screen"),
            "minimap": specs.Array(minimap, np.int32, "minimap"),
            "player": specs.Array((11,), np.float32, "player"),
            "available_actions": specs.BoundedArray((num_functions,), np.float32, 0.0, 1.0,
                                                    "available_actions"),
            "previous_function": specs.BoundedArray((), np.int32, 0, num_functions - 1,
                                                    "previous_function"),
            "previous_spatial": specs.BoundedArray((2,), np.float32, 0.0, 1.0,
                                                   "previous_spatial"),
        }

    def argument_mask(self):
        """``(names, mask)``: the argument type names in pysc2's order and a float32
        ``[num_functions, len(names)]`` 0/1 matrix saying which function takes which argument."""
        names = tuple(self._types)
        mask = np.zeros((len(self._functions), len(names)), np.float32)
        for function in self._functions:
            for arg_type in function.args:
                mask[int(function.id), names.index(arg_type.name)] = 1.0
        return names, mask

    def reward_spec(self):
        return specs.Array((), np.float32, "reward")

    def discount_spec(self):
        return specs.BoundedArray((), np.float32, 0.0, 1.0, "discount")

    def _argument_size(self, arg_type):
        return int(np.prod(arg_type.sizes))

    def action_spec(self):
        spec = {"function": specs.BoundedArray((), np.int32, 0, len(self._functions) - 1,
                                               "function")}
        for name, arg_type in self._types.items():
            spec[name] = specs.BoundedArray((), np.int32, 0, self._argument_size(arg_type) - 1,
                                            name)
        return spec

    def _observation(self, obs):
        mask = np.zeros(len(self._functions), np.float32)
        mask[np.asarray(obs["available_actions"], np.int64)] = 1.0
        function, spatial = self._previous
        return {
            "screen": np.moveaxis(np.asarray(obs["feature_screen"], np.int32), 0, -1),
            "minimap": np.moveaxis(np.asarray(obs["feature_minimap"], np.int32), 0, -1),
            "player": np.asarray(obs["player"], np.float32),
            "available_actions": mask,
            "previous_function": np.int32(function),
            "previous_spatial": spatial.copy(),
        }

    def _timestep(self, timesteps):
        (timestep,) = timesteps
        self._available = np.asarray(timestep.observation["available_actions"])
        self._needs_reset = timestep.last()
        return dm_env.TimeStep(
            dm_env.StepType(int(timestep.step_type)),
            None if timestep.first() else np.float32(timestep.reward),
            None if timestep.first() else np.float32(timestep.discount),
            self._observation(timestep.observation))

    def reset(self):
        self._previous = (0, np.zeros(2, np.float32))
        return self._timestep(self._env.reset())

    def function_call(self, action):
        """The ``pysc2`` ``FunctionCall`` for ``action`` (a dict, see the module docstring)."""
        function = int(action["function"])
        if not 0 <= function < len(self._functions):
            raise ValueError(f"SC2Environment: `function` must be in [0, {len(self._functions)})"
                             f"; received {function}")
        if function not in self._available:
            raise ValueError(f"SC2Environment: function {function} "
                             f"({self._functions[function].name}) is not available; available: "
                             f"{sorted(int(f) for f in self._available)}")
        arguments = []
        for arg_type in self._functions[function].args:
            value = int(action.get(arg_type.name, 0))
            size = self._argument_size(arg_type)
            if not 0 <= value < size:
                raise ValueError(f"SC2Environment: argument `{arg_type.name}` must be in "
                                 f"[0, {size}); received {value}")
            if arg_type.name in ("screen", "minimap", "screen2"):
                width = arg_type.sizes[0]
                arguments.append([value % width, value // width])  # pysc2 points are (x, y)
            else:
                arguments.append([value])
        return self._pysc2["actions"].FunctionCall(function, arguments)

    def step(self, action):
        if self._needs_reset:  # dm_env: a step on a fresh or finished episode starts a new one
            return self.reset()
        call = self.function_call(action)
        names = {arg.name for arg in self._functions[call.function].args}
        spatial = np.array([bool(names & {"screen", "screen2"}), "minimap" in names], np.float32)
        self._previous = (int(call.function), spatial)
        return self._timestep(self._env.step([call]))

    def get_state(self):
        """The state of pysc2's mock behind this adapter (picklable), or None for the game.

        The mock (``SC2TestEnv``) returns fixed observations, so the adapter's record of the
        previous action, the available functions, whether the next step resets, and the mock's
        step counter are all of it: :meth:`set_state` makes a fresh mock continue exactly as
        this one (what ``train_sc2``'s checkpoints need to resume a run as the uninterrupted
        one). The game's state lives in the StarCraft II process, which pysc2 can neither save
        nor load: None (a resumed run starts new episodes).
        """
        if not isinstance(self._env, self._pysc2["mock_sc2_env"].SC2TestEnv):
            return None
        function, spatial = self._previous
        return dict(previous_function=int(function), previous_spatial=spatial.copy(),
                    available=None if self._available is None else self._available.copy(),
                    needs_reset=bool(self._needs_reset),
                    # pysc2 4.0's mock counts its steps here (no public accessor).
                    episode_steps=int(self._env._episode_steps))

    def set_state(self, state):
        """Restores :meth:`get_state`'s ``state`` into an adapter over pysc2's mock."""
        if not isinstance(self._env, self._pysc2["mock_sc2_env"].SC2TestEnv):
            raise ValueError("SC2Environment.set_state: only pysc2's mock environment can be "
                             "restored; the game's state lives in the StarCraft II process.")
        if state is None:
            raise ValueError("SC2Environment.set_state: expected a state of get_state(), "
                             "received None (the state of a game, which cannot be restored).")
        self._previous = (int(state["previous_function"]),
                          np.asarray(state["previous_spatial"], np.float32).copy())
        self._available = None if state["available"] is None else np.asarray(state["available"])
        self._needs_reset = bool(state["needs_reset"])
        self._env._episode_steps = int(state["episode_steps"])

    def close(self):
        self._env.close()
