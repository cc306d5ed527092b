"""The bAbI tasks with small worlds of their own (Weston et al. 2015): 4 and 14-20.

Two-argument relations between places (4), time (14), deduction (15), induction (16), positions
(17), sizes (18), paths (19) and motivations (20). Each ``task_N(rng, story, people, **options)``
appends the lines of one story to a `Story` (``people`` is unused: these tasks have their own
names). It is not the Facebook generator, so phrasing frequencies differ a little.
"""

from .world import LOCATIONS, MOVE_VERBS, PICK_VERBS

_DIRECTIONS = {"north": "south", "south": "north", "east": "west", "west": "east"}


def task_4(rng, story, people=None, **_):
    l1, l2, l3 = (LOCATIONS[i] for i in rng.permutation(len(LOCATIONS))[:3])
    d1, d2 = (list(_DIRECTIONS)[i] for i in rng.randint(4, size=2))
    facts = [(l1, d1, l2), (l3, d2, l1)] if rng.rand() < 0.5 else [(l1, d1, l2), (l2, d2, l3)]
    lines = [story.say(f"The {a} is {d} of the {b}.") for a, d, b in facts]
    k = rng.randint(2)
    a, d, b = facts[k]
    if rng.rand() < 0.5:
        story.ask(f"What is {d} of the {b}?", a, [lines[k]])
    else:
        story.ask(f"What is the {a} {d} of?", b, [lines[k]])


_SPECIES = {"mice": "mouse", "sheep": "sheep", "wolves": "wolf", "cats": "cat"}
_DEDUCTION_NAMES = ("Gertrude", "Winona", "Jessica", "Emily")


def task_15(rng, story, people=None, **_):
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


def task_16(rng, story, people=None, **_):
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


# Task 14's people, places and times (Weston et al. 2015's released data), in time order.
TIME_PEOPLE = ("Bill", "Fred", "Julie", "Mary")
TIME_PLACES = ("bedroom", "cinema", "kitchen", "office", "park", "school")
TIMES = ("yesterday", "this morning", "this afternoon", "this evening")


def task_14(rng, story, people=None, n_questions=5, **_):
    """Time reasoning: events told out of order; ``Where was X before the L?``.

    Each person visits distinct places at the first 2-4 times of :data:`TIMES` (no gaps), so
    "before the L" names the place at the time just before L's, which a question needs told.
    """
    events = []  # (person, time index, place)
    for person in TIME_PEOPLE:
        visits = 2 + rng.randint(3)
        for t, i in enumerate(rng.permutation(len(TIME_PLACES))[:visits]):
            events.append((person, t, TIME_PLACES[i]))
    told, asked, since_question = {}, set(), 0
    for index in rng.permutation(len(events)):
        person, t, place = events[index]
        verb = MOVE_VERBS[rng.randint(len(MOVE_VERBS))]
        if rng.rand() < 0.5:
            told[person, t] = (place, story.say(f"{TIMES[t].capitalize()} {person} {verb} to "
                                                f"the {place}."))
        else:
            told[person, t] = (place, story.say(f"{person} {verb} to the {place} {TIMES[t]}."))
        since_question += 1
        ready = [key for key in told if key[1] > 0 and (key[0], key[1] - 1) in told]
        fresh = [key for key in ready if key not in asked]
        last = len(told) == len(events)
        if fresh and (since_question >= 2 or last) or last and ready:
            person, t = (fresh or ready)[rng.randint(len(fresh or ready))]
            asked.add((person, t))
            (place, line), (before, before_line) = told[person, t], told[person, t - 1]
            story.ask(f"Where was {person} before the {place}?", before, [line, before_line])
            since_question = 0
            if len(asked) == n_questions:
                return


# Task 17's shapes (Weston et al. 2015's released data) and the grid offset of each relation.
SHAPES = ("triangle", "red square", "blue square", "red sphere", "pink rectangle",
          "yellow square")
_OFFSETS = {"above": (0, 1), "below": (0, -1), "to the left of": (-1, 0),
            "to the right of": (1, 0)}


def _holds(relation, a, b):
    """Whether position ``a`` is ``relation`` position ``b`` (left of = smaller x, any y)."""
    (ax, ay), (bx, by) = a, b
    return {"above": ay > by, "below": ay < by, "to the left of": ax < bx,
            "to the right of": ax > bx}[relation]


