"""The bAbI tasks with small worlds of their own (Weston et al. 2015): 4 and 14-20.

Two-argument relations between places (4), time (14), deduction (15), induction (16), positions
(17), sizes (18), paths (19) and motivations (20). Each ``task_N(rng, story, people, **options)``
appends the lines of one story to a `Story` (``people`` is unused: these tasks have their own
names). It is not the Facebook generator, so phrasing frequencies differ a little.
"""

from .world import LOCATIONS, MOVE_VERBS, PICK_VERBS

_DIRECTIONS = {"north": "south", "south": "north", "east": "west", "west": "east"}


def task_4(rng, story, people=None, **_):
    """Two-argument relations, as in Facebook's generator (IsDir): three places in a line.

    The first place, the middle one and the last lie one step apart along north or east; the
    two facts (first-middle, middle-last) are told in a random order, each phrased from either
    end (``The B is north of the A.`` or ``The A is south of the B.``). The question asks about
    the middle place and one of the others, in a direction drawn independently of how the fact
    was phrased, so half the questions need the fact read the other way round.
    """
    first, middle, last = (LOCATIONS[i] for i in rng.permutation(len(LOCATIONS))[:3])
    ahead = ("north", "east")[rng.randint(2)]
    facts = [(middle, first), (last, middle)]  # (X, Y): X is `ahead` of Y
    if rng.randint(2):
        facts.reverse()
    lines = []
    for x, y in facts:
        if rng.rand() < 0.5:
            lines.append(story.say(f"The {x} is {ahead} of the {y}."))
        else:
            lines.append(story.say(f"The {y} is {_DIRECTIONS[ahead]} of the {x}."))
    k = rng.randint(2)
    x, y = facts[k]
    if rng.randint(2):  # the same fact, read the other way round
        x, y, direction = y, x, _DIRECTIONS[ahead]
    else:
        direction = ahead
    if rng.rand() < 0.5:
        story.ask(f"What is {direction} of the {y}?", x, [lines[k]])
    else:
        story.ask(f"What is the {x} {direction} of?", y, [lines[k]])


_SPECIES = {"mice": "mouse", "sheep": "sheep", "wolves": "wolf", "cats": "cat"}
_DEDUCTION_NAMES = ("Gertrude", "Winona", "Jessica", "Emily")


def task_15(rng, story, people=None, **_):
    """Basic deduction, as in Facebook's generator (Deduction): 8 shuffled statements, then a
    question about each of the four people, in a random order.

    Each species is afraid of another (random) species; the four people are four different
    species (a random assignment), so each question needs its own two facts.
    """
    plural = list(_SPECIES)
    afraid = {s: plural[rng.choice([i for i in range(4) if plural[i] != s])] for s in plural}
    kind = {n: plural[i] for n, i in zip(_DEDUCTION_NAMES, rng.permutation(4), strict=True)}
    statements = [("afraid", s) for s in plural] + [("is", n) for n in _DEDUCTION_NAMES]
    line_of = {}
    for i in rng.permutation(len(statements)):
        what, key = statements[i]
        if what == "afraid":
            line_of[key] = story.say(f"{key.capitalize()} are afraid of {afraid[key]}.")
        else:
            article = "an" if _SPECIES[kind[key]][0] in "aeiou" else "a"
            line_of[key] = story.say(f"{key} is {article} {_SPECIES[kind[key]]}.")
    for i in rng.permutation(len(_DEDUCTION_NAMES)):
        name = _DEDUCTION_NAMES[i]
        story.ask(f"What is {name} afraid of?", _SPECIES[afraid[kind[name]]],
                  [line_of[name], line_of[kind[name]]])


_ANIMALS = ("swan", "lion", "frog", "rhino")
_COLOURS = ("white", "gray", "yellow", "green")
_INDUCTION_NAMES = ("Lily", "Bernhard", "Greg", "Julius", "Brian")


