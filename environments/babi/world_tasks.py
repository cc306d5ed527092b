"""The bAbI tasks about people in a house (Weston et al. 2015): 1-3 and 5-13.

Each ``task_N(rng, story, people, **options)`` appends the lines of one story (statements and
questions with their supporting facts) to a `Story`; most simulate a `World` of people, places
and objects. It is not the Facebook generator, so the vocabulary and phrasing frequencies differ
a little from the released data.
"""

from .world import DROP_VERBS, GIVE_VERBS, LOCATIONS, MOVE_VERBS, OBJECTS, PICK_VERBS, World

# Pronouns for task 11; the new names' pronouns are an arbitrary fixed choice.
_PRONOUNS = {"Mary": "she", "Sandra": "she", "John": "he", "Daniel": "he", "Alex": "he",
             "Glenn": "he", "Jordan": "she", "Mike": "he", "Logan": "she"}
_NUMBERS = ("none", "one", "two", "three")


def task_1(rng, story, people, n_questions=5, **_):
    """Single supporting fact, as in Facebook's generator (WhereIsActor): 2 moves and 1
    question, ``n_questions`` times.

    A move takes a random person to a random place other than where they really are (people
    start in Facebook's unseen places, `_STARTS`); the question asks where someone told of is
    (their latest move is the supporting fact).
    """
    at, told = _start_places(people), {}
    for _ in range(n_questions):
        for _ in range(2):
            _teleport(rng, story, people, at, told)
        person = list(told)[rng.randint(len(told))]
        location, line = told[person]
        story.ask(f"Where is {person}?", location, [line])


def _start_places(people):
    """Where ``people`` really are before a story: Facebook's world's places, by name or (for
    another name) by position."""
    starts = list(_STARTS.values())
    return {p: _STARTS.get(p, starts[i % len(starts)]) for i, p in enumerate(people)}


def _teleport(rng, story, people, at, told):
    """Facebook's teleport of tasks 1 and 6: a random person goes to a random other place."""
    person = people[rng.randint(len(people))]
    others = [loc for loc in LOCATIONS if loc != at[person]]
    at[person] = others[rng.randint(len(others))]
    verb = MOVE_VERBS[rng.randint(len(MOVE_VERBS))]
    told[person] = (at[person], story.say(f"{person} {verb} to the {at[person]}."))


# Where people and objects start in Facebook's world (world_basic), unseen until a move or a
# pick-up tells it; a person of another name starts where the person in that position would.
_STARTS = {"John": "kitchen", "Mary": "bedroom", "Sandra": "garden", "Daniel": "hallway"}
_OBJECT_STARTS = {"apple": "kitchen", "football": "garden", "milk": "kitchen"}


class _UnseenWorld:
    """The world of Facebook's tasks 2, 3, 7 and 8: people and objects start in unseen places.

    Only moves tell where someone is; a pick-up needs the person where the object lies (in the
    simulated world, whether or not the story told it). ``act`` tells one action of a family
    drawn from ``families`` (``"move"``, ``"getdrop"``: a pick-up or a drop, ``"give"``),
    uniformly among the family's possible actions; a family with none is drawn again.
    """

    def __init__(self, rng, people):
        self.rng = rng
        self.people = list(people)
        starts = list(_STARTS.values())
        self.at = {p: _STARTS.get(p, starts[i % len(starts)])  # true places
                   for i, p in enumerate(people)}
        self.lies = dict(_OBJECT_STARTS)  # object -> place, while on the floor
        self.holder = {}  # object -> (person, pick-up or give line)
        self.seen = {}  # person -> (place, line of the latest move)
        self.carrying = {p: [] for p in people}  # in pick-up order
        self.dropped = {}  # object -> (place or None if unseen, drop line, move line)

    def choice(self, seq):
        return seq[self.rng.randint(len(seq))]

    def _options(self, family):
        if family == "move":
            return [("move", p, loc) for p in self.people for loc in LOCATIONS
                    if loc != self.at[p]]
        if family == "getdrop":
            return ([("get", p, o) for p in self.people for o in OBJECTS
                     if o in self.lies and self.lies[o] == self.at[p]]
                    + [("drop", p, o) for p in self.people for o in self.carrying[p]])
        return [("give", p, o, q) for p in self.people for o in self.carrying[p]
                for q in self.people if q != p and self.at[q] == self.at[p]]

    def act(self, story, families):
        """Tells one action; returns it as ``(kind, person, ...)`` with its line appended."""
        options = []
        while not options:
            options = self._options(self.choice(families))
        action = self.choice(options)
        kind, person = action[:2]
        if kind == "move":
            line = story.say(f"{person} {self.choice(MOVE_VERBS)} to the {action[2]}.")
            self.at[person] = action[2]
            self.seen[person] = (action[2], line)
        elif kind == "get":
            obj = action[2]
            there = " there" if self.rng.rand() < 0.5 else ""
            line = story.say(f"{person} {self.choice(PICK_VERBS)} the {obj}{there}.")
            del self.lies[obj]
            self.dropped.pop(obj, None)
            self.holder[obj] = (person, line)
            self.carrying[person].append(obj)
        elif kind == "drop":
            obj = action[2]
            line = story.say(f"{person} {self.choice(DROP_VERBS)} the {obj}.")
            self.carrying[person].remove(obj)
            del self.holder[obj]
            self.lies[obj] = self.at[person]
            place, move_line = self.seen.get(person, (None, None))
            self.dropped[obj] = (place, line, move_line)
        else:
            obj, receiver = action[2], action[3]
            line = story.say(f"{person} {self.choice(GIVE_VERBS)} the {obj} to {receiver}.")
            self.carrying[person].remove(obj)
            self.carrying[receiver].append(obj)
            self.holder[obj] = (receiver, line)
        return action + (line,)

    def known_place(self, obj):
        """(place, support lines) of an object as the story tells it so far, or None."""
        if obj in self.holder:
            person, line = self.holder[obj]
            if person in self.seen:
                place, move_line = self.seen[person]
                return place, {line, move_line}
            return None
        if obj in self.dropped and self.dropped[obj][0] is not None:
            place, line, move_line = self.dropped[obj]
            return place, {line, move_line}
        return None


