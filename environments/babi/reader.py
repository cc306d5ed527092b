"""The bAbI v1.2 reader (Weston et al. 2015 format; preprocessing of Schlag & Schmidhuber 2018).

Reads the real bAbI v1.2 text files (``qa{N}_train.txt`` / ``qa{N}_valid.txt`` / ``qa{N}_test.txt``
of ``en-valid-10k``, or the ``qa{N}_<name>_{split}.txt`` files of the other folders) that users
download themselves; nothing is downloaded at run time. One example per question; the story is
the statements of the same story before the question (earlier questions excluded), truncated to
the **last** 70 statements (130 for task 3, the authors' code); the whole answer string
(``apple,football``, ``n,w``) is one class.
"""

import dataclasses
import glob
import os
import re


def max_story_sentences(task):
    """Statements kept per story: the last 130 for task 3, the last 70 otherwise (authors' code)."""
    return 130 if task == 3 else 70


def tokenize(sentence):
    """Lower-case word and punctuation tokens: ``"Where is Mary?" -> [where, is, mary, ?]``."""
    return re.findall(r"\w+|[^\w\s]+", sentence.lower())


@dataclasses.dataclass(frozen=True)
class Example:
    """One question: the story statements before it (tokenised), the question, the answer."""

    story: tuple  # tuple of token tuples, oldest first, after truncation
    query: tuple
    answer: str
    supporting: tuple = ()  # line ids of the supporting facts (parsed, unused for training)
    task: int = 0


def parse_babi(lines, task=0, max_sentences=None):
    """Parses bAbI text (an iterable of lines, or one string) into a list of :class:`Example`.

    Args:
        lines: the file's lines (or its whole text).
        task: task number stored in each example (also selects the default truncation).
        max_sentences: statements kept per story (the most recent ones); default
            :func:`max_story_sentences` of ``task``.

    Raises:
        ValueError: on a malformed line, naming the line number and its text.
    """
    if isinstance(lines, str):
        lines = lines.splitlines()
    if max_sentences is None:
        max_sentences = max_story_sentences(task)
    examples = []
    statements = []
    previous_id = 0
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\n\r")
        if not line.strip():
            continue
        match = re.match(r"\s*(\d+) (.*)$", line)
        if match is None:
            raise ValueError(f"bAbI line {number} does not start with '<id> ': {line!r}")
        line_id, text = int(match.group(1)), match.group(2)
        if line_id == 1:
            statements = []
        elif line_id != previous_id + 1:
            raise ValueError(
                f"bAbI line {number}: expected line id 1 or {previous_id + 1}, received "
                f"{line_id}: {line!r}"
            )
        previous_id = line_id
        if "\t" in text:
            fields = text.split("\t")
            if len(fields) < 2:
                raise ValueError(f"bAbI line {number}: question without answer: {line!r}")
            question = fields[0].strip()
            answer = fields[1].strip().lower()
            support = tuple(int(s) for s in fields[2].split()) if len(fields) > 2 else ()
            story = tuple(tokens for _, tokens in statements[-max_sentences:])
            examples.append(Example(story, tuple(tokenize(question)), answer, support, task))
        else:
            statements.append((line_id, tuple(tokenize(text))))
    return examples


def task_files(data_dir, task, split):
    """The files of ``task`` and ``split`` ("train", "valid", "test") under ``data_dir``."""
    return sorted(glob.glob(os.path.join(data_dir, f"qa{task}_*{split}*.txt")))


def load_task(data_dir, task, split, max_sentences=None):
    """Reads ``qa{task}_*{split}*.txt`` from ``data_dir`` into examples (see :func:`parse_babi`).

    For folders without a ``valid`` file (the non-``en-valid`` releases), ``split="valid"`` returns
    the last 10 % of the training stories' questions and ``split="train"`` the rest.
    """
    files = task_files(data_dir, task, split)
    if not files and split == "valid" and task_files(data_dir, task, "train"):
        return _split_train(data_dir, task, max_sentences)[1]
    if not files:
        raise ValueError(
            f"load_task found no file matching 'qa{task}_*{split}*.txt' in data_dir={data_dir!r}."
        )
    if split == "train" and not task_files(data_dir, task, "valid"):
        return _split_train(data_dir, task, max_sentences)[0]
    examples = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            examples.extend(parse_babi(f, task=task, max_sentences=max_sentences))
    return examples


def _split_train(data_dir, task, max_sentences):
    examples = []
    for path in task_files(data_dir, task, "train"):
        with open(path, encoding="utf-8") as f:
            examples.extend(parse_babi(f, task=task, max_sentences=max_sentences))
    cut = int(round(0.9 * len(examples)))
    return examples[:cut], examples[cut:]