def task_16(rng, story, people=None, **_):
    """Basic induction, as in Facebook's generator (Induction): 9 shuffled statements, then a
    question.

    The four species have four different colours (a random assignment); each of the five people
    is a random species, and the asked person's species is drawn again until someone else is of
    it. Every person's species is told and every colour but the asked person's; the supporting
    facts are the asked person's species and the species and colour of everyone of that species.
    """
    colour = {a: _COLOURS[i] for a, i in zip(_ANIMALS, rng.permutation(4), strict=True)}
    animal = {n: _ANIMALS[rng.randint(4)] for n in _INDUCTION_NAMES}
    asked = _INDUCTION_NAMES[rng.randint(5)]
    while not any(animal[n] == animal[asked] for n in _INDUCTION_NAMES if n != asked):
        animal[asked] = _ANIMALS[rng.randint(4)]
    statements = [("colour", n) for n in _INDUCTION_NAMES if n != asked] + \
        [("species", n) for n in _INDUCTION_NAMES]
    line_of = {}
    for i in rng.permutation(len(statements)):
        what, name = statements[i]
        text = f"{name} is a {animal[name]}." if what == "species" else \
            f"{name} is {colour[animal[name]]}."
        line_of[what, name] = story.say(text)
    support = [line_of["species", asked]]
    for n in _INDUCTION_NAMES:
        if n != asked and animal[n] == animal[asked]:
            support += [line_of["species", n], line_of["colour", n]]
    story.ask(f"What color is {asked}?", colour[animal[asked]], sorted(support))


# Task 14's people, places and times (Weston et al. 2015's released data), in time order.
TIME_PEOPLE = ("Bill", "Fred", "Julie", "Mary")
TIME_PLACES = ("bedroom", "cinema", "kitchen", "office", "park", "school")
TIMES = ("yesterday", "this morning", "this afternoon", "this evening")


def task_14(rng, story, people=None, n_questions=5, **_):
    """Time reasoning, as in Facebook's generator: 4 statements, then a question every 2.

    Each statement moves someone, at a time of :data:`TIMES` not yet told for them, to a place
    they have not been told of. Two of the first four statements are about one person (so the
    first question can be asked). A question names someone with two or more told moves and one of
    them (not the earliest): the answer is the place at the told time just before it.
    """
    people, places = TIME_PEOPLE, TIME_PLACES
    moves = {p: {} for p in people}  # person -> {time index: (place, slot)}
    first = people[rng.randint(len(people))]
    slots = rng.permutation(4)[:2] + 1
    times = rng.permutation(len(TIMES))[:2]
    for slot, t, i in zip(slots, times, rng.permutation(len(places))[:2], strict=True):
        moves[first][t] = (places[i], slot)
    line_of = {}  # slot -> line
    for slot in range(1, 3 * n_questions + 3):
        if slot > 2 and (slot - 2) % 3 == 0:
            askable = [p for p in people if len(moves[p]) > 1]
            person = askable[rng.randint(len(askable))]
            told = sorted(moves[person])
            k = rng.randint(len(told) - 1)
            (before, before_slot), (place, slot_at) = (moves[person][told[k]],
                                                       moves[person][told[k + 1]])
            story.ask(f"Where was {person} before the {place}?", before,
                      [line_of[before_slot], line_of[slot_at]])
            continue
        told_here = [(p, t) for p in people for t, (_, s) in moves[p].items() if s == slot]
        if told_here:
            person, t = told_here[0]
        else:
            while True:
                person = people[rng.randint(len(people))]
                t = rng.randint(len(TIMES))
                place = places[rng.randint(len(places))]
                if t not in moves[person] and place not in {v for v, _ in moves[person].values()}:
                    break
            moves[person][t] = (place, slot)
        place = moves[person][t][0]
        verb = MOVE_VERBS[rng.randint(len(MOVE_VERBS))]
        if rng.rand() < 0.5:
            line_of[slot] = story.say(f"{TIMES[t].capitalize()} {person} {verb} to the {place}.")
        else:
            line_of[slot] = story.say(f"{person} {verb} to the {place} {TIMES[t]}.")


# Task 17's shapes (Weston et al. 2015's released data) and the grid offset of each relation.
SHAPES = ("triangle", "red square", "blue square", "red sphere", "pink rectangle",
          "yellow square")
_OFFSETS = {"above": (0, 1), "below": (0, -1), "to the left of": (-1, 0),
            "to the right of": (1, 0)}


