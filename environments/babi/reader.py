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
    answer: str  # None for a question without an answer (``parse_babi(allow_unanswered=True)``)
    supporting: tuple = ()  # line ids of the supporting facts (parsed, unused for training)
    task: int = 0


def parse_babi(lines, task=0, max_sentences=None, source=None, allow_unanswered=False):
    """Parses bAbI text (an iterable of lines, or one string) into a list of :class:`Example`.

    Args:
        lines: the file's lines (or its whole text, or an open file).
        task: task number stored in each example (also selects the default truncation).
        max_sentences: statements kept per story (the most recent ones); default
            :func:`max_story_sentences` of ``task``.
        source: the name used in error messages (default: the open file's name, else "bAbI
            text").
        allow_unanswered: also accept question lines without a TAB and answer (``3 Where is
            Mary?``), whose examples get ``answer=None``; for answering new stories.

    Raises:
        ValueError: on a malformed line (naming ``source``, the line number and its text): a line
            without a leading ``<id> ``, a line id out of sequence, a statement not ending in
            ``.``, a question not ending in ``?``, an empty answer, supporting-fact ids that are
            not earlier lines of the same story; and on text without any question, or ending with
            statements after its last question (an empty or truncated file).
    """
    if source is None:
        source = getattr(lines, "name", "bAbI text")
    if isinstance(lines, str):
        lines = lines.splitlines()
    if max_sentences is None:
        max_sentences = max_story_sentences(task)
    examples = []
    statements = []
    previous_id = 0
    last_statement = None  # (line number, text) of a statement not yet followed by a question

    def fail(number, problem, line):
        return ValueError(f"{source}, line {number}: {problem}: {line!r}")

    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\n\r")
        if not line.strip():
            continue
        match = re.match(r"\s*(\d+) (.*)$", line)
        if match is None:
            raise fail(number, "does not start with '<id> '", line)
        line_id, text = int(match.group(1)), match.group(2)
        if line_id == 1:
            statements = []
        elif line_id != previous_id + 1:
            raise fail(number, f"expected line id 1 or {previous_id + 1}, received {line_id}",
                       line)
        previous_id = line_id
        question = answer = None
        if "\t" in text:
            fields = text.split("\t")
            if len(fields) > 3:
                raise fail(number, "a question line has at most 3 TAB-separated fields "
                           "(question, answer, supporting facts)", line)
            question, answer = fields[0].strip(), fields[1].strip().lower()
            if not answer:
                raise fail(number, "question with an empty answer", line)
            support = _supporting_facts(fields[2] if len(fields) > 2 else "", line_id)
            if support is None:
                raise fail(number, "supporting facts must be ids of earlier lines of the same "
                           "story", line)
        elif allow_unanswered and text.rstrip().endswith("?"):
            question, support = text.strip(), ()
        if question is not None:
            if not question.endswith("?"):
                raise fail(number, "question does not end with '?'", line)
            story = tuple(tokens for _, tokens in statements[-max_sentences:])
            examples.append(Example(story, tuple(tokenize(question)), answer, support, task))
            last_statement = None
        else:
            if text.rstrip().endswith("?"):
                raise fail(number, "question without a TAB and an answer", line)
            if not text.rstrip().endswith("."):
                raise fail(number, "statement does not end with '.' (truncated?)", line)
            statements.append((line_id, tuple(tokenize(text))))
            last_statement = (number, line)
    if not examples:
        raise ValueError(f"{source}: no question found (an empty or truncated bAbI file?).")
    if last_statement is not None:
        raise fail(last_statement[0], "the text ends with statements after its last question "
                   "(a truncated bAbI file?)", last_statement[1])
    return examples


def _supporting_facts(field, line_id):
    """The ids of ``field`` as a tuple, or None unless they are ids of earlier lines."""
    try:
        ids = tuple(int(s) for s in field.split())
    except ValueError:
        return None
    return ids if all(1 <= i < line_id for i in ids) else None


def task_files(data_dir, task, split):
    """The files of ``task`` and ``split`` ("train", "valid", "test") under ``data_dir``."""
    return sorted(glob.glob(os.path.join(data_dir, f"qa{task}_*{split}*.txt")))


def read_file(path, task=0, max_sentences=None, allow_unanswered=False):
    """The examples of one bAbI file (:func:`parse_babi`; errors name ``path`` and the line)."""
    with open(path, encoding="utf-8") as f:
        return parse_babi(f, task=task, max_sentences=max_sentences, source=path,
                          allow_unanswered=allow_unanswered)


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
        examples.extend(read_file(path, task, max_sentences))
    return examples


def _split_train(data_dir, task, max_sentences):
    examples = []
    for path in task_files(data_dir, task, "train"):
        examples.extend(read_file(path, task, max_sentences))
    cut = int(round(0.9 * len(examples)))
    return examples[:cut], examples[cut:]
