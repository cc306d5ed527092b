"""The seven SC2LE mini-games of Zambaldi et al. (2019), Table 1, and where the game must be.

Pure Python: no pysc2 needed to list the maps or to check for the game.
"""

import os

# Zambaldi et al. 2019, Table 1 (Vinyals et al. 2017's mini-games), in the table's order.
MINI_GAMES = ("MoveToBeacon", "CollectMineralShards", "FindAndDefeatZerglings", "DefeatRoaches",
              "DefeatZerglingsAndBanelings", "CollectMineralsAndGas", "BuildMarines")
SC2PATH = "SC2PATH"
DEFAULT_GAME_DIRECTORY = "~/StarCraftII"  # pysc2's default on Linux


def check_game(map_name=None):
    """The StarCraft II directory pysc2 will use (``$SC2PATH``, else ``~/StarCraftII``).

    Raises FileNotFoundError naming ``SC2PATH`` when the game (its ``Versions`` folder) or the
    mini-game map ``Maps/mini_games/<map_name>.SC2Map`` is not there.
    """
    value = os.environ.get(SC2PATH)
    directory = os.path.expanduser(value or DEFAULT_GAME_DIRECTORY)
    where = (f"{SC2PATH}={value!r}" if value else
             f"{SC2PATH} is not set, so pysc2 looks in {DEFAULT_GAME_DIRECTORY}")
    if not os.path.isdir(os.path.join(directory, "Versions")):
        raise FileNotFoundError(
            f"StarCraft II was not found: {where}, and {directory} has no Versions folder. "
            f"Install the game (Blizzard's Linux package, see pysc2's README) and set {SC2PATH} "
            "to its directory, or play pysc2's mock environment instead (--mock).")
    if map_name is not None:
        map_file = os.path.join(directory, "Maps", "mini_games", f"{map_name}.SC2Map")
        if not os.path.isfile(map_file):
            raise FileNotFoundError(
                f"The mini-game map {map_name!r} was not found at {map_file} ({where}): "
                "download the mini-game maps (pysc2's README) into the game's Maps folder.")
    return directory
