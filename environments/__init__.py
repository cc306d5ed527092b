"""dm-env environments and supervised data generators (NumPy + dm_env only).

Importing it loads neither TensorFlow nor Keras. One package or module per environment or data
set:

* `boxworld`: Zambaldi et al. 2019's Box-World (`BoxWorld`, `BatchedBoxWorld`, `PRESETS`).
* `bridge_boxworld`: Clift et al. 2020's bridge BoxWorld (`BridgeBoxWorld`,
  `BatchedBridgeBoxWorld`).
* `base`: what every BoxWorld variant shares (specs, actions, episode end, side channel:
  `level(s)`, `solved`, `num_steps`); `rendering`: palettes, `record_episode`, `save_episode`.
* `boxworld_solver`: the oracle (shortest winning plans), `OraclePolicy`, `BatchedOraclePolicy`.
* `TensorBoxWorld`, `TensorBridgeBoxWorld`: the same rules in `keras.ops`, batched pure
  `reset` / `step` functions for compiled loops on any Keras backend (`tensor_base` holds the
  contract; `level_source="device"` draws their levels with the NumPy generator's distribution
  written in `keras.ops`, `tensor_levels`). Loaded lazily (PEP 562): only touching these names
  imports Keras.
* `babi` (Schlag & Schmidhuber 2018: reader and generator), `relations_game` and `polyominoes`
  (Shanahan et al. 2020), `palindromes` and `rule_learning` (Mitchell & Bowers): data sets,
  imported on first use as modules (`from keras_relational.environments import babi`).
* `sc2`: StarCraft II through pysc2 (optional extra `[sc2]`): `SC2Environment`, a dm_env adapter,
  imported as a module (`from keras_relational.environments.sc2 import SC2Environment`).

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

# Name -> module of the tensor environments, which import Keras: loaded on first access only.
_TENSOR = {"TensorBoxWorld": ".boxworld.tensor", "TensorBridgeBoxWorld": ".bridge_boxworld.tensor"}

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
    "TensorBoxWorld",
    "TensorBridgeBoxWorld",
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


def __getattr__(name):
    if name in _TENSOR:
        import importlib

        value = getattr(importlib.import_module(_TENSOR[name], __name__), name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
