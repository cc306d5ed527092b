"""Named BoxWorld settings of Zambaldi et al. 2019 (Sec. 3.1, Fig. 5; App. A, Fig. 8).

Each preset is a dict of `BoxWorld` arguments: `BoxWorld.from_preset("test_length_6", seed=0)`.
Where the paper leaves a setting open, the choice is ours and marked [A].
"""

PRESETS = {
    # Training, branch length 1 and 3: L ~ U{1..4}, D ~ U{0..4} (Sec. 3.1).
    "train": dict(goal_length=(1, 2, 3, 4), num_distractors=(0, 1, 2, 3, 4), distractor_length=1),
    "train_long": dict(goal_length=(1, 2, 3, 4), num_distractors=(0, 1, 2, 3, 4),
                       distractor_length=3),
    # Backward branching (App. A, Figure 8) [A: same L and D as training].
    "backward": dict(goal_length=(1, 2, 3, 4), num_distractors=(0, 1, 2, 3, 4),
                     branching="backward"),
    # Zero-shot longer solution paths (Fig. 5a) [A: distractors as training, branch length 1].
    "test_length_6": dict(goal_length=6, num_distractors=(0, 1, 2, 3, 4), distractor_length=1),
    "test_length_8": dict(goal_length=8, num_distractors=(0, 1, 2, 3, 4), distractor_length=1),
    "test_length_10": dict(goal_length=10, num_distractors=(0, 1, 2, 3, 4), distractor_length=1),
    # Withheld key-lock combinations (Fig. 5b) [A: reading (a), held-out colours].
    "train_heldout": dict(goal_length=(1, 2, 3, 4), num_distractors=(0, 1, 2, 3, 4),
                          holdout="colors", split="train"),
    "test_heldout": dict(goal_length=(1, 2, 3, 4), num_distractors=(0, 1, 2, 3, 4),
                         holdout="colors", split="test"),
}
