"""Box-World (Zambaldi et al. 2019, Sec. 3.1 and App. A) as a `dm_env.Environment`.

A 12 x 12 room inside a one-cell black wall (a 14 x 14 frame, one pixel per cell). The agent (dark
grey) collects the single loose key, opens the box whose lock has the key's colour, takes the key
inside, and so on along a chain of `L` boxes, the last of which holds the white gem. A box is two
horizontally adjacent pixels: the content on the left, the lock on the right. Distractor boxes
branch off the chain; opening one ends the episode with reward -1. The held key is drawn at the
top-left wall pixel. Actions: 0 up, 1 down, 2 left, 3 right.

Rewards: +1 for opening a box on the solution path, -1 for opening a distractor box (the episode
terminates), +10 for collecting the gem (terminates), 0 otherwise. After `max_steps` (120) actions
the episode is *truncated* (`dm_env.truncation`, discount `time_limit_discount`, default 1).

Details the paper leaves open follow DeepMind's open-source pycolab Box-World (tagged [R]); our
own choices are tagged [A]. One module a concern:

* `config`: constants (cell codes, rewards, colours, channels) and `BoxWorldConfig`;
* `generator`: the level types (`Key`, `Box`, `BoxWorldLevel`) and `generate_level`;
* `rules`: one move, for one level (`apply_move`) and for N levels (`apply_moves`);
* `rendering`: RGB and one-hot observations as pure functions of a state;
* `env`: `BoxWorld` and its `BoxWorldState`; `batched`: `BatchedBoxWorld`;
* `presets`: the paper's named settings; `oracle`: the shortest winning plan.

Example:

```python
from keras_relational.environments import BoxWorld

env = BoxWorld(goal_length=(1, 2, 3, 4), num_distractors=(0, 1, 2, 3, 4), seed=0)
timestep = env.reset()                 # timestep.observation: uint8 [14, 14, 3]
timestep = env.step(3)                 # move right
env.level.path                         # side channel: the solution boxes, distractors, L, D
```
"""

from ..base import ACTION_NAMES, NUM_ACTIONS, Draws, coerce_action
from .batched import BatchedBoxWorld
from .config import (
    AGENT_RGB,
    CHANNEL_AGENT,
    CHANNEL_FLOOR,
    CHANNEL_GEM,
    CHANNEL_KEY0,
    CHANNEL_WALL,
    COLOR_SATURATION,
    COLOR_VALUE,
    DEFAULT_HELDOUT_COLORS,
    DEFAULT_HELDOUT_PAIRS,
    FLOOR,
    FLOOR_RGB,
    GEM,
    GEM_CONTENT,
    GEM_RGB,
    KEY0,
    MAX_LEVEL_ATTEMPTS,
    MAX_PLACEMENT_FAILURES,
    MAX_STEPS,
    REWARD_DISTRACTOR_BOX,
    REWARD_GEM,
    REWARD_PATH_BOX,
    WALL,
    WALL_RGB,
    BoxWorldConfig,
    max_boxes,
)
from .env import BoxWorld, BoxWorldState
from .generator import Box, BoxWorldLevel, Key, LevelGenerationError, generate_level
from .oracle import grid_path, solve_boxworld
from .presets import PRESETS
from .rendering import one_hot_frames, render_one_hot, render_rgb, rgb_frames

__all__ = [
    "ACTION_NAMES", "AGENT_RGB", "CHANNEL_AGENT", "CHANNEL_FLOOR", "CHANNEL_GEM", "CHANNEL_KEY0",
    "CHANNEL_WALL", "COLOR_SATURATION", "COLOR_VALUE", "DEFAULT_HELDOUT_COLORS",
    "DEFAULT_HELDOUT_PAIRS", "FLOOR", "FLOOR_RGB", "GEM", "GEM_CONTENT", "GEM_RGB", "KEY0",
    "MAX_LEVEL_ATTEMPTS", "MAX_PLACEMENT_FAILURES", "MAX_STEPS", "NUM_ACTIONS", "PRESETS",
    "REWARD_DISTRACTOR_BOX", "REWARD_GEM", "REWARD_PATH_BOX", "WALL", "WALL_RGB",
    "BatchedBoxWorld", "Box", "BoxWorld", "BoxWorldConfig", "BoxWorldLevel", "BoxWorldState",
    "Draws", "Key", "LevelGenerationError", "coerce_action", "generate_level", "grid_path",
    "max_boxes", "one_hot_frames", "render_one_hot", "render_rgb", "rgb_frames",
    "solve_boxworld",
]