def task_17(rng, story, people=None, n_questions=8, **_):
    """Positional reasoning, as in Facebook's generator: two chained relations, 8 questions.

    A question asks about any two of the three shapes (the directly told pairs too), along an
    axis on which they differ, naming the relation that holds (yes) or its opposite (no), each
    half the time; both statements support every answer.
    """
    a, b, c = (SHAPES[i] for i in rng.permutation(len(SHAPES))[:3])
    relations = list(_OFFSETS)
    first = relations[rng.randint(4)]
    second = [r for r in relations if r != _opposite(first)][rng.randint(3)]
    position = {b: (0, 0)}
    position[a] = tuple(p + d for p, d in zip(position[b], _OFFSETS[first], strict=True))
    position[c] = tuple(p + d for p, d in zip(position[a], _OFFSETS[second], strict=True))
    lines = [story.say(f"The {a} is {first} the {b}."), story.say(f"The {c} is {second} the {a}.")]
    shapes = (a, b, c)
    for _ in range(n_questions):
        x, y = (shapes[i] for i in rng.permutation(3)[:2])
        difference = [p - q for p, q in zip(position[x], position[y], strict=True)]
        axes = [axis for axis in (0, 1) if difference[axis] != 0]
        axis = axes[rng.randint(len(axes))]
        truth = rng.randint(2) == 0
        positive = (difference[axis] > 0) == truth
        relation = (("to the left of", "to the right of"), ("below", "above"))[axis][positive]
        story.ask(f"Is the {x} {relation} the {y}?", "yes" if truth else "no", lines)


def _opposite(relation):
    return {"above": "below", "below": "above", "to the left of": "to the right of",
            "to the right of": "to the left of"}[relation]


# Task 18's things (Weston et al. 2015's released data).
SIZED_THINGS = ("box", "box of chocolates", "chocolate", "chest", "container", "suitcase")


def task_18(rng, story, people=None, n_questions=None, **_):
    """Size reasoning, as in Facebook's generator: size facts, then every two-step question.

    The chocolate is the smallest thing and the box of chocolates the next; the four containers
    are bigger, in a random order per story. A story tells a chain of two facts and 2-7 more
    (each keeping a pair whose shortest chain of facts is two long), shuffled, then asks about
    every pair whose shortest chain is exactly two facts (``n_questions`` is not used), in a
    random order and form, yes and no equally often.
    """
    containers = [SIZED_THINGS[i] for i in (0, 3, 4, 5)]
    order = [containers[i] for i in rng.permutation(4)] + ["box of chocolates", "chocolate"]
    facts = {}  # (small, big) -> None until told; largest first in `order`
    chain = sorted(rng.permutation(len(order))[:3])
    for i, j in zip(chain[:-1], chain[1:], strict=True):
        facts[order[j], order[i]] = None
    for _ in range(2 + rng.randint(6)):
        for _ in range(100):
            i, j = sorted(rng.permutation(len(order))[:2])
            pair = (order[j], order[i])
            if pair in facts:
                continue
            facts[pair] = None
            if _two_step_pairs(facts, order):
                break
            del facts[pair]
    told = list(facts)
    for k in rng.permutation(len(told)):
        small, big = told[k]
        if rng.rand() < 0.5:
            facts[small, big] = story.say(f"The {small} fits inside the {big}.")
        else:
            facts[small, big] = story.say(f"The {big} is bigger than the {small}.")
    pairs = _two_step_pairs(facts, order)
    for k in rng.permutation(len(pairs)):
        small, big = pairs[k]
        support = _chain(facts, small, big)
        form = rng.randint(4)
        if form == 0:
            story.ask(f"Is the {big} bigger than the {small}?", "yes", support)
        elif form == 1:
            story.ask(f"Does the {big} fit in the {small}?", "no", support)
        elif form == 2:
            story.ask(f"Is the {small} bigger than the {big}?", "no", support)
        else:
            story.ask(f"Does the {small} fit in the {big}?", "yes", support)


def _two_step_pairs(facts, order):
    """The (small, big) pairs whose shortest chain of ``facts`` is exactly two facts long."""
    return [(small, big) for i, big in enumerate(order) for small in order[i + 1:]
            if len(_chain(facts, small, big)) == 2]


