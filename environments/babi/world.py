"""The simulated world of the bAbI generator: people, places, objects and the story being told.

The vocabulary follows the public bAbI data (Weston et al. 2015): the people of tasks 1-3, 6-9,
11-13, six locations, three objects and the verbs of moving, picking up, dropping and giving.
"""

PERSONS = ("Mary", "John", "Sandra", "Daniel")
LOCATIONS = ("bathroom", "bedroom", "garden", "hallway", "kitchen", "office")
OBJECTS = ("apple", "football", "milk")
MOVE_VERBS = ("moved", "went", "journeyed", "travelled", "went back")
PICK_VERBS = ("picked up", "got", "grabbed", "took")
DROP_VERBS = ("dropped", "discarded", "put down", "left")
GIVE_VERBS = ("gave", "handed", "passed")


class Story:
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


class World:
    """People with locations, objects with holders or places (tasks 3 and 11-13)."""

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

    def move(self, story, person, verb=None, location=None):
        old = self.location.get(person, (None, 0))[0]
        location = location or self.choice([loc for loc in LOCATIONS if loc != old])
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

    def random_action(self, story):
        """A move, pick-up or drop that is legal in the current state."""
        options = ["move"] * 3
        located = [p for p in self.people if p in self.location]
        pickable = [
            (p, o) for p in located for o in OBJECTS
            if o not in self.holder and (o not in self.place
                                         or self.place[o][0] == self.location[p][0])
        ]
        holders = [(p, o) for p in located for o in self.carrying[p]]
        if pickable:
            options.append("pick")
        if holders:
            options.append("drop")
        action = self.choice(options)
        if action == "move":
            self.move(story, self.choice(self.people))
        elif action == "pick":
            self.pick(story, *self.choice(pickable))
        else:
            self.drop(story, *self.choice(holders))
