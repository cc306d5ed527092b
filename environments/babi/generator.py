"""The procedural bAbI generator: stories in exactly the bAbI v1.2 file format.

Simulates a small world and writes stories for the tasks :data:`GENERATED_TASKS`, following the
public task descriptions (Weston et al. 2015); the text can be written to disk
(:func:`write_task_files`) and read back with the reader, or parsed directly
(:func:`generate_task`).
"""

import os

import numpy as np

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
            ``statements_per_question`` (tasks 2, 3: up to this many statements between
            questions; larger = longer stories).
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

    Defaults follow bAbI-10k v1.2: 9,000 / 1,000 / 1,000 questions. Each split has its own seed.
    Returns the three paths.
    """
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for offset, (split, n) in enumerate(
        (("train", num_train), ("valid", num_valid), ("test", num_test))
    ):
        path = os.path.join(out_dir, f"qa{task}_{split}.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write(generate_task_text(task, n, seed * 1000 + 97 * task + offset,
                                       **story_options))
        paths.append(path)
    return paths