def _chain(smaller, small, big):
    """The lines of a shortest chain of told facts ``small < ... < big``, or [] if none."""
    frontier, came_from = [small], {small: None}
    while frontier:
        thing = frontier.pop(0)
        if thing == big:
            lines = []
            while came_from[thing] is not None:
                thing, line = came_from[thing]
                lines.append(line)
            return lines[::-1]
        for (a, b), line in smaller.items():
            if a == thing and b not in came_from:
                came_from[b] = (a, line)
                frontier.append(b)
    return []


_STEPS = {"north": (0, 1), "south": (0, -1), "east": (1, 0), "west": (-1, 0)}


def task_19(rng, story, people=None, **_):
    """Path finding: 5 facts place the six rooms on a grid (a tree); a two-step route.

    The answer is the directions' first letters, comma-joined (``n,w``): from the start to the
    room between, then on to the goal.
    """
    rooms = [LOCATIONS[i] for i in rng.permutation(len(LOCATIONS))]
    cell = {rooms[0]: (0, 0)}
    links = {}  # (room, neighbour) -> direction from room to neighbour, both ways
    edges = []
    for room in rooms[1:]:
        options = [(placed, d) for placed in cell for d, (dx, dy) in _STEPS.items()
                   if (cell[placed][0] + dx, cell[placed][1] + dy) not in cell.values()]
        placed, d = options[rng.randint(len(options))]
        cell[room] = (cell[placed][0] + _STEPS[d][0], cell[placed][1] + _STEPS[d][1])
        links[placed, room], links[room, placed] = d, _DIRECTIONS[d]
        edges.append((placed, room))
    line_of = {}
    for i in rng.permutation(len(edges)):
        placed, room = edges[i]
        if rng.rand() < 0.5:  # "The room is <d> of the placed."
            line = story.say(f"The {room} is {links[placed, room]} of the {placed}.")
        else:
            line = story.say(f"The {placed} is {links[room, placed]} of the {room}.")
        line_of[placed, room] = line_of[room, placed] = line
    routes = [(a, b, c) for (a, b) in links for (b2, c) in links if b2 == b and c != a]
    start, middle, goal = routes[rng.randint(len(routes))]
    story.ask(f"How do you go from the {start} to the {goal}?",
              f"{links[start, middle][0]},{links[middle, goal][0]}",
              [line_of[start, middle], line_of[middle, goal]])


# Task 20's people and their motivations -> (place, object) (Weston et al. 2015's released data).
MOTIVATED_PEOPLE = ("Jason", "Antoine", "Sumit", "Yann")
MOTIVATIONS = {"hungry": ("kitchen", "apple"), "thirsty": ("kitchen", "milk"),
               "tired": ("bedroom", "pajamas"), "bored": ("garden", "football")}


def task_20(rng, story, people=None, **_):
    """Agent's motivations, as in Facebook's generator (Motivations): ``X is hungry.`` then where
    X will go and why X went or got something.

    The four people have the four motivations (a random assignment). Each statement is the next
    of the three steps (motivation, going, getting) of a random person with steps left, so all
    four people's steps interleave; each is followed by its question. The names in questions are
    lower-case, as in the released data.
    """
    names = list(MOTIVATED_PEOPLE)
    kinds = list(MOTIVATIONS)
    motive = {name: kinds[i] for name, i in zip(names, rng.permutation(4), strict=True)}
    step = dict.fromkeys(names, 0)
    reason_line = {}
    while any(s < 3 for s in step.values()):
        waiting = [n for n in names if step[n] < 3]
        name = waiting[rng.randint(len(waiting))]
        place, thing = MOTIVATIONS[motive[name]]
        lower = name.lower()
        if step[name] == 0:
            reason_line[name] = story.say(f"{name} is {motive[name]}.")
            story.ask(f"Where will {lower} go?", place, [reason_line[name]])
        elif step[name] == 1:
            verb = MOVE_VERBS[rng.randint(len(MOVE_VERBS))]
            story.say(f"{name} {verb} to the {place}.")
            story.ask(f"Why did {lower} go to the {place}?", motive[name], [reason_line[name]])
        else:
            verb = PICK_VERBS[rng.randint(len(PICK_VERBS))]
            story.say(f"{name} {verb} the {thing} there.")
            story.ask(f"Why did {lower} get the {thing}?", motive[name], [reason_line[name]])
        step[name] += 1
