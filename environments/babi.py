"""bAbI question answering: a reader for the real v1.2 files and a procedural generator.

NumPy only. Three parts:

* **Reader** (:func:`parse_babi`, :func:`load_task`): reads the real bAbI v1.2 text files
  (``qa{N}_train.txt`` / ``qa{N}_valid.txt`` / ``qa{N}_test.txt`` of ``en-valid-10k``, or the
  ``qa{N}_<name>_{split}.txt`` files of the other folders) that users download themselves;
  nothing is downloaded at run time. One example per question; the story is the statements of
  the same story before the question (earlier questions excluded), truncated to the **last** 70
  statements (130 for task 3); the whole answer string (``apple,football``, ``n,w``) is one class.
* **Vocabulary and tensors** (:class:`Vocabulary`, :func:`vectorize`): id 0 = PAD, the other
  tokens and answers sorted; ``story [N, S, W]``, ``story_len [N]``, ``query [N, W]``,
  ``answer [N]`` int32 arrays.
* **Generator** (:func:`generate_story_lines`, :func:`generate_task_text`,
  :func:`write_task_files`): simulates a small world and writes stories in exactly the file format
  above, for tasks :data:`GENERATED_TASKS`; and :func:`systematic_split`, the systematic
  generalisation data of Schlag & Schmidhuber (2018, Sec. 4.5 of the spec): five new names seen
  in training only with some tasks.

The generator follows the public task descriptions (Weston et al. 2015) and the spec's grammar
table; it is not the Facebook generator, so vocabulary and phrasing frequencies differ a little.
"""

import dataclasses
import glob
import os
import re

import numpy as np

PERSONS = ("Mary", "John", "Sandra", "Daniel")
LOCATIONS = ("bathroom", "bedroom", "garden", "hallway", "kitchen", "office")
OBJECTS = ("apple", "football", "milk")
MOVE_VERBS = ("moved", "went", "journeyed", "travelled", "went back")
PICK_VERBS = ("picked up", "got", "grabbed", "took")
DROP_VERBS = ("dropped", "discarded", "put down", "left")
GIVE_VERBS = ("gave", "handed", "passed")
NEW_NAMES = ("Alex", "Glenn", "Jordan", "Mike", "Logan")
SYSTEMATIC_TASKS = (1, 6, 7, 8, 9, 11, 12, 13)
# Nested prefixes of SYSTEMATIC_TASKS (spec Sec. 4.5 proposal): 8/6/4/2/1 tasks per new name.
SYSTEMATIC_COVERAGE = {"Alex": 8, "Glenn": 6, "Jordan": 4, "Mike": 2, "Logan": 1}
# Pronouns for task 11; the new names' pronouns are an arbitrary fixed choice.
_PRONOUNS = {"Mary": "she", "Sandra": "she", "John": "he", "Daniel": "he", "Alex": "he",
             "Glenn": "he", "Jordan": "she", "Mike": "he", "Logan": "she"}
_NUMBERS = ("none", "one", "two", "three")


def max_story_sentences(task):
    """Statements kept per story: the last 130 for task 3, the last 70 otherwise (authors' code)."""
    return 130 if task == 3 else 70


# --------------------------------------------------------------------------------------------
# Reader
# --------------------------------------------------------------------------------------------


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


class Vocabulary:
    """Word and answer ids: 0 = PAD, then every token and answer string, sorted."""

    PAD = "<pad>"

    def __init__(self, words):
        self.words = (self.PAD,) + tuple(sorted(set(words) - {self.PAD}))
        self.ids = {w: i for i, w in enumerate(self.words)}

    @classmethod
    def from_examples(cls, *example_lists):
        words = set()
        for examples in example_lists:
            for ex in examples:
                for sentence in ex.story:
                    words.update(sentence)
                words.update(ex.query)
                words.add(ex.answer)
        return cls(words)

    def __len__(self):
        return len(self.words)

    def encode(self, token):
        if token not in self.ids:
            raise ValueError(f"Vocabulary has no id for {token!r}; build it from all splits.")
        return self.ids[token]


def dimensions(*example_lists):
    """``(S, W)``: the longest story and the longest sentence/question over the examples."""
    sentences, words = 1, 1
    for examples in example_lists:
        for ex in examples:
            sentences = max(sentences, len(ex.story))
            words = max([words, len(ex.query)] + [len(s) for s in ex.story])
    return sentences, words


