"""The BoxWorld oracle: the shortest winning action sequence from any state.

The solution is a chain (Zambaldi et al. 2019, App. A), so the shortest route visits, in order,
the loose key, then each path box's lock and content, the last content being the gem. Between two
consecutive waypoints the obstacles are fixed (walls and every unopened box or untaken key), so
the shortest episode is the sum of shortest grid paths between waypoints (one breadth-first search
per leg). It never opens a distractor box.
"""

from .config import FLOOR, GEM, KEY0


def grid_path(grid, start, goal, deltas):
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
        leg = grid_path(grid, pos, waypoint, config.deltas)
        if leg is None:
            return None
        actions += leg
        pos = waypoint
        grid[waypoint] = FLOOR
    return actions
