"""The bridge BoxWorld oracle: the shortest winning action sequence from any state.

The two chains can be interleaved (Clift et al. 2020, Sec. 3), so the solver runs a breadth-first
search over the true game states (player cell, board, held keys), using the environment's own
move rule (`rules.apply_move`) and never opening the bridge.
"""

from .config import EMPTY, GEM
from .rules import MOVES, apply_move


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
    if GEM in held:
        return None
    targets = []  # the (clamped) target cell of each action from each cell
    for pos in range(num_cells):
        y, x = divmod(pos, cols)
        targets.append([min(max(y + dy, 0), rows - 1) * cols + min(max(x + dx, 0), cols - 1)
                        for dy, dx in MOVES])
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
                    if GEM in new_held:
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
