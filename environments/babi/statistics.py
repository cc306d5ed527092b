"""Statistics of bAbI text (generated or released): question kinds, story lengths, answers.

``task_statistics(task, text)`` summarises one task's text the way
``benchmarks/babi_statistics.py`` reports it for all 20 generated tasks, so a reader can compare
the generated data with the released data set (Weston et al. 2015).
"""

import collections
import statistics

from .reader import parse_babi
from .tasks import TASK_NAMES
from .vocabulary import Vocabulary

# What the task definitions say about the released v1.2 files (Weston et al. 2015, Table 1 and
# the released data's format): general knowledge, not measured here.
STATED = {
    1: "1 supporting fact; 2 statements per question, 5 questions per story",
    2: "2 supporting facts (the pick-up and the holder's move: only held objects are asked "
       "about, as in Facebook's generator); at least 3 statements per question",
    3: "3 supporting facts (the pick-up and two moves of the carrier); long stories: the first "
       "question after dozens of statements, often more than 70 before a question (the "
       "authors' code keeps the last 130)",
    4: "2 statements, 1 question; three places in a line (Facebook's IsDir)",
    5: "who gave / received what; answers are names or objects; at least 3 statements per "
       "question",
    6: "answers yes / no, half each; 2 moves per question, 5 questions per story",
    7: "answers none / one / two / three, `one` the most frequent, three rare (Facebook's "
       "generator); a question after every 2 statements; supporting facts: the person's "
       "pick-ups, drops and gives",
    8: "answers `nothing`, one object or a comma-joined list; supporting facts as in 7",
    9: "answers yes / no (3/8 yes in Facebook's generator); 2 statements per question, 5 "
       "questions per story",
    10: "answers yes / no / maybe, mostly no (a random place of six is asked about)",
    11: "answers a place",
    12: "answers a place",
    13: "answers a place",
    14: "times yesterday, this morning, this afternoon, this evening; answers a place; 12 "
        "statements, 5 questions",
    15: "8 statements: 4 `are afraid of`, 4 `is a` (four different species); each of the "
        "four people asked once",
    16: "9 statements; supporting facts: the asked person's species and the species and "
        "colour of everyone of it (Facebook's generator)",
    17: "2 statements; answers yes / no",
    18: "answers yes / no; 2 supporting facts; all questions after the statements",
    19: "5 statements, 1 question; answers two comma-joined letters (`n,w`)",
    20: "answers a place or a motivation; the four people have the four motivations",
}
STATED_EVERY_TASK = ("9,000 / 1,000 / 1,000 questions per task (train / valid / test of "
                     "en-valid-10k); a joint vocabulary of roughly 150-250 words")

# The words that make up the questions' phrasing; every other word is an entity (`_`).
FUNCTION_WORDS = frozenset(
    "where is was the before what who did give to gave received how many objects carrying in "
    "afraid of color will go why get does fit bigger than left right above below do you from "
    "?".split())


def question_kind(query):
    """``("where", "is", "mary", "?") -> "where is _ ?"``: the entities replaced by ``_``."""
    words = " ".join(query).replace("box of chocolates", "box_of_chocolates").split()
    kind = []
    for word in words:
        if word in FUNCTION_WORDS:
            kind.append(word)
        elif not kind or kind[-1] != "_":
            kind.append("_")
    return " ".join(kind)


def _shares(counter, total, limit=None):
    return {str(key): round(100.0 * n / total, 1) for key, n in counter.most_common(limit)}


def task_statistics(task, text):
    """The statistics of the bAbI ``text`` of ``task`` (generated or released)."""
    examples = parse_babi(text, task=task, max_sentences=10**9)  # untruncated stories
    per_story, statements = [], 0
    for line in text.splitlines():
        if line.startswith("1 ") and statements:
            per_story.append(statements)
            statements = 0
        statements += "\t" not in line
    per_story.append(statements)
    before = [len(ex.story) for ex in examples]
    answers = collections.Counter(ex.answer for ex in examples)
    return {
        "task": task,
        "name": TASK_NAMES[task],
        "questions": len(examples),
        "stories": len(per_story),
        "statements_per_story": {"mean": statistics.fmean(per_story), "max": max(per_story)},
        "statements_before_question": {"mean": statistics.fmean(before), "max": max(before),
                                       "over_70": sum(n > 70 for n in before)},
        "question_kinds_percent": _shares(
            collections.Counter(question_kind(ex.query) for ex in examples), len(examples)),
        "supporting_facts_percent": _shares(
            collections.Counter(len(ex.supporting) for ex in examples), len(examples)),
        "distinct_answers": len(answers),
        "answers_percent": _shares(answers, len(examples)),
        "vocabulary_size": len(Vocabulary.from_examples(examples)),
        "stated_for_released_data": STATED[task],
    }
