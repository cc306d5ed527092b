"""The systematic-generalisation data of Schlag & Schmidhuber (2018, Sec. 7, Fig. 5).

Five new names (Alex, Glenn, Jordan, Mike, Logan) appear in the tasks that use the same four
people and ask about a person (1, 6, 7, 8, 9, 11, 12, 13): in every (name, task) pair of the test
set, but in training only with 8/8, 6/8, 4/8, 2/8 and 1/8 of the tasks.
"""

import numpy as np

from keras_relational import validation

from .generator import generate_story_lines
from .reader import parse_babi
from .world import PERSONS

NEW_NAMES = ("Alex", "Glenn", "Jordan", "Mike", "Logan")
SYSTEMATIC_TASKS = (1, 6, 7, 8, 9, 11, 12, 13)
# 8/6/4/2/1 tasks per new name (Sec. 7); which ones is ours [A]: nested prefixes.
SYSTEMATIC_COVERAGE = {"Alex": 8, "Glenn": 6, "Jordan": 4, "Mike": 2, "Logan": 1}


def systematic_split(examples_per_pair=500, question_fraction=0.2, seed=0,
                     coverage=SYSTEMATIC_COVERAGE, tasks=SYSTEMATIC_TASKS, **story_options):
    """The systematic-generalisation data (Sec. 7): new names seen only in some tasks.

    For each new name and task, ``examples_per_pair`` examples are generated with the person pool
    in which one of the four original names is replaced by the new name, exactly
    ``question_fraction`` of them asking about the new name. Training pairs are the first
    ``coverage[name]`` tasks of ``tasks`` (nested prefixes); the test set covers all pairs.

    Returns:
        ``{"train": [...], "test": {(name, task): [...]}, "train_pairs": set}``; the training
        list holds only the augmented examples (add the original tasks' data yourself).
    """
    rng = np.random.RandomState(seed)
    train, test, train_pairs = [], {}, set()
    for name, covered in coverage.items():
        for index, task in enumerate(tasks):
            pair_seed = validation.offset_seed("seed", seed, 31 * index + 1000 * len(name),
                                               scale=7919)
            pairs = [("test", pair_seed)]
            if index < covered:
                train_pairs.add((name, task))
                pairs.append(("train", validation.offset_seed(
                    "seed", seed, 31 * index + 1000 * len(name) + 500, scale=7919)))
            for split, split_seed in pairs:
                examples = _new_name_examples(task, name, examples_per_pair, question_fraction,
                                              np.random.RandomState(split_seed), **story_options)
                if split == "train":
                    train.extend(examples)
                else:
                    test[(name, task)] = examples
    order = rng.permutation(len(train))
    return {"train": [train[i] for i in order], "test": test, "train_pairs": train_pairs}


def _new_name_examples(task, name, count, question_fraction, rng, **story_options):
    lowered = name.lower()
    want_in_question = int(round(count * question_fraction))
    asked, other = [], []
    while len(asked) < want_in_question or len(other) < count - want_in_question:
        people = list(PERSONS)
        people[rng.randint(len(people))] = name
        lines = generate_story_lines(task, rng, people, **story_options)
        for ex in parse_babi(lines, task=task):
            in_story = any(lowered in s for s in ex.story)
            if lowered in ex.query:
                if len(asked) < want_in_question:
                    asked.append(ex)
            elif in_story and len(other) < count - want_in_question:
                other.append(ex)
    examples = asked + other
    return [examples[i] for i in rng.permutation(len(examples))]