def _wait_for_question(rng, since, at_least):
    """Facebook's tasks 2 and 3: after ``at_least`` statements, each one may be followed by a
    question with probability 1/2."""
    return since >= at_least and rng.rand() < 0.5


def task_2(rng, story, people, n_questions=5, statements_per_question=3, **_):
    """Two supporting facts, as in Facebook's generator (WhereIsObject).

    Moves (a third of the statements), pick-ups and drops; after ``statements_per_question``
    statements, each statement is followed by a question with probability 1/2 when some object
    is held by someone whose place is told: the question asks where such an object is (the
    pick-up and the holder's latest move). Objects lying on the floor are not asked about.
    """
    world = _UnseenWorld(rng, people)
    since = 0
    while story.questions < n_questions:
        world.act(story, ("getdrop", "getdrop", "move"))
        since += 1
        if not _wait_for_question(rng, since, statements_per_question):
            continue
        held = [o for o in OBJECTS if o in world.holder and world.known_place(o)]
        if held:
            obj = world.choice(held)
            place, support = world.known_place(obj)
            story.ask(f"Where is the {obj}?", place, sorted(support, reverse=True))
            since = 0


def task_3(rng, story, people, n_questions=5, statements_per_question=4,
           first_question_after=(15, 100), **_):
    """Three supporting facts: where an object was before a place, in long stories.

    As in the released data, a story tells ``first_question_after`` (a range) statements before
    its first question, so that the three facts (the pick-up and the two moves of its carrier)
    are spread over many sentences, and then asks every 1 to ``statements_per_question``
    statements. As in Facebook's generator, a question asks about an object's latest move (where
    it was before the place it is in now); only places the object entered once are asked about
    (unambiguous) and only moves by one carrier (three facts, as in the released data).
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
            i = len(history) - 1  # the latest move, as in Facebook's generator
            # The same carrier from the place before into the place: exactly three facts.
            if i > 0 and locations.count(locations[i]) == 1 \
                    and history[i][1][0] == history[i - 1][1][0]:
                candidates.append((obj, i))
        if candidates:
            obj, i = world.choice(candidates)
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


def task_5(rng, story, people=None, n_questions=5, **_):
    """Three-argument relations: segments of moves, pick-ups and gives, each ended by a give.

    As in Facebook's generator, every action is a move, a pick-up or a give (equally likely,
    among those possible; people and objects start in unseen places), a segment ends with the
    first give after at least three statements, its statements are told in a random order and
    the question asks about that last give. The told order is redrawn (or kept) when the
    question would otherwise be ambiguous in the text.
    """
    people = THREE_ARGUMENT_PEOPLE
    at = {p: LOCATIONS[rng.randint(len(LOCATIONS))] for p in people}
    lies = {o: LOCATIONS[rng.randint(len(LOCATIONS))] for o in OBJECTS}  # object -> place
    holder = {}  # object -> person
    transfers = []  # (giver, object, receiver) in told order
    while story.questions < n_questions:
        segment, give = [], None  # [(text, transfer or None)]
        while give is None or len(segment) < 3:
            give = None
            options = {
                "move": [(p, loc) for p in people for loc in LOCATIONS if loc != at[p]],
                "get": [(p, o) for p in people for o in OBJECTS
                        if o not in holder and lies[o] == at[p]],
                "give": [(p, o, q) for o, p in holder.items() for q in people
                         if q != p and at[q] == at[p]],
            }
            action = ("move", "get", "give")[rng.randint(3)]
            while not options[action]:
                action = ("move", "get", "give")[rng.randint(3)]
            chosen = options[action][rng.randint(len(options[action]))]
            if action == "move":
                at[chosen[0]] = chosen[1]
                verb = MOVE_VERBS[rng.randint(len(MOVE_VERBS))]
                segment.append((f"{chosen[0]} {verb} to the {chosen[1]}.", None))
            elif action == "get":
                holder[chosen[1]] = chosen[0]
                there = " there" if rng.rand() < 0.5 else ""
                verb = PICK_VERBS[rng.randint(len(PICK_VERBS))]
                segment.append((f"{chosen[0]} {verb} the {chosen[1]}{there}.", None))
            else:
                giver, obj, receiver = give = chosen
                holder[obj] = receiver
                verb = GIVE_VERBS[rng.randint(len(GIVE_VERBS))]
                segment.append((f"{giver} {verb} the {obj} to {receiver}.", give))
        for attempt in range(4):
            order = rng.permutation(len(segment)) if attempt < 3 else range(len(segment))
            told = transfers + [segment[i][1] for i in order if segment[i][1]]
            kinds = [k for k in range(5) if _latest_transfer(told, give, k) == len(told) - 1
                     - told[::-1].index(give)]
            if kinds:
                break
        line_of_give = None
        for i in order:
            line = story.say(segment[i][0])
            if segment[i][1] == give:
                line_of_give = line
        transfers = told
        giver, obj, receiver = give
        question, answer = (
            (f"What did {giver} give to {receiver}?", obj),
            (f"Who gave the {obj} to {receiver}?", giver),
            (f"Who gave the {obj}?", giver),
            (f"Who received the {obj}?", receiver),
            (f"Who did {giver} give the {obj} to?", receiver),
        )[kinds[rng.randint(len(kinds))]]
        story.ask(question, answer, [line_of_give])


# The transfer fields a question kind of task 5 names (giver 0, object 1, receiver 2).
_ASKED_FIELDS = ((0, 2), (1, 2), (1,), (1,), (0, 1))


def _latest_transfer(transfers, give, kind):
    """The index of the latest transfer that matches ``give`` in what question ``kind`` names."""
    fields = _ASKED_FIELDS[kind]
    return max(i for i, t in enumerate(transfers) if all(t[f] == give[f] for f in fields))


def task_6(rng, story, people, n_questions=5, **_):
    """Yes/no questions, as in Facebook's generator (IsActorThere): task 1's story (2 moves and
    1 question, ``n_questions`` times); half of the questions name the asked person's told place
    (yes), the others another of the six places (no)."""
    at, told = _start_places(people), {}
    for _ in range(n_questions):
        for _ in range(2):
            _teleport(rng, story, people, at, told)
        person = list(told)[rng.randint(len(told))]
        location, line = told[person]
        if rng.rand() < 0.5:
            story.ask(f"Is {person} in the {location}?", "yes", [line])
        else:
            other = world_choice(rng, [loc for loc in LOCATIONS if loc != location])
            story.ask(f"Is {person} in the {other}?", "no", [line])


def _carry_task(rng, story, people, ask, n_questions=5, **_):
    """Tasks 7 and 8 as in Facebook's generator (Counting, Listing).

    Each statement is a pick-up or drop (half of them), a give or a move (a quarter each),
    among those possible. The first question follows the first statement after the second
    when someone has picked up, dropped or given something; then one follows every two
    statements, ``n_questions`` in all. A question asks about a random person among those who
    have picked up, dropped or given something; its supporting facts are that person's
    pick-ups, drops and gives and the gives to them (Facebook's generator leaves the latter out,
    though the answer needs them).
    """
    world = _UnseenWorld(rng, people)
    events = {p: [] for p in people}  # person -> lines of their object events
    actors = []  # those who picked up, dropped or gave, in the order first seen
    told = 0
    while story.questions < n_questions:
        action = world.act(story, ("getdrop", "give", "move", "getdrop"))
        told += 1
        kind, person, line = action[0], action[1], action[-1]
        if kind != "move":
            events[person].append(line)
            if person not in actors:
                actors.append(person)
            if kind == "give":
                events[action[3]].append(line)
        if actors and (told > 1 if story.questions == 0 else told % 2 == 0):
            if story.questions == 0:
                told = 0
            person = world.choice(actors)
            ask(story, person, world.carrying[person], events[person])


def task_7(rng, story, people, n_questions=5, **_):
    def ask(story, person, carried, support):
        story.ask(f"How many objects is {person} carrying?", _NUMBERS[len(carried)],
                  sorted(support))

    _carry_task(rng, story, people, ask, n_questions)


def task_8(rng, story, people, n_questions=5, **_):
    # Canonical answer order [A]: pickup order (the task description does not fix one).
    def ask(story, person, carried, support):
        story.ask(f"What is {person} carrying?", ",".join(carried) or "nothing", sorted(support))

    _carry_task(rng, story, people, ask, n_questions)


def world_choice(rng, seq):
    return seq[rng.randint(len(seq))]


def task_9(rng, story, people, n_questions=5, **_):
    """Simple negation, as in Facebook's generator: 2 statements and 1 question, 5 times.

    A statement is a move (half of them, to a new place) or a statement about where someone
    really is (unseen until told): ``X is in the L.`` (true place) or ``X is not / no longer in
    the L.`` (another place), which moves nobody. The question asks about someone told of and the
    place of their latest statement, or (half the time when that statement is affirmative)
    another place: about 3/8 of the answers are yes.
    """
    where = {p: LOCATIONS[rng.randint(len(LOCATIONS))] for p in people}  # the true places
    latest = {}  # person -> (location, is there, line), in the order people are first told of
    for _ in range(n_questions):
        for _ in range(2):
            person = people[rng.randint(len(people))]
            others = [loc for loc in LOCATIONS if loc != where[person]]
            if rng.rand() < 0.5:
                where[person] = others[rng.randint(len(others))]
                verb = MOVE_VERBS[rng.randint(len(MOVE_VERBS))]
                line = story.say(f"{person} {verb} to the {where[person]}.")
                latest[person] = (where[person], True, line)
            elif rng.rand() < 0.5:
                line = story.say(f"{person} is in the {where[person]}.")
                latest[person] = (where[person], True, line)
            else:
                location = others[rng.randint(len(others))]
                negation = ("not", "no longer")[rng.randint(2)]
                line = story.say(f"{person} is {negation} in the {location}.")
                latest[person] = (location, False, line)
        person = list(latest)[rng.randint(len(latest))]
        location, there, line = latest[person]
        if there and rng.rand() < 0.5:
            location = world_choice(rng, [loc for loc in LOCATIONS if loc != location])
            there = False
        story.ask(f"Is {person} in the {location}?", "yes" if there else "no", [line])


# Task 10's people and places (Weston et al. 2015's released data).
INDEFINITE_PEOPLE = ("Bill", "Fred", "Julie", "Mary")
INDEFINITE_PLACES = ("bedroom", "cinema", "kitchen", "office", "park", "school")


def task_10(rng, story, people=None, n_questions=5, **_):
    """Indefinite knowledge, as in Facebook's generator: 2 statements and 1 question, 5 times.

    A statement is (equally likely) a move to a new place, ``X is in the L.`` (the true place) or
    ``X is either in the A or the B.`` (two random places; it moves nobody and replaces what was
    known unless it agrees with it: then the one place in both is known). The question asks
    whether someone told of is in a random place of the six: mostly ``no``, ``maybe`` when the
    place is one of two possible.
    """
    people, places = INDEFINITE_PEOPLE, INDEFINITE_PLACES
    where = {p: places[rng.randint(len(places))] for p in people}  # the true places
    known = {}  # person -> (possible places, support lines), in the order first told of
    for _ in range(n_questions):
        for _ in range(2):
            person = people[rng.randint(len(people))]
            kind = rng.randint(3)
            if kind == 0:
                others = [p for p in places if p != where[person]]
                where[person] = others[rng.randint(len(others))]
                verb = MOVE_VERBS[rng.randint(len(MOVE_VERBS))]
                known[person] = ({where[person]}, [story.say(f"{person} {verb} to the "
                                                             f"{where[person]}.")])
            elif kind == 1:
                known[person] = ({where[person]}, [story.say(f"{person} is in the "
                                                             f"{where[person]}.")])
            else:
                first, second = (places[i] for i in rng.permutation(len(places))[:2])
                line = story.say(f"{person} is either in the {first} or the {second}.")
                before, support = known.get(person, (set(), []))
                both = before & {first, second}
                known[person] = (both, support + [line]) if len(both) == 1 else \
                    ({first, second}, [line])
        person = list(known)[rng.randint(len(known))]
        place = places[rng.randint(len(places))]
        possible, support = known[person]
        answer = "no" if place not in possible else "yes" if len(possible) == 1 else "maybe"
        story.ask(f"Is {person} in the {place}?", answer, sorted(support))


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