def task_17(rng, story, people=None, n_questions=8, **_):
    """Positional reasoning: two relations, questions about the pair they link (yes / no)."""
    a, b, c = (SHAPES[i] for i in rng.permutation(len(SHAPES))[:3])
    relations = list(_OFFSETS)
    first = relations[rng.randint(4)]
    second = [r for r in relations if r != _opposite(first)][rng.randint(3)]
    position = {b: (0, 0)}
    position[a] = tuple(p + d for p, d in zip(position[b], _OFFSETS[first], strict=True))
    position[c] = tuple(p + d for p, d in zip(position[a], _OFFSETS[second], strict=True))
    line_of = {b: story.say(f"The {a} is {first} the {b}."),
               c: story.say(f"The {c} is {second} the {a}.")}
    asked = set()
    for _ in range(n_questions):
        answer = ("yes", "no")[rng.randint(2)]
        options = [(x, r, y) for x, y in ((c, b), (b, c)) for r in relations
                   if _holds(r, position[x], position[y]) == (answer == "yes")]
        options = [o for o in options if o not in asked] or options  # prefer new questions
        x, r, y = options[rng.randint(len(options))]
        asked.add((x, r, y))
        story.ask(f"Is the {x} {r} the {y}?", answer, [line_of[x], line_of[y]])


def _opposite(relation):
    return {"above": "below", "below": "above", "to the left of": "to the right of",
            "to the right of": "to the left of"}[relation]


# Task 18's things (Weston et al. 2015's released data).
SIZED_THINGS = ("box", "box of chocolates", "chocolate", "chest", "container", "suitcase")


def task_18(rng, story, people=None, n_questions=5, **_):
    """Size reasoning: ``fits inside`` / ``is bigger than`` facts; entailed questions (yes / no).

    Sizes are a random order of :data:`SIZED_THINGS` per story (so only the facts tell them; the
    task definition fixes no order); a question asks only about a pair whose order follows from
    the facts told, preferring chains of two or more facts.
    """
    size = {thing: rank for rank, thing in zip(rng.permutation(6), SIZED_THINGS, strict=True)}
    smaller = {}  # (small, big) -> line, the facts told
    pairs = [(x, y) for x in SIZED_THINGS for y in SIZED_THINGS if size[x] < size[y]]
    while story.questions < n_questions:
        for _ in range(5 if not smaller else 1 + rng.randint(2)):
            untold = [pair for pair in pairs if pair not in smaller] or pairs
            small, big = untold[rng.randint(len(untold))]
            if rng.rand() < 0.5:
                smaller[small, big] = story.say(f"The {small} fits inside the {big}.")
            else:
                smaller[small, big] = story.say(f"The {big} is bigger than the {small}.")
        chains = {pair: _chain(smaller, *pair) for pair in pairs}
        known = [pair for pair, chain in chains.items() if chain]
        long = [pair for pair in known if len(chains[pair]) > 1]
        for _ in range(2):
            pool = long if long and rng.rand() < 0.8 else known
            small, big = pool[rng.randint(len(pool))]
            support = chains[small, big]
            x, y = (small, big) if rng.rand() < 0.5 else (big, small)
            if rng.rand() < 0.5:
                story.ask(f"Does the {x} fit in the {y}?", "yes" if x == small else "no",
                          support)
            else:
                story.ask(f"Is the {x} bigger than the {y}?", "yes" if x == big else "no",
                          support)


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
    """Agent's motivations: ``X is hungry.`` then where X will go and why X went or got something.

    Each person's three steps (motivation, going, getting) are told in order, interleaved with the
    others', each followed by its question; the names in questions are lower-case, as in the
    released data.
    """
    names = [MOTIVATED_PEOPLE[i] for i in rng.permutation(4)]
    kinds = list(MOTIVATIONS)
    motive = {name: kinds[rng.randint(4)] for name in names}
    step = dict.fromkeys(names, 0)
    reason_line = {}
    while any(s < 3 for s in step.values()):
        waiting = [n for n in names if step[n] < 3][:2]  # at most two stories interleave
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
