"""Bridge BoxWorld (Clift et al. 2020, Sec. 3 and App. F.1.2) as a `dm_env.Environment`.

A 7-row x 9-column board (no wall; moves off the board are no-ops) plus an inventory column on the
right. The gem is a 2 x 2 block: two white tiles on the left and two locks on the right, which open
together when the player holds *both* lock colours. Two disjoint key chains of length L lead to the
two gem locks. With probability 1/2 a "bridge" box has its lock on the top chain and its key on the
bottom chain; opening it ends the episode with -1. The player starts at the top-left corner.

Rewards (Clift et al. 2020, Sec. 3): +1 whenever the inventory changes (loose key or box), +10 for
the gem (ends the episode), -1 for opening the bridge (ends the episode). No step limit by default.

Actions (house order, shared with `BoxWorld`): 0 up, 1 down, 2 left, 3 right. The authors' code
numbers them 0 left, 1 up, 2 right, 3 down; `CLIFT_ACTIONS[i]` is our index of their action i.
Details from the authors' released code are tagged [C]. One module a concern: `config`,
`generator`, `rules`, `rendering`, `env`, `batched`, `oracle` (as in the `boxworld` package).

Example:

```python
from keras_relational.environments import BridgeBoxWorld

env = BridgeBoxWorld(seed=0)
timestep = env.reset()                 # timestep.observation: uint8 [7, 10, 3]
env.level.puzzle_type                  # (a, b, c), (L, 0, 0) without a bridge
eval_env = BridgeBoxWorld(puzzle_type=(3, 2, 5), seed=1)   # one puzzle type, e.g. Fig. 14
```
"""

from ..base import Draws
from .batched import BatchedBridgeBoxWorld
from .config import (
    BRIDGE_PROBABILITY,
    CHANNEL_FLOOR,
    CHANNEL_GEM,
    CHANNEL_KEY0,
    CHANNEL_PLAYER,
    CHANNEL_SLOT,
    COLOR_SATURATION,
    COLOR_VALUE,
    COLS,
    EMPTY,
    EMPTY_SLOT_RGB,
    FLOOR_RGB,
    GEM,
    GEM_RGB,
    NUM_COLORS,
    PLAYER_RGB,
    REWARD_BRIDGE,
    REWARD_GEM,
    REWARD_KEY,
    ROWS,
    SOLUTION_LENGTHS,
    BridgeConfig,
    puzzle_types,
)
from .env import BridgeBoxWorld, BridgeState
from .generator import BridgeLevel, generate_level
from .oracle import solve_bridge
from .rendering import colour_tables, one_hot_frames, render_one_hot, render_rgb, rgb_frames
from .rules import CLIFT_ACTIONS, MOVES, apply_move, apply_moves

__all__ = [
    "BRIDGE_PROBABILITY", "CHANNEL_FLOOR", "CHANNEL_GEM", "CHANNEL_KEY0", "CHANNEL_PLAYER",
    "CHANNEL_SLOT", "CLIFT_ACTIONS", "COLOR_SATURATION", "COLOR_VALUE", "COLS", "EMPTY",
    "EMPTY_SLOT_RGB", "FLOOR_RGB", "GEM", "GEM_RGB", "MOVES", "NUM_COLORS", "PLAYER_RGB",
    "REWARD_BRIDGE", "REWARD_GEM", "REWARD_KEY", "ROWS", "SOLUTION_LENGTHS",
    "BatchedBridgeBoxWorld", "BridgeBoxWorld", "BridgeConfig", "BridgeLevel", "BridgeState",
    "Draws", "apply_move", "apply_moves", "colour_tables", "generate_level", "one_hot_frames",
    "puzzle_types", "render_one_hot", "render_rgb", "rgb_frames", "solve_bridge",
]
