"""The procedural bAbI generator: stories in exactly the bAbI v1.2 file format.

Simulates a small world and writes stories for the tasks :data:`GENERATED_TASKS`, following the
public task descriptions (Weston et al. 2015); the text can be written to disk
(:func:`write_task_files`) and read back with the reader, or parsed directly
(:func:`generate_task`).
"""

import os

import numpy as np

from keras_relational import validation

from .files import write_text_atomically
from .reader import parse_babi
from .tasks import GENERATED_TASKS, TASK_GENERATORS
from .world import PERSONS, Story


def generate_story_lines(task, rng, people=PERSONS, **story_options):
    """The lines of one generated story of ``task`` (bAbI file format, without newlines).

    Args:
        task: one of :data:`GENERATED_TASKS`.
        rng: a ``np.random.RandomState``.
        people: the person names to use (tasks 1-3, 6-9, 11-13).
        **story_options: per-task length knobs, e.g. ``n_questions`` (questions per story) and
            ``statements_per_question`` (task 2: at least this many statements between
            questions, default 3 as in Facebook's generator; task 3: up to this many; larger =
            longer stories).
    """
    if task not in TASK_GENERATORS:
        raise ValueError(f"generate_story_lines expects `task` in {GENERATED_TASKS}, "
                         f"received task={task!r}.")
    story = Story()
    TASK_GENERATORS[task](rng, story, list(people), **story_options)
    return story.lines


def generate_task_text(task, num_questions, seed, people=PERSONS, **story_options):
    """bAbI-format text with exactly ``num_questions`` questions, deterministic given ``seed``.

    The last story is cut after the last question needed.
    """
    validation.check_positive_int("generate_task_text", "num_questions", num_questions)
    rng = np.random.RandomState(seed)
    lines, questions = [], 0
    while questions < num_questions:
        for line in generate_story_lines(task, rng, people, **story_options):
            if questions == num_questions:
                break
            lines.append(line)
            questions += "\t" in line
    return "\n".join(lines) + "\n"


def generate_task(task, num_questions, seed, people=PERSONS, **story_options):
    """Parsed examples of a generated task: exactly ``num_questions`` of them."""
    text = generate_task_text(task, num_questions, seed, people, **story_options)
    return parse_babi(text, task=task)


def write_task_files(out_dir, task, num_train=9000, num_valid=1000, num_test=1000, seed=0,
                     **story_options):
    """Writes ``qa{task}_train.txt``, ``_valid.txt``, ``_test.txt`` (the en-valid-10k layout).

    Defaults follow bAbI-10k v1.2: 9,000 / 1,000 / 1,000 questions. Each split has its own seed
    (:func:`split_seed`). Each file is written atomically, the test file last, so a run killed
    while generating never leaves a file that a later run would read as complete.
    Returns the three paths.
    """
    for argument, n in (("num_train", num_train), ("num_valid", num_valid),
                        ("num_test", num_test)):
        validation.check_positive_int("write_task_files", argument, n)
    paths = []
    for split, n in (("train", num_train), ("valid", num_valid), ("test", num_test)):
        path = os.path.join(out_dir, f"qa{task}_{split}.txt")
        write_text_atomically(path, generate_task_text(task, n, split_seed(seed, task, split),
                                                       **story_options))
        paths.append(path)
    return paths


def split_seed(seed, task, split):
    """The generator seed of one task's split ("train", "valid" or "test") for a run ``seed``."""
    return validation.offset_seed("seed", seed, 97 * task + ("train", "valid", "test").index(split),
                                  scale=1000)
