"""StarCraft II through pysc2 (optional extra ``[sc2]``): :class:`SC2Environment`, a dm_env
adapter, and :func:`import_pysc2`, which imports pysc2 4.0 on Python >= 3.11 (see docs/sc2.md).

Importing this package does not import pysc2; building an environment does.
"""

from ._pysc2_import import check_protobuf, import_pysc2
from .env import SC2Environment
from .maps import MINI_GAMES, check_game

__all__ = ["MINI_GAMES", "SC2Environment", "check_game", "check_protobuf", "import_pysc2"]
