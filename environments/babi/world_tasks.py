"""The bAbI tasks about people in a house (Weston et al. 2015): 1-3 and 5-13.

Each ``task_N(rng, story, people, **options)`` appends the lines of one story (statements and
questions with their supporting facts) to a `Story`; most simulate a `World` of people, places
and objects. It is not the Facebook generator, so the vocabulary and phrasing frequencies differ
a little from the released data.
"""

import re

from .world import LOCATIONS, MOVE_VERBS, OBJECTS, World

# Pronouns for task 11; the new names' pronouns are an arbitrary fixed choice.
_PRONOUNS = {"Mary": "she", "Sandra": "she", "John": "he", "Daniel": "he", "Alex": "he",
             "Glenn": "he", "Jordan": "she", "Mike": "he", "Logan": "she"}
_NUMBERS = ("none", "one", "two", "three")


def task_1(rng, story, people, n_questions=5, **_):
    world = World(rng, people)
    for _ in range(n_questions):
        for _ in range(2):
            world.move(story, world.choice(people))
        person = world.choice(list(world.location))
        location, line = world.location[person]
        story.ask(f"Where is {person}?", location, [line])


def task_2(rng, story, people, n_questions=5, statements_per_question=6, **_):
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


def task_3(rng, story, people, n_questions=5, statements_per_question=8, **_):
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


# Task 5's people (Weston et al. 2015, Table 1: Bill, Fred, Jeff, Mary).
THREE_ARGUMENT_PEOPLE = ("Bill", "Fred", "Jeff", "Mary")


def task_5(rng, story, people=None, n_questions=5, statements_per_question=3, **_):
    """Three-argument relations: who gave what to whom; the latest matching transfer counts."""
    people = THREE_ARGUMENT_PEOPLE
    world = World(rng, people)
    for p in people:
        world.move(story, p)
    while story.questions < n_questions:
        for _ in range(rng.randint(statements_per_question + 1)):
            world.random_action(story, allow_give=True)
        _give_something(world, story)
        # Mostly the transfer just told, sometimes an earlier one (Weston et al. ask both).
        giver, obj, receiver, _ = (world.transfers[-1] if rng.rand() < 0.7
                                   else world.choice(world.transfers))
        kind = rng.randint(5)
        if kind == 0:
            question, key, answer = f"What did {giver} give to {receiver}?", (0, 2), 1
        elif kind == 1:
            question, key, answer = f"Who gave the {obj} to {receiver}?", (1, 2), 0
        elif kind == 2:
            question, key, answer = f"Who gave the {obj}?", (1,), 0
        elif kind == 3:
            question, key, answer = f"Who received the {obj}?", (1,), 2
        else:
            question, key, answer = f"Who did {giver} give the {obj} to?", (0, 1), 2
        asked = (giver, obj, receiver)
        latest = [t for t in world.transfers if all(t[k] == asked[k] for k in key)][-1]
        story.ask(question, latest[answer], [latest[3]])


def _give_something(world, story):
    """Tells a transfer: someone picks an object up and someone joins them first if needed."""
    holders = [(p, o) for p in world.people for o in world.carrying[p]]
    free = [o for o in OBJECTS if o not in world.holder]
    if free and (not holders or world.rng.rand() < 0.3):
        obj = world.choice(free)
        if obj in world.place:  # dropped: someone must be (or go) where it lies
            there = [p for p in world.people if world.location[p][0] == world.place[obj][0]]
            picker = world.choice(there or world.people)
            if not there:
                world.move(story, picker, location=world.place[obj][0])
        else:
            picker = world.choice(world.people)
        world.pick(story, picker, obj)
        holders = [(picker, obj)]
    giver, obj = world.choice(holders)
    here = world.location[giver][0]
    receivers = [p for p in world.people if p != giver and world.location[p][0] == here]
    if not receivers:
        receivers = [world.choice([p for p in world.people if p != giver])]
        world.move(story, receivers[0], location=here)
    world.give(story, giver, world.choice(receivers), obj)


def task_6(rng, story, people, n_questions=5, **_):
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


def task_7(rng, story, people, n_questions=5, **_):
    def ask(story, person, carried, support):
        story.ask(f"How many objects is {person} carrying?", _NUMBERS[len(carried)], support)

    _carry_task(rng, story, people, ask, n_questions)


def task_8(rng, story, people, n_questions=5, **_):
    # Canonical answer order [A]: pickup order (the task description does not fix one).
    def ask(story, person, carried, support):
        story.ask(f"What is {person} carrying?", ",".join(carried) or "nothing", support)

    _carry_task(rng, story, people, ask, n_questions)


def task_9(rng, story, people, n_questions=5, **_):
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


# Task 10's people and places (Weston et al. 2015's released data).
INDEFINITE_PEOPLE = ("Bill", "Fred", "Julie", "Mary")
INDEFINITE_PLACES = ("bedroom", "cinema", "kitchen", "office", "park", "school")


def task_10(rng, story, people=None, n_questions=5, **_):
    """Indefinite knowledge: ``X is either in the A or the B.``; yes / no / maybe answers."""
    people, places = INDEFINITE_PEOPLE, INDEFINITE_PLACES
    known = {}  # person -> (possible places, line)
    for _ in range(n_questions):
        for _ in range(2):
            person = people[rng.randint(len(people))]
            kind = rng.randint(4)  # half of the statements are indefinite
            if kind < 2:
                first, second = (places[i] for i in rng.permutation(len(places))[:2])
                line = story.say(f"{person} is either in the {first} or the {second}.")
                known[person] = ({first, second}, line)
            else:
                place = places[rng.randint(len(places))]
                verb = "is in" if kind == 2 else MOVE_VERBS[rng.randint(len(MOVE_VERBS))] + " to"
                known[person] = ({place}, story.say(f"{person} {verb} the {place}."))
        # The answer first, among those possible now, so that yes, no and maybe are balanced.
        pools = {"yes": [p for p in known if len(known[p][0]) == 1],
                 "no": list(known), "maybe": [p for p in known if len(known[p][0]) == 2]}
        answer = [a for a in pools if pools[a]][rng.randint(sum(map(bool, pools.values())))]
        pool = pools[answer]
        person = pool[rng.randint(len(pool))]
        possible, line = known[person]
        options = sorted(possible) if answer != "no" else [p for p in places
                                                           if p not in possible]
        place = options[rng.randint(len(options))]
        story.ask(f"Is {person} in the {place}?", answer, [line])


_LINKS = ("Then", "Afterwards", "Following that", "After that")


def _pronoun(person):
    return _PRONOUNS.get(person, "they")


def task_11(rng, story, people, n_questions=5, **_):
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


def task_12(rng, story, people, n_questions=5, **_):
    world = World(rng, people)
    for _ in range(n_questions):
        for _ in range(2):
            pair = [people[i] for i in rng.permutation(len(people))[:2]]
            _pair_move(world, story, pair)
        person = world.choice(list(world.location))
        location, line = world.location[person]
        story.ask(f"Where is {person}?", location, [line])


def task_13(rng, story, people, n_questions=5, **_):
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
