"""bAbI files: atomic generation, clear errors for broken files, and the released v1.2 layout."""

import os

import numpy as np
import pytest

from keras_relational.environments import babi

GOOD = ("1 Mary moved to the bathroom.\n2 John went to the hallway.\n"
        "3 Where is Mary? \tbathroom\t1\n")


def test_write_text_atomically_keeps_the_old_file_when_writing_fails(tmp_path):
    path = tmp_path / "qa1_test.txt"
    babi.write_text_atomically(str(path), GOOD)
    assert path.read_text() == GOOD
    with pytest.raises(TypeError):
        babi.write_text_atomically(str(path), None)  # fails after the temporary file exists
    assert path.read_text() == GOOD
    assert os.listdir(tmp_path) == ["qa1_test.txt"]  # no temporary file left behind


def test_write_task_files_writes_complete_files_only(tmp_path, monkeypatch):
    from keras_relational.environments.babi import generator

    calls = []
    original = generator.generate_task_text

    def killed_at_test_split(task, n, seed, **options):
        calls.append(n)
        if len(calls) == 3:
            raise KeyboardInterrupt  # a kill while the test split is generated
        return original(task, n, seed, **options)

    monkeypatch.setattr(generator, "generate_task_text", killed_at_test_split)
    with pytest.raises(KeyboardInterrupt):
        babi.write_task_files(str(tmp_path), 1, num_train=20, num_valid=5, num_test=5)
    assert sorted(os.listdir(tmp_path)) == ["qa1_train.txt", "qa1_valid.txt"]
    assert len(babi.read_file(str(tmp_path / "qa1_valid.txt"), 1)) == 5
    with pytest.raises(ValueError, match="num_train"):
        babi.write_task_files(str(tmp_path), 1, num_train=0)
    with pytest.raises(ValueError, match="num_questions"):
        babi.generate_task_text(1, 0, seed=0)


@pytest.mark.parametrize("text, problem, line", [
    ("", "no question found", None),
    ("\n\n", "no question found", None),
    (GOOD + "4 Sandra went to the gar", "does not end with '.'", 4),  # cut inside a statement
    (GOOD + "4 Sandra went to the garden.\n", "ends with statements after its last question", 4),
    ("1 Mary moved to the bathroom.\n2 Where is Mary? \n", "question without a TAB", 2),
    ("1 Mary moved to the bathroom.\n2 Where is Mary? \t\t1\n", "empty answer", 2),
    ("1 Mary moved to the bathroom.\n2 Where is Mary? \t \t1\n", "empty answer", 2),
    ("1 Mary moved to the bathroom.\n2 Where is Mary? \tbathroom\tone\n", "supporting facts", 2),
    ("1 Mary moved to the bathroom.\n2 Where is Mary? \tbathroom\t2\n", "supporting facts", 2),
    ("1 Mary moved to the bathroom.\n2 Where is Mary \tbathroom\t1\n", "does not end with '?'", 2),
    ("1 Mary moved to the bathroom.\n2 Where is Mary? \tbathroom\t1\tx\n", "at most 3", 2),
    (GOOD + "5 John went to the garden.\n", "expected line id 1 or 4, received 5", 4),
    ("Mary moved to the bathroom.\n", "does not start with", 1),
])
def test_broken_files_name_the_file_and_line(tmp_path, text, problem, line):
    path = tmp_path / "qa1_train.txt"
    path.write_text(text)
    where = f"{path}, line {line}" if line else f"{path}: "
    with pytest.raises(ValueError, match=problem) as raised:
        babi.read_file(str(path), 1)
    assert where in str(raised.value)


def test_unanswered_questions_are_read_only_when_allowed():
    text = "1 Mary moved to the bathroom.\n2 Where is Mary?\n"
    with pytest.raises(ValueError, match="line 2: question without a TAB"):
        babi.parse_babi(text)
    (example,) = babi.parse_babi(text, allow_unanswered=True)
    assert example.answer is None and example.query == ("where", "is", "mary", "?")
    vocab = babi.Vocabulary.from_examples([babi.parse_babi(GOOD)[0]])
    arrays = babi.vectorize([example], vocab, 2, 6)
    assert arrays["answer"].tolist() == [-1]


def _release_tree(root, sizes):
    """Writes ``tasks_1-20_v1-2/<folder>/qa{N}_{name}_{split}.txt`` for all 20 tasks."""
    texts = {}
    for folder, (num_train, num_test) in sizes.items():
        directory = root / "tasks_1-20_v1-2" / folder
        directory.mkdir(parents=True)
        for task in babi.GENERATED_TASKS:
            for split, n in (("train", num_train), ("test", num_test)):
                text = babi.generate_task_text(task, n, seed=babi.split_seed(len(folder), task,
                                                                             split))
                (directory / f"qa{task}_{babi.TASK_NAMES[task]}_{split}.txt").write_text(text)
                texts[folder, task, split] = text
    return texts


def test_reader_on_the_released_v12_layout(tmp_path):
    # en/ (1k) and en-10k/ at reduced size; like the release, neither has a valid file.
    sizes = {"en": (20, 10), "en-10k": (50, 10)}
    texts = _release_tree(tmp_path, sizes)
    assert len(os.listdir(tmp_path / "tasks_1-20_v1-2" / "en")) == 40
    for folder, (num_train, _) in sizes.items():
        directory = str(tmp_path / "tasks_1-20_v1-2" / folder)
        for task in babi.GENERATED_TASKS:
            assert len(babi.task_files(directory, task, "train")) == 1, (folder, task)
            train = babi.load_task(directory, task, "train")
            valid = babi.load_task(directory, task, "valid")
            test = babi.load_task(directory, task, "test")
            # Without a valid file, the last 10 % of the training questions validate.
            whole = babi.parse_babi(texts[folder, task, "train"], task=task)
            assert train + valid == whole
            assert len(valid) == num_train - int(round(0.9 * num_train))
            assert test == babi.parse_babi(texts[folder, task, "test"], task=task)
            assert all(ex.task == task and ex.answer for ex in train + valid + test)
            limit = babi.max_story_sentences(task)
            assert all(len(ex.story) <= limit for ex in train)
    # One joint vocabulary over the 20 tasks of en-10k, with the compound answers as words.
    directory = str(tmp_path / "tasks_1-20_v1-2" / "en-10k")
    everything = [ex for task in babi.GENERATED_TASKS for split in ("train", "valid", "test")
                  for ex in babi.load_task(directory, task, split)]
    vocab = babi.Vocabulary.from_examples(everything)
    arrays = babi.vectorize(everything, vocab, *babi.dimensions(everything))
    answers = {vocab.words[i] for i in np.unique(arrays["answer"])}
    assert {"maybe", "yes", "no"} <= answers
    assert any("," in a and len(a) == 3 for a in answers)  # path finding: "n,w"
