"""One story generator per bAbI task (Weston et al. 2015's task descriptions), over `World`.

Each ``_task_N(rng, story, people, **options)`` appends the lines of one story (statements and
questions with their supporting facts) to a `Story`. It is not the Facebook generator, so the
vocabulary and phrasing frequencies differ a little from the released data.
"""

import re

from .world import LOCATIONS, MOVE_VERBS, OBJECTS, World

# Pronouns for task 11; the new names' pronouns are an arbitrary fixed choice.
_PRONOUNS = {"Mary": "she", "Sandra": "she", "John": "he", "Daniel": "he", "Alex": "he",
             "Glenn": "he", "Jordan": "she", "Mike": "he", "Logan": "she"}
_NUMBERS = ("none", "one", "two", "three")


def _task_1(rng, story, people, n_questions=5, **_):
    world = World(rng, people)
    for _ in range(n_questions):
        for _ in range(2):
            world.move(story, world.choice(people))
        person = world.choice(list(world.location))
        location, line = world.location[person]
        story.ask(f"Where is {person}?", location, [line])


def _task_2(rng, story, people, n_questions=5, statements_per_question=6, **_):
    world = World(rng, people)
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
    world = World(rng, people)
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
    world = World(rng, people)
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
    world = World(rng, people)
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
    # Canonical answer order [A]: pickup order (the task description does not fix one).
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
    world = World(rng, people)
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
    world = World(rng, people)
    for _ in range(n_questions):
        for _ in range(2):
            pair = [people[i] for i in rng.permutation(len(people))[:2]]
            _pair_move(world, story, pair)
        person = world.choice(list(world.location))
        location, line = world.location[person]
        story.ask(f"Where is {person}?", location, [line])


def _task_13(rng, story, people, n_questions=5, **_):
    world = World(rng, people)
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


TASK_GENERATORS = {1: _task_1, 2: _task_2, 3: _task_3, 4: _task_4, 6: _task_6, 7: _task_7,
               8: _task_8, 9: _task_9, 11: _task_11, 12: _task_12, 13: _task_13, 15: _task_15,
               16: _task_16}
GENERATED_TASKS = tuple(sorted(TASK_GENERATORS))
