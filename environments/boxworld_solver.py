"""Oracle solvers: shortest winning action sequences for BoxWorld and bridge BoxWorld.

Used by the tests (every generated level is solvable), as a behaviour-cloning teacher and as the
"optimal" line of plots.

* `BoxWorld` (Zambaldi et al. 2019): the solution is a chain, so the shortest route visits, in
  order, the loose key, then each path box's lock and content, the last content being the gem.
  Between two consecutive waypoints the set of obstacles is fixed (walls and every unopened box
  or untaken key), so the shortest episode is the sum of shortest grid paths between waypoints
  (one breadth-first search per leg). It never opens a distractor box.
* `BridgeBoxWorld` (Clift et al. 2020): the two chains can be interleaved, so the solver runs a
  breadth-first search over the true game states (player cell, board, held keys), using the
  environment's own move rule and never opening the bridge.

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

from . import bridge_boxworld
from .boxworld import FLOOR, GEM, KEY0, BoxWorld
from .bridge_boxworld import EMPTY, BridgeBoxWorld, apply_move


def _grid_path(grid, start, goal, deltas):
    """Shortest action list from `start` to `goal` over FLOOR cells (goal itself may be any)."""
    if start == goal:
        return []
    previous = {start: None}
    frontier = [start]
    while frontier:
        next_frontier = []
        for cell in frontier:
            for action, delta in enumerate(deltas):
                neighbour = cell + delta
                if neighbour in previous:
                    continue
                if neighbour == goal:
                    actions = [action]
                    while previous[cell] is not None:
                        cell, action = previous[cell]
                        actions.append(action)
                    return actions[::-1]
                if grid[neighbour] == FLOOR:
                    previous[neighbour] = (cell, action)
                    next_frontier.append(neighbour)
        frontier = next_frontier
    return None


def solve_boxworld(config, level, grid, agent, held):
    """Shortest winning plan of a BoxWorld state, or None if it cannot be won any more.

    Args:
      config: the env's `BoxWorldConfig`.
      level: the `BoxWorldLevel` being played.
      grid: current cell codes (`[F, F]` array or flat sequence).
      agent: the agent's cell (row, col).
      held: palette colour of the held key, or -1 / None.

    Returns:
      A list of actions (0 up, 1 down, 2 left, 3 right).
    """
    size = config.frame_size
    grid = [int(c) for c in (grid.reshape(-1) if hasattr(grid, "reshape") else grid)]
    held = -1 if held is None else held
    pos = agent[0] * size + agent[1]
    path = level.path
    opened = 0
    while opened < len(path) and grid[path[opened].row * size + path[opened].col + 1] == FLOOR:
        opened += 1
    waypoints = []
    if opened < len(path):
        need = path[opened].lock
        if held != need:
            if opened == 0:
                cell = level.loose_key.row * size + level.loose_key.col
            else:
                cell = path[opened - 1].row * size + path[opened - 1].col
            if grid[cell] != KEY0 + need:
                return None  # the key of the next path box is gone
            waypoints.append(cell)
        for box in path[opened:]:
            content = box.row * size + box.col
            waypoints += [content + 1, content]  # open the lock, then step left onto the content
    else:
        gem = path[-1].row * size + path[-1].col
        if grid[gem] != GEM:
            return None  # already collected
        waypoints.append(gem)
    actions = []
    for waypoint in waypoints:
        leg = _grid_path(grid, pos, waypoint, config.deltas)
        if leg is None:
            return None
        actions += leg
        pos = waypoint
        grid[waypoint] = FLOOR
    return actions


def solve_bridge(config, level, grid, agent, inventory):
    """Shortest winning plan of a bridge BoxWorld state (BFS over game states), or None.

    Args:
      config: the env's `BridgeConfig`.
      level: the `BridgeLevel` being played.
      grid: current abstract tile codes (`[rows, cols]` array or flat sequence).
      agent: the player's cell (row, col).
      inventory: held abstract colours.
    """
    rows, cols = config.rows, config.cols
    num_cells = rows * cols
    grid = tuple(int(c) for c in (grid.reshape(-1) if hasattr(grid, "reshape") else grid))
    bridge = -1 if level.bridge_cell is None else level.bridge_cell[0] * cols + level.bridge_cell[1]
    held = tuple(sorted(inventory))
    if bridge_boxworld.GEM in held:
        return None
    targets = []  # the (clamped) target cell of each action from each cell
    for pos in range(num_cells):
        y, x = divmod(pos, cols)
        targets.append([min(max(y + dy, 0), rows - 1) * cols + min(max(x + dx, 0), cols - 1)
                        for dy, dx in bridge_boxworld._MOVES])
    boards = [(grid, held)]  # a state is the integer pos + num_cells * board index
    board_index = {boards[0]: 0}
    start = agent[0] * cols + agent[1]
    previous = {start: None}
    frontier = [start]
    while frontier:
        next_frontier = []
        for state in frontier:
            board, pos = divmod(state, num_cells)
            cells, held = boards[board]
            for action, target in enumerate(targets[pos]):
                if cells[target] == EMPTY:
                    successor = target + num_cells * board
                else:
                    new_cells, new_held = list(cells), list(held)
                    moved = apply_move(new_cells, new_held, pos, action, rows, cols)
                    if moved == pos or moved == bridge:
                        continue  # blocked, or the bridge (a lost episode)
                    if bridge_boxworld.GEM in new_held:
                        actions = [action]
                        while previous[state] is not None:
                            state, action = previous[state]
                            actions.append(action)
                        return actions[::-1]
                    key = (tuple(new_cells), tuple(sorted(new_held)))
                    if key not in board_index:
                        board_index[key] = len(boards)
                        boards.append(key)
                    successor = moved + num_cells * board_index[key]
                if successor not in previous:
                    previous[successor] = (state, action)
                    next_frontier.append(successor)
        frontier = next_frontier
    return None


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
    if isinstance(level, bridge_boxworld.BridgeLevel):
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
    if isinstance(level, bridge_boxworld.BridgeLevel):
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