def vectorize(examples, vocabulary, max_sentences, max_words):
    """Int32 arrays ``story [N,S,W]``, ``story_len [N]``, ``query [N,W]``, ``answer [N]``, ``task``.

    Stories longer than ``max_sentences`` keep their last sentences; longer sentences raise.
    """
    n = len(examples)
    story = np.zeros((n, max_sentences, max_words), np.int32)
    query = np.zeros((n, max_words), np.int32)
    story_len = np.zeros((n,), np.int32)
    answer = np.zeros((n,), np.int32)
    task = np.zeros((n,), np.int32)
    for i, ex in enumerate(examples):
        sentences = ex.story[-max_sentences:]
        story_len[i] = len(sentences)
        for j, sentence in enumerate(sentences):
            if len(sentence) > max_words:
                raise ValueError(f"sentence {sentence} is longer than max_words={max_words}.")
            story[i, j, : len(sentence)] = [vocabulary.encode(t) for t in sentence]
        if len(ex.query) > max_words:
            raise ValueError(f"question {ex.query} is longer than max_words={max_words}.")
        query[i, : len(ex.query)] = [vocabulary.encode(t) for t in ex.query]
        answer[i] = vocabulary.encode(ex.answer)
        task[i] = ex.task
    return {"story": story, "story_len": story_len, "query": query, "answer": answer,
            "task": task}


# --------------------------------------------------------------------------------------------
# Generator
# --------------------------------------------------------------------------------------------


class _Story:
    """Collects the lines of one story with bAbI line numbering."""

    def __init__(self):
        self.lines = []

    def say(self, text):
        self.lines.append(f"{len(self.lines) + 1} {text}")
        return len(self.lines)

    def ask(self, question, answer, support):
        ids = " ".join(str(s) for s in support)
        self.lines.append(f"{len(self.lines) + 1} {question} \t{answer}\t{ids}")

    @property
    def questions(self):
        return sum("\t" in line for line in self.lines)


class _World:
    """People with locations, objects with holders or places (tasks 1-3, 6-8)."""

    def __init__(self, rng, people):
        self.rng = rng
        self.people = list(people)
        self.location = {}  # person -> (location, line)
        self.holder = {}  # object -> (person, line)
        self.place = {}  # object -> (location, drop line, support of the dropper's location)
        self.history = {o: [] for o in OBJECTS}  # object -> [(location, support lines)]
        self.carrying = {p: [] for p in people}  # person -> objects in pickup order

    def choice(self, seq):
        return seq[self.rng.randint(len(seq))]

    def move(self, story, person, verb=None):
        old = self.location.get(person, (None, 0))[0]
        location = self.choice([loc for loc in LOCATIONS if loc != old])
        line = story.say(f"{person} {verb or self.choice(MOVE_VERBS)} to the {location}.")
        self._moved(person, location, line)
        return line

    def _moved(self, person, location, line):
        self.location[person] = (location, line)
        for obj in self.carrying[person]:
            self.history[obj].append((location, (self.holder[obj][1], line)))

    def pick(self, story, person, obj):
        there = " there" if self.rng.rand() < 0.5 else ""
        line = story.say(f"{person} {self.choice(PICK_VERBS)} the {obj}{there}.")
        self.holder[obj] = (person, line)
        self.place.pop(obj, None)
        self.carrying[person].append(obj)
        location, move_line = self.location[person]
        if not self.history[obj] or self.history[obj][-1][0] != location:
            self.history[obj].append((location, (line, move_line)))

    def drop(self, story, person, obj):
        line = story.say(f"{person} {self.choice(DROP_VERBS)} the {obj}.")
        location, move_line = self.location[person]
        del self.holder[obj]
        self.carrying[person].remove(obj)
        self.place[obj] = (location, line, move_line)

    def give(self, story, giver, receiver, obj):
        line = story.say(f"{giver} {self.choice(GIVE_VERBS)} the {obj} to {receiver}.")
        self.carrying[giver].remove(obj)
        self.carrying[receiver].append(obj)
        self.holder[obj] = (receiver, line)

    def random_action(self, story, allow_give=False):
        """A move, pick-up, drop or (optionally) give that is legal in the current state."""
        options = ["move"] * 3
        located = [p for p in self.people if p in self.location]
        pickable = [
            (p, o) for p in located for o in OBJECTS
            if o not in self.holder and (o not in self.place
                                         or self.place[o][0] == self.location[p][0])
        ]
        holders = [(p, o) for p in located for o in self.carrying[p]]
        gives = [
            (p, q, o) for p, o in holders for q in located
            if q != p and self.location[q][0] == self.location[p][0]
        ]
        if pickable:
            options.append("pick")
        if holders:
            options.append("drop")
        if allow_give and gives:
            options += ["give", "give"]
        action = self.choice(options)
        if action == "move":
            self.move(story, self.choice(self.people))
        elif action == "pick":
            self.pick(story, *self.choice(pickable))
        elif action == "drop":
            self.drop(story, *self.choice(holders))
        else:
            self.give(story, *self.choice(gives))

    def object_location(self, obj):
        """(location, support lines) of an object, or None if unknown."""
        if obj in self.holder:
            person, line = self.holder[obj]
            location, move_line = self.location[person]
            return location, sorted({line, move_line}, reverse=True)
        if obj in self.place:
            location, line, move_line = self.place[obj]
            return location, sorted({line, move_line}, reverse=True)
        return None


