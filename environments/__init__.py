"""dm-env environments and supervised data generators (NumPy + dm_env only).

Never imports TensorFlow or Keras. One package or module per environment or data set:

* `boxworld`: Zambaldi et al. 2019's Box-World (`BoxWorld`, `BatchedBoxWorld`, `PRESETS`).
* `bridge_boxworld`: Clift et al. 2020's bridge BoxWorld (`BridgeBoxWorld`,
  `BatchedBridgeBoxWorld`).
* `base`: what every BoxWorld variant shares (specs, actions, episode end, side channel:
  `level(s)`, `solved`, `num_steps`); `rendering`: palettes, `record_episode`, `save_episode`.
* `boxworld_solver`: the oracle (shortest winning plans), `OraclePolicy`, `BatchedOraclePolicy`.
* `babi` (Schlag & Schmidhuber 2018: reader and generator), `relations_game` and `polyominoes`
  (Shanahan et al. 2020), `palindromes` and `rule_learning` (Mitchell & Bowers): data sets,
  imported on first use as modules (`from keras_relational.environments import babi`).

Example:

```python
from keras_relational.environments import BoxWorld, OraclePolicy, record_episode, save_episode

env = BoxWorld(seed=0)
save_episode(record_episode(env, OraclePolicy(env)), "/tmp/oracle.gif")
```
"""

from . import base, boxworld, boxworld_solver, bridge_boxworld, rendering
from .boxworld import (
    PRESETS,
    BatchedBoxWorld,
    BoxWorld,
    BoxWorldConfig,
    BoxWorldLevel,
    BoxWorldState,
    LevelGenerationError,
)
from .boxworld_solver import BatchedOraclePolicy, OraclePolicy, solve, solve_level
from .bridge_boxworld import (
    BatchedBridgeBoxWorld,
    BridgeBoxWorld,
    BridgeConfig,
    BridgeLevel,
    BridgeState,
    puzzle_types,
)
from .rendering import record_episode, save_episode

__all__ = [
    "PRESETS",
    "BatchedBoxWorld",
    "BatchedBridgeBoxWorld",
    "BatchedOraclePolicy",
    "BoxWorld",
    "BoxWorldConfig",
    "BoxWorldLevel",
    "BoxWorldState",
    "BridgeBoxWorld",
    "BridgeConfig",
    "BridgeLevel",
    "BridgeState",
    "LevelGenerationError",
    "OraclePolicy",
    "base",
    "boxworld",
    "boxworld_solver",
    "bridge_boxworld",
    "puzzle_types",
    "record_episode",
    "rendering",
    "save_episode",
    "solve",
    "solve_level",
]
