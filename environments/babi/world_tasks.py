"""The bAbI tasks about people in a house (Weston et al. 2015): 1-3 and 5-13.

Each ``task_N(rng, story, people, **options)`` appends the lines of one story (statements and
questions with their supporting facts) to a `Story`; most simulate a `World` of people, places
and objects. It is not the Facebook generator, so the vocabulary and phrasing frequencies differ
a little from the released data.
"""

import numpy as np

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


def task_3(rng, story, people, n_questions=5, statements_per_question=4,
           first_question_after=(15, 100), **_):
    """Three supporting facts: where an object was before a place, in long stories.

    As in the released data, a story tells ``first_question_after`` (a range) statements before
    its first question, so that the three facts (the pick-up and the two moves of its carrier)
    are spread over many sentences, and then asks every 1 to ``statements_per_question``
    statements. Only places the object entered once are asked about (unambiguous).
    """
    world = World(rng, people)
    for p in people:
        world.move(story, p)
    low, high = first_question_after
    for _ in range(max(0, low - len(people) + rng.randint(high - low + 1))):
        world.random_action(story)
    while story.questions < n_questions:
        candidates = []
        for obj, history in world.history.items():
            locations = [loc for loc, _ in history]
            for i in range(1, len(history)):
                # The same carrier from the place before into the place: exactly three facts.
                if locations.count(locations[i]) == 1 and history[i][1][0] == history[i - 1][1][0]:
                    candidates.append((obj, i))
        if candidates:
            # The latest transitions more often: the released questions follow the action.
            obj, i = candidates[-1] if rng.rand() < 0.5 else world.choice(candidates)
            history = world.history[obj]
            support = sorted(set(history[i][1]) | set(history[i - 1][1]), reverse=True)
            story.ask(f"Where was the {obj} before the {history[i][0]}?", history[i - 1][0],
                      support)
        if len(story.lines) > 120:  # no place to ask about: end the story at its last question
            while story.lines and "\t" not in story.lines[-1]:
                story.lines.pop()
            return
        for _ in range(1 + rng.randint(statements_per_question)):
            world.random_action(story)


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


# The shares of "how many objects" answers aimed at in tasks 7 and 8 (none, one, two, three): the
# person asked about has handled an object, as in the released data, where a count of one is the
# most frequent answer and two or three objects are carried often enough to be learnt.
_CARRIED_SHARES = (0.3, 0.45, 0.2, 0.05)


def _carry_action(world, story, events):
    """A move, pick-up (most often), drop or give; records the object events per person."""
    people = world.people
    pickable = [(p, o) for p in people for o in OBJECTS
                if o not in world.holder and (o not in world.place
                                              or world.place[o][0] == world.location[p][0])]
    holders = [(p, o) for p in people for o in world.carrying[p]]
    gives = [(p, q, o) for p, o in holders for q in people
             if q != p and world.location[q][0] == world.location[p][0]]
    options = ["move"] * 2 + ["pick"] * 3 * bool(pickable) + ["drop"] * bool(holders) \
        + ["give"] * 2 * bool(gives)
    action = world.choice(options)
    if action == "move":
        world.move(story, world.choice(people))
    elif action == "pick":
        # Those who carry something pick up more: two or three objects in one hand are common.
        weights = np.array([1.0 + 2.0 * len(world.carrying[p]) for p, _ in pickable])
        person, obj = pickable[world.rng.choice(len(pickable), p=weights / weights.sum())]
        world.pick(story, person, obj)
        events[person].append(len(story.lines))
    elif action == "drop":
        person, obj = world.choice(holders)
        world.drop(story, person, obj)
        events[person].append(len(story.lines))
    else:
        giver, receiver, obj = world.choice(gives)
        world.give(story, giver, receiver, obj)
        events[giver].append(len(story.lines))
        events[receiver].append(len(story.lines))