def _task_1(rng, story, people, n_questions=5, **_):
    world = _World(rng, people)
    for _ in range(n_questions):
        for _ in range(2):
            world.move(story, world.choice(people))
        person = world.choice(list(world.location))
        location, line = world.location[person]
        story.ask(f"Where is {person}?", location, [line])


def _task_2(rng, story, people, n_questions=5, statements_per_question=6, **_):
    world = _World(rng, people)
    for p in people:
        world.move(story, p)
    while story.questions < n_questions:
        for _ in range(1 + rng.randint(statements_per_question)):
            world.random_action(story)
        known = [o for o in OBJECTS if world.object_location(o) is not None]
        if known:
            obj = world.choice(known)
            location, support = world.object_location(obj)
            story.ask(f"Where is the {obj}?", location, support)


def _task_3(rng, story, people, n_questions=5, statements_per_question=8, **_):
    world = _World(rng, people)
    for p in people:
        world.move(story, p)
    asked = set()
    while story.questions < n_questions:
        for _ in range(1 + rng.randint(statements_per_question)):
            world.random_action(story)
        candidates = []
        for obj, history in world.history.items():
            locations = [loc for loc, _ in history]
            for i in range(1, len(history)):
                if locations.count(locations[i]) == 1:
                    candidates.append((obj, i))
        fresh = [c for c in candidates if c not in asked]
        if fresh or candidates:
            obj, i = world.choice(fresh or candidates)
            asked.add((obj, i))
            history = world.history[obj]
            support = sorted(set(history[i][1]) | set(history[i - 1][1]), reverse=True)
            story.ask(f"Where was the {obj} before the {history[i][0]}?", history[i - 1][0],
                      support)


def _task_4(rng, story, people=None, **_):
    directions = {"north": "south", "south": "north", "east": "west", "west": "east"}
    l1, l2, l3 = (LOCATIONS[i] for i in rng.permutation(len(LOCATIONS))[:3])
    d1, d2 = (list(directions)[i] for i in rng.randint(4, size=2))
    facts = [(l1, d1, l2), (l3, d2, l1)] if rng.rand() < 0.5 else [(l1, d1, l2), (l2, d2, l3)]
    lines = [story.say(f"The {a} is {d} of the {b}.") for a, d, b in facts]
    k = rng.randint(2)
    a, d, b = facts[k]
    if rng.rand() < 0.5:
        story.ask(f"What is {d} of the {b}?", a, [lines[k]])
    else:
        story.ask(f"What is the {a} {d} of?", b, [lines[k]])


def _task_6(rng, story, people, n_questions=5, **_):
    world = _World(rng, people)
    for _ in range(n_questions):
        for _ in range(2):
            world.random_action(story)
        if not world.location:
            world.move(story, world.choice(people))
        person = world.choice(list(world.location))
        location, line = world.location[person]
        if rng.rand() < 0.5:
            story.ask(f"Is {person} in the {location}?", "yes", [line])
        else:
            other = world.choice([loc for loc in LOCATIONS if loc != location])
            story.ask(f"Is {person} in the {other}?", "no", [line])


