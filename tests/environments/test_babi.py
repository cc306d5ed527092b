import collections

import numpy as np
import pytest

from keras_relational.environments import babi

# A hand-written sample in the real bAbI v1.2 format: space before the first TAB, several
# questions per story, line ids reset at a new story, unsorted supporting facts, list answers.
SAMPLE = (
    "1 Mary moved to the bathroom.\n"
    "2 John went to the hallway.\n"
    "3 Where is Mary? \tbathroom\t1\n"
    "4 Daniel went back to the hallway.\n"
    "5 Sandra moved to the garden.\n"
    "6 Where is Daniel? \thallway\t4\n"
    "1 Sandra travelled to the office.\n"
    "2 Sandra picked up the football there.\n"
    "3 Sandra got the apple there.\n"
    "4 What is Sandra carrying? \tapple,football\t3 2\n"
)


def test_reader_on_hand_written_file(tmp_path):
    examples = babi.parse_babi(SAMPLE, task=8)
    assert len(examples) == 3
    first, second, third = examples
    assert first.story == (("mary", "moved", "to", "the", "bathroom", "."),
                           ("john", "went", "to", "the", "hallway", "."))
    assert first.query == ("where", "is", "mary", "?")
    assert first.answer == "bathroom" and first.supporting == (1,)
    # Questions are not part of later stories; the story keeps all four statements.
    assert len(second.story) == 4 and second.answer == "hallway"
    assert all("?" not in sentence for sentence in second.story)
    # A line id of 1 starts a new story.
    assert len(third.story) == 3 and third.story[0][0] == "sandra"
    assert third.answer == "apple,football" and third.supporting == (3, 2)
    # Truncation keeps the most recent statements.
    truncated = babi.parse_babi(SAMPLE, max_sentences=2)
    assert truncated[1].story == second.story[-2:]
    assert babi.max_story_sentences(3) == 130 and babi.max_story_sentences(1) == 70
    # Files in the en-valid-10k layout, read back by task and split.
    for split in ("train", "valid", "test"):
        (tmp_path / f"qa8_{split}.txt").write_text(SAMPLE)
    (tmp_path / "qa18_train.txt").write_text("1 x.\n")  # must not match task 1 or 8 globs
    assert babi.load_task(str(tmp_path), 8, "test") == babi.parse_babi(SAMPLE, task=8)


def test_reader_vocabulary_and_tensors():
    examples = babi.parse_babi(SAMPLE, task=8)
    vocab = babi.Vocabulary.from_examples(examples)
    assert vocab.words[0] == babi.Vocabulary.PAD
    assert "apple,football" in vocab.ids and list(vocab.words[1:]) == sorted(vocab.words[1:])
    sentences, words = babi.dimensions(examples)
    assert (sentences, words) == (4, 7)
    arrays = babi.vectorize(examples, vocab, sentences, words)
    assert arrays["story"].shape == (3, 4, 7) and arrays["query"].shape == (3, 7)
    np.testing.assert_array_equal(arrays["story_len"], [2, 4, 3])
    assert np.all(arrays["story"][0, 2:] == 0)
    assert vocab.words[arrays["answer"][2]] == "apple,football"
    decoded = [vocab.words[i] for i in arrays["query"][1] if i]
    assert decoded == ["where", "is", "daniel", "?"]


def test_reader_errors():
    with pytest.raises(ValueError, match="line 2: expected line id 1 or 2, received 5"):
        babi.parse_babi("1 Mary moved to the office.\n5 John went to the office.\n")
    with pytest.raises(ValueError, match="does not start with"):
        babi.parse_babi("Mary moved.\n")
    with pytest.raises(ValueError, match="no file matching 'qa4_"):
        babi.load_task("/nonexistent", 4, "train")
    with pytest.raises(ValueError, match="task=21"):
        babi.generate_story_lines(21, np.random.RandomState(0))


# --- an independent symbolic reader of the generated stories ---------------------------------

