"""Oracle solvers: shortest winning action sequences for BoxWorld and bridge BoxWorld.

Used by the tests (every generated level is solvable), as a behaviour-cloning teacher and as the
"optimal" line of plots.

* `BoxWorld` (Zambaldi et al. 2019): `solve_boxworld`, shortest grid paths between the chain's
  waypoints (`boxworld.oracle`). It never opens a distractor box.
* `BridgeBoxWorld` (Clift et al. 2020): `solve_bridge`, a breadth-first search over the true game
  states with the environment's own move rule (`bridge_boxworld.oracle`). It never opens the
  bridge.

This module dispatches on the variant and turns the plans into policies for one environment
(`OraclePolicy`) or a batched one (`BatchedOraclePolicy`).

Example:

```python
from keras_relational.environments import BoxWorld, boxworld_solver

env = BoxWorld(seed=0)
timestep = env.reset()
for action in boxworld_solver.solve(env):    # shortest plan from the current state
    timestep = env.step(action)
assert env.solved
```
"""

import numpy as np

from .boxworld import BoxWorld
from .boxworld.oracle import solve_boxworld
from .bridge_boxworld import BridgeBoxWorld, BridgeLevel
from .bridge_boxworld.oracle import solve_bridge

__all__ = ["BatchedOraclePolicy", "OraclePolicy", "solve", "solve_boxworld", "solve_bridge",
           "solve_level", "solve_state"]


def solve(env):
    """Shortest winning plan from the current state of a `BoxWorld` or `BridgeBoxWorld`.

    Returns None when the episode can no longer be won (or has ended).
    """
    if isinstance(env, BoxWorld):
        return solve_boxworld(env.config, env.level, env.grid, env.agent_position,
                              env.held_key)
    if isinstance(env, BridgeBoxWorld):
        return solve_bridge(env.config, env.level, env.grid, env.agent_position, env.inventory)
    raise TypeError(f"`env`: expected a BoxWorld or BridgeBoxWorld, received {type(env)!r}.")


def solve_level(level, config):
    """Shortest winning plan of a level from its start state."""
    if isinstance(level, BridgeLevel):
        return solve_bridge(config, level, level.grid, (0, 0), ())
    return solve_boxworld(config, level, level.grid, level.agent, -1)


class OraclePolicy:
    """The oracle as a policy `timestep -> action` for a single env (behaviour cloning teacher).

    Plans once per episode and re-plans whenever the env's step count shows that someone else
    moved it (e.g. an epsilon-greedy mix). Returns action 0 when nothing can be won any more.

    Example:

    ```python
    env = BoxWorld(seed=0)
    policy = OraclePolicy(env)
    timestep = env.reset()
    while not timestep.last():
        timestep = env.step(policy(timestep))
    ```
    """

    def __init__(self, env):
        self._env = env
        self._plan = []
        self._key = None

    def __call__(self, timestep=None):
        env = self._env
        key = (id(env.level), env.num_steps)
        if key != self._key or not self._plan:
            self._plan = list(reversed(solve(env) or [0]))
        self._key = (id(env.level), env.num_steps + 1)
        return self._plan.pop()


def solve_state(config, level, grid, agent, held):
    """Shortest winning plan of a state given as `(config, level, grid, agent, held)`.

    `held` is the held key (BoxWorld) or the inventory (bridge BoxWorld); the tuple is what
    `BatchedBoxWorld.state(i)` and `BatchedBridgeBoxWorld.state(i)` return.
    """
    if isinstance(level, BridgeLevel):
        return solve_bridge(config, level, grid, agent, held)
    return solve_boxworld(config, level, grid, agent, held)


class BatchedOraclePolicy:
    """The oracle for a `BatchedBoxWorld` / `BatchedBridgeBoxWorld`: `timestep -> int32 [N]`.

    Keeps one plan per slot and re-plans a slot when it starts a new level or was moved off plan.
    """

    def __init__(self, env):
        self._env = env
        self._plans = [[] for _ in range(env.batch_size)]
        self._keys = [None] * env.batch_size

    def __call__(self, timestep=None):
        env = self._env
        levels, steps = env.levels, env.num_steps
        actions = np.zeros(env.batch_size, np.int32)
        for i, level in enumerate(levels):
            key = (id(level), int(steps[i]))
            if key != self._keys[i] or not self._plans[i]:
                self._plans[i] = list(reversed(solve_state(*env.state(i)) or [0]))
            self._keys[i] = (id(level), int(steps[i]) + 1)
            actions[i] = self._plans[i].pop()
        return actions