def _carry_task(rng, story, people, ask, n_questions=5, statements_per_question=3):
    world = _World(rng, people)
    for p in people:
        world.move(story, p)
    last_line = {p: world.location[p][1] for p in people}
    while story.questions < n_questions:
        for _ in range(1 + rng.randint(statements_per_question)):
            before = len(story.lines)
            world.random_action(story, allow_give=True)
            text = story.lines[-1]
            for p in people:
                if len(story.lines) > before and re.search(rf"\b{p}\b", text):
                    last_line[p] = len(story.lines)
        carriers = [p for p in people if world.carrying[p]]
        # Ask about a carrier more often, so the answers are not mostly "none" / "nothing".
        person = world.choice(carriers if carriers and rng.rand() < 0.7 else people)
        ask(story, person, world.carrying[person], [last_line[person]])


def _task_7(rng, story, people, n_questions=5, **_):
    def ask(story, person, carried, support):
        story.ask(f"How many objects is {person} carrying?", _NUMBERS[len(carried)], support)

    _carry_task(rng, story, people, ask, n_questions)


def _task_8(rng, story, people, n_questions=5, **_):
    # Canonical answer order: pickup order (spec Sec. 4.4 asks to fix and document one).
    def ask(story, person, carried, support):
        story.ask(f"What is {person} carrying?", ",".join(carried) or "nothing", support)

    _carry_task(rng, story, people, ask, n_questions)


def _task_9(rng, story, people, n_questions=5, **_):
    state = {}  # person -> (is_there, location, line)
    for _ in range(n_questions):
        for _ in range(2):
            person = people[rng.randint(len(people))]
            location = LOCATIONS[rng.randint(len(LOCATIONS))]
            kind = rng.randint(4)
            if kind == 0:
                line = story.say(f"{person} is not in the {location}.")
            elif kind == 1:
                line = story.say(f"{person} is no longer in the {location}.")
            elif kind == 2:
                line = story.say(f"{person} is in the {location}.")
            else:
                verb = MOVE_VERBS[rng.randint(len(MOVE_VERBS))]
                line = story.say(f"{person} {verb} to the {location}.")
            state[person] = (kind >= 2, location, line)
        person = list(state)[rng.randint(len(state))]
        there, location, line = state[person]
        if there and rng.rand() < 0.75:
            story.ask(f"Is {person} in the {location}?", "yes", [line])
        elif there:
            other = [loc for loc in LOCATIONS if loc != location][rng.randint(len(LOCATIONS) - 1)]
            story.ask(f"Is {person} in the {other}?", "no", [line])
        else:
            story.ask(f"Is {person} in the {location}?", "no", [line])


_LINKS = ("Then", "Afterwards", "Following that", "After that")


def _pronoun(person):
    return _PRONOUNS.get(person, "they")


def _task_11(rng, story, people, n_questions=5, **_):
    world = _World(rng, people)
    last = None
    for _ in range(n_questions):
        for _ in range(2):
            if last is not None and rng.rand() < 0.5 and _pronoun(last) != "they":
                location = world.choice([x for x in LOCATIONS if x != world.location[last][0]])
                verb = world.choice(MOVE_VERBS)
                line = story.say(f"{world.choice(_LINKS)} {_pronoun(last)} {verb} to the "
                                 f"{location}.")
                world.location[last] = (location, line)
            else:
                last = world.choice([p for p in people if _pronoun(p) != "they"] or people)
                world.move(story, last)
        person = world.choice(list(world.location))
        location, line = world.location[person]
        story.ask(f"Where is {person}?", location, [line])


def _pair_move(world, story, pair, location=None, prefix=None):
    location = location or world.choice(LOCATIONS)
    verb = world.choice(MOVE_VERBS)
    subject = "they" if prefix else f"{pair[0]} and {pair[1]}"
    text = f"{prefix} they {verb} to the {location}." if prefix else \
        f"{subject} {verb} to the {location}."
    line = story.say(text)
    for p in pair:
        world.location[p] = (location, line)
    return line


def _task_12(rng, story, people, n_questions=5, **_):
    world = _World(rng, people)
    for _ in range(n_questions):
        for _ in range(2):
            pair = [people[i] for i in rng.permutation(len(people))[:2]]
            _pair_move(world, story, pair)
        person = world.choice(list(world.location))
        location, line = world.location[person]
        story.ask(f"Where is {person}?", location, [line])