LINK_WORDS = {"then", "afterwards", "following", "after"}
PICK = {"picked", "got", "grabbed", "took"}
DROP = {"dropped", "discarded", "put", "left"}
GIVE = {"gave", "handed", "passed"}
SINGULAR = {"mice": "mouse", "sheep": "sheep", "wolves": "wolf", "cats": "cat"}
COLOURS = {"white", "gray", "yellow", "green"}
OPPOSITE = {"north": "south", "south": "north", "east": "west", "west": "east"}
NUMBERS = ["none", "one", "two", "three"]


def solve(example):
    where, fact, holder, place, history, carrying = {}, {}, {}, {}, {}, collections.defaultdict(
        list)
    relations, afraid, kind, colour = [], {}, {}, {}
    last_single, last_pair = None, None

    def located(obj, loc):
        if not history.get(obj) or history[obj][-1] != loc:
            history.setdefault(obj, []).append(loc)

    def move(people, loc):
        for p in people:
            where[p] = loc
            fact[p] = (True, loc)
            for obj in carrying[p]:
                located(obj, loc)

    for s in example.story:
        words = [w for w in s if w != "."]
        if "afraid" in words:
            afraid[words[0]] = SINGULAR[words[-1]]
        elif words[:1] == ["the"] and "of" in words:  # and the same fact read the other way
            relations.append((words[1], words[3], words[-1]))
            relations.append((words[-1], OPPOSITE[words[3]], words[1]))
        elif len(words) == 4 and words[1:3] == ["is", "a"] and words[3] not in ("in",):
            kind[words[0]] = words[3]
        elif len(words) == 3 and words[1] == "is" and words[2] in COLOURS:
            colour[words[0]] = words[2]
        elif "to" in words and words[-2] == "the" and not set(words) & GIVE:
            loc = words[-1]
            if words[0] in LINK_WORDS:
                subject = [w for w in words if w in ("he", "she", "they")][0]
                move(last_pair if subject == "they" else [last_single], loc)
            elif words[1] == "and":
                last_pair = [words[0], words[2]]
                move(last_pair, loc)
            else:
                last_single = words[0]
                move([words[0]], loc)
        elif words[1] == "is" and "in" in words:
            person, loc = words[0], words[-1]
            there = "not" not in words and "longer" not in words
            fact[person] = (there, loc)
            if there:
                where[person] = loc
        elif words[1] in PICK:
            person, obj = words[0], words[words.index("the") + 1]
            holder[obj] = person
            place.pop(obj, None)
            carrying[person].append(obj)
            if person in where:  # people start in unseen places (Facebook's generator)
                located(obj, where[person])
        elif words[1] in DROP:
            person, obj = words[0], words[words.index("the") + 1]
            holder.pop(obj)
            carrying[person].remove(obj)
            place[obj] = where.get(person)
        elif words[1] in GIVE:
            giver, obj, receiver = words[0], words[3], words[5]
            carrying[giver].remove(obj)
            carrying[receiver].append(obj)
            holder[obj] = receiver
        else:
            raise AssertionError(f"checker cannot read {s}")
    q = [w for w in example.query if w != "?"]
    if q[:2] == ["where", "is"] and q[2] == "the":
        obj = q[3]
        return where[holder[obj]] if obj in holder else place[obj]
    if q[:2] == ["where", "is"]:
        return where[q[2]]
    if q[:2] == ["where", "was"]:
        trail = history[q[3]]
        return trail[trail.index(q[-1]) - 1]
    if q[0] == "is":
        there, loc = fact[q[1]]
        return "yes" if there and loc == q[-1] else "no"
    if q[:3] == ["how", "many", "objects"]:
        return NUMBERS[len(carrying[q[4]])]
    if q[-1] == "carrying":
        return ",".join(carrying[q[2]]) or "nothing"
    if "afraid" in q:
        return afraid[{"mouse": "mice", "wolf": "wolves", "cat": "cats", "sheep": "sheep"}[
            kind[q[2]]]]
    if q[:2] == ["what", "color"]:
        same = [n for n in kind if kind[n] == kind[q[3]] and n in colour and n != q[3]]
        return colour[same[-1]]
    if q[:2] == ["what", "is"] and q[2] == "the":  # what is the a d of
        return [b for a, d, b in relations if a == q[3] and d == q[4]][0]
    if q[:2] == ["what", "is"]:  # what is d of the b
        return [a for a, d, b in relations if d == q[2] and b == q[-1]][0]
    raise AssertionError(f"checker cannot answer {q}")


