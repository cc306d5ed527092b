"""dm-env environments and supervised data generators (NumPy + dm_env only).

Never imports TensorFlow or Keras. The BoxWorld family is exported here:

* `BoxWorld`: Zambaldi et al. 2019's Box-World, a `dm_env.Environment`.
* `BridgeBoxWorld`: Clift et al. 2020's bridge BoxWorld, a `dm_env.Environment`.
* `BatchedBoxWorld`, `BatchedBridgeBoxWorld`: N levels stepped together in NumPy.
* `boxworld_solver`: the oracle (shortest winning plans), `OraclePolicy`, `BatchedOraclePolicy`.
* `rendering`: palettes, `record_episode` and `save_episode` (GIF / PNG).

Example:

```python
from keras_relational.environments import BoxWorld, OraclePolicy, record_episode, save_episode

env = BoxWorld(seed=0)
save_episode(record_episode(env, OraclePolicy(env)), "/tmp/oracle.gif")
```
"""

from . import batched_boxworld, boxworld, boxworld_solver, bridge_boxworld, rendering
from .batched_boxworld import BatchedBoxWorld, BatchedBridgeBoxWorld
from .boxworld import (
    PRESETS,
    BoxWorld,
    BoxWorldConfig,
    BoxWorldLevel,
    BoxWorldState,
    LevelGenerationError,
)
from .boxworld_solver import BatchedOraclePolicy, OraclePolicy, solve, solve_level
from .bridge_boxworld import BridgeBoxWorld, BridgeConfig, BridgeLevel, BridgeState, puzzle_types
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
    "batched_boxworld",
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