def _carry_task(rng, story, people, ask, n_questions=5, statements_per_question=3):
    """Tasks 7 and 8: the supporting facts are the asked person's pick-ups, drops and gives."""
    world = World(rng, people)
    for p in people:
        world.move(story, p)
    events = {p: [] for p in people}
    while story.questions < n_questions:
        for _ in range(1 + rng.randint(statements_per_question)):
            _carry_action(world, story, events)
        by_count = {}
        for p in people:
            if events[p]:
                by_count.setdefault(len(world.carrying[p]), []).append(p)
        if not by_count:
            continue
        counts = sorted(by_count)
        weights = np.array([_CARRIED_SHARES[c] for c in counts])
        count = counts[rng.choice(len(counts), p=weights / weights.sum())]
        person = world.choice(by_count[count])
        ask(story, person, world.carrying[person], events[person])


def task_7(rng, story, people, n_questions=5, **_):
    def ask(story, person, carried, support):
        story.ask(f"How many objects is {person} carrying?", _NUMBERS[len(carried)], support)

    _carry_task(rng, story, people, ask, n_questions)


def task_8(rng, story, people, n_questions=5, **_):
    # Canonical answer order [A]: pickup order (the task description does not fix one).
    def ask(story, person, carried, support):
        story.ask(f"What is {person} carrying?", ",".join(carried) or "nothing", support)

    _carry_task(rng, story, people, ask, n_questions)


def world_choice(rng, seq):
    return seq[rng.randint(len(seq))]


def task_9(rng, story, people, n_questions=5, **_):
    """Simple negation: ``X is not in the L.``, ``X is no longer in the L.``; yes / no, balanced."""
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
        # The answer first, so that yes and no are about equally frequent (the released data's
        # yes/no tasks are balanced): yes a little more often when someone is known to be
        # somewhere, since sometimes nobody is. A "no" asks about a negated or another place.
        present = [p for p in state if state[p][0]]
        if present and rng.rand() < 0.58:
            person = present[rng.randint(len(present))]
            there, location, line = state[person]
            story.ask(f"Is {person} in the {location}?", "yes", [line])
            continue
        person = list(state)[rng.randint(len(state))]
        there, location, line = state[person]
        if there:
            location = world_choice(rng, [loc for loc in LOCATIONS if loc != location])
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
    """Basic coreference, as Facebook's generator tells it: ``n_questions`` times, a person goes
    to a place, then ``Then/After that/... he/she`` goes to another, and the question asks where
    that person is (the pronoun's statement is the supporting fact)."""
    world = World(rng, people)
    named = [p for p in people if _pronoun(p) != "they"] or people
    for _ in range(n_questions):
        person = world.choice(named)
        world.move(story, person)
        location = world.choice([x for x in LOCATIONS if x != world.location[person][0]])
        line = story.say(f"{world.choice(_LINKS)} {_pronoun(person)} "
                         f"{world.choice(MOVE_VERBS)} to the {location}.")
        world.location[person] = (location, line)
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


def _two_places(world):
    first = world.choice(LOCATIONS)
    return first, world.choice([x for x in LOCATIONS if x != first])


def task_12(rng, story, people, n_questions=5, **_):
    """Conjunction, as Facebook's generator tells it: ``n_questions`` times, two pairs of people
    go to two different places (``X and Y go to L1. Z and W go to L2.``; the pairs may share a
    person) and the question asks where one of the four named people is."""
    world = World(rng, people)
    for _ in range(n_questions):
        pairs = [[people[i] for i in rng.permutation(len(people))[:2]] for _ in range(2)]
        for pair, location in zip(pairs, _two_places(world), strict=True):
            _pair_move(world, story, pair, location=location)
        person = world.choice(pairs[0] + pairs[1])  # a person in both pairs: twice the chance
        location, line = world.location[person]
        story.ask(f"Where is {person}?", location, [line])


def task_13(rng, story, people, n_questions=5, **_):
    """Compound coreference, as Facebook's generator tells it: ``n_questions`` times, two people
    go to a place, then ``Then/After that/... they`` go to another, and the question asks where
    one of the two is (the ``they`` statement is the supporting fact)."""
    world = World(rng, people)
    for _ in range(n_questions):
        pair = [people[i] for i in rng.permutation(len(people))[:2]]
        first, second = _two_places(world)
        _pair_move(world, story, pair, location=first)
        _pair_move(world, story, pair, location=second, prefix=world.choice(_LINKS))
        person = world.choice(pair)
        location, line = world.location[person]
        story.ask(f"Where is {person}?", location, [line])