# The tasks this reader solves; tests/environments/test_babi_tasks.py checks the others.
SOLVED_HERE = (1, 2, 3, 4, 6, 7, 8, 9, 11, 12, 13, 15, 16)


@pytest.mark.parametrize("task", SOLVED_HERE)
def test_generated_stories_are_answerable(task):
    examples = babi.generate_task(task, 150, seed=task)
    assert len(examples) == 150
    for ex in examples:
        assert solve(ex) == ex.answer, (task, ex)
    answers = collections.Counter(ex.answer for ex in examples)
    assert len(answers) >= 2
    assert max(answers.values()) < 0.8 * len(examples)  # not a constant answer


def test_all_twenty_tasks_are_generated():
    assert babi.GENERATED_TASKS == tuple(range(1, 21))
    assert sorted(babi.TASK_NAMES) == list(range(1, 21))


def test_generator_is_deterministic_and_round_trips(tmp_path):
    a = babi.generate_task_text(2, 40, seed=3)
    assert a == babi.generate_task_text(2, 40, seed=3)
    assert a != babi.generate_task_text(2, 40, seed=4)
    paths = babi.write_task_files(str(tmp_path), 2, num_train=30, num_valid=10, num_test=10)
    assert [p.rsplit("/", 1)[1] for p in paths] == ["qa2_train.txt", "qa2_valid.txt",
                                                   "qa2_test.txt"]
    train = babi.load_task(str(tmp_path), 2, "train")
    assert train == babi.parse_babi(babi.generate_task_text(2, 30, seed=2 * 97), task=2)
    test = babi.load_task(str(tmp_path), 2, "test")
    assert train[:5] != test[:5]  # different seeds per split
    vocab = babi.Vocabulary.from_examples(train, test)
    s, w = babi.dimensions(train, test)
    arrays = babi.vectorize(train, vocab, s, w)
    ex = train[7]
    row = arrays["story"][7]
    assert tuple(tuple(vocab.words[i] for i in r if i) for r in row[: len(ex.story)]) == ex.story


def test_story_length_option():
    short = babi.generate_task(2, 200, seed=0, statements_per_question=2)
    long = babi.generate_task(2, 200, seed=0, statements_per_question=10)
    assert np.mean([len(e.story) for e in short]) < np.mean([len(e.story) for e in long])


def test_systematic_split():
    split = babi.systematic_split(examples_per_pair=10, seed=0)
    coverage = collections.Counter(name for name, _ in split["train_pairs"])
    assert dict(coverage) == {"Alex": 8, "Glenn": 6, "Jordan": 4, "Mike": 2, "Logan": 1}
    assert len(split["test"]) == 40 and len(split["train"]) == 21 * 10
    for (name, task), examples in split["test"].items():
        assert len(examples) == 10 and all(e.task == task for e in examples)
        assert sum(name.lower() in e.query for e in examples) == 2  # 20 %
        assert all(any(name.lower() in s for s in e.story) for e in examples)
        for e in examples:
            assert solve(e) == e.answer
    # The unseen (name, task) pairs never occur in training.
    seen = {(n, e.task) for e in split["train"] for n in babi.NEW_NAMES
            if any(n.lower() in s for s in e.story)}
    assert seen == split["train_pairs"]