def _task_13(rng, story, people, n_questions=5, **_):
    world = _World(rng, people)
    pair = None
    for _ in range(n_questions):
        for _ in range(2):
            if pair is not None and rng.rand() < 0.5:
                _pair_move(world, story, pair, prefix=world.choice(_LINKS))
            else:
                pair = [people[i] for i in rng.permutation(len(people))[:2]]
                _pair_move(world, story, pair)
        person = world.choice(list(world.location))
        location, line = world.location[person]
        story.ask(f"Where is {person}?", location, [line])


_SPECIES = {"mice": "mouse", "sheep": "sheep", "wolves": "wolf", "cats": "cat"}
_DEDUCTION_NAMES = ("Gertrude", "Winona", "Jessica", "Emily")


def _task_15(rng, story, people=None, **_):
    plural = list(_SPECIES)
    afraid = {s: plural[rng.choice([i for i in range(4) if plural[i] != s])] for s in plural}
    kind = {n: plural[rng.randint(4)] for n in _DEDUCTION_NAMES}
    statements = [("afraid", s) for s in plural] + [("is", n) for n in _DEDUCTION_NAMES]
    line_of = {}
    for i in rng.permutation(len(statements)):
        what, key = statements[i]
        if what == "afraid":
            line_of[key] = story.say(f"{key.capitalize()} are afraid of {afraid[key]}.")
        else:
            article = "an" if _SPECIES[kind[key]][0] in "aeiou" else "a"
            line_of[key] = story.say(f"{key} is {article} {_SPECIES[kind[key]]}.")
    for _ in range(4):
        name = _DEDUCTION_NAMES[rng.randint(4)]
        story.ask(f"What is {name} afraid of?", _SPECIES[afraid[kind[name]]],
                  [line_of[name], line_of[kind[name]]])


_ANIMALS = ("swan", "lion", "frog", "rhino")
_COLOURS = ("white", "gray", "yellow", "green")
_INDUCTION_NAMES = ("Lily", "Bernhard", "Greg", "Julius", "Brian")


def _task_16(rng, story, people=None, **_):
    names = [_INDUCTION_NAMES[i] for i in rng.permutation(5)]
    asked, others = names[-1], names[:-1]
    colour = {a: _COLOURS[rng.randint(4)] for a in _ANIMALS}
    animal = {n: _ANIMALS[rng.randint(4)] for n in names}
    animal[others[rng.randint(4)]] = animal[asked]  # at least one witness of the same species
    species_line, colour_line = {}, {}
    for n in others:
        species_line[n] = story.say(f"{n} is a {animal[n]}.")
        colour_line[n] = story.say(f"{n} is {colour[animal[n]]}.")
    asked_line = story.say(f"{asked} is a {animal[asked]}.")
    witness = [n for n in others if animal[n] == animal[asked]][-1]
    story.ask(f"What color is {asked}?", colour[animal[asked]],
              [asked_line, species_line[witness], colour_line[witness]])


_GENERATORS = {1: _task_1, 2: _task_2, 3: _task_3, 4: _task_4, 6: _task_6, 7: _task_7,
               8: _task_8, 9: _task_9, 11: _task_11, 12: _task_12, 13: _task_13, 15: _task_15,
               16: _task_16}
GENERATED_TASKS = tuple(sorted(_GENERATORS))


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
    if task not in _GENERATORS:
        raise ValueError(f"generate_story_lines expects `task` in {GENERATED_TASKS}, "
                         f"received task={task!r}.")
    story = _Story()
    _GENERATORS[task](rng, story, list(people), **story_options)
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


def systematic_split(examples_per_pair=500, question_fraction=0.2, seed=0,
                     coverage=SYSTEMATIC_COVERAGE, tasks=SYSTEMATIC_TASKS, **story_options):
    """The systematic-generalisation data (spec Sec. 4.5): new names seen only in some tasks.

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
            pairs = [("test", seed * 7919 + 31 * index + 1000 * len(name))]
            if index < covered:
                train_pairs.add((name, task))
                pairs.append(("train", seed * 7919 + 31 * index + 1000 * len(name) + 500))
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
