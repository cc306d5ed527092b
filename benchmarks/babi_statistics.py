r"""Statistics of the generated bAbI data, all 20 tasks, to compare with the released data set.

    python benchmarks/babi_statistics.py --questions=1000 --seed=0

For each task, over ``--questions`` generated training questions (the ``train`` split of
``write_task_files`` with ``--seed``): the question kinds (the question with its entity words
replaced by ``_``), the number of supporting facts per question, the story length in statements
(per story, and before each question, untruncated), the answer distribution and the vocabulary
size (PAD included); next to them what the task definitions (Weston et al. 2015) state about
the released files. The released files are not in this repository, so that column is quoted, not
measured. Writes ``benchmarks/results/babi_statistics.md`` and ``.json``.
"""

import collections
import os
import statistics

import results_io  # benchmarks/results_io.py, beside this script
from absl import app, flags

from keras_relational.environments import babi

FLAGS = flags.FLAGS
flags.DEFINE_integer("questions", 1000, "Generated questions per task.", lower_bound=1)
flags.DEFINE_integer("seed", 0, "Generator seed (that of the train split is derived from it).")
flags.DEFINE_string("output", "benchmarks/results/babi_statistics.md",
                    "Markdown results file; the JSON goes beside it.")

# What the task definitions say about the released v1.2 files (Weston et al. 2015, Table 1 and
# the released data's format): general knowledge, not measured here.
STATED = {
    1: "1 supporting fact; 2 statements per question, 5 questions per story",
    2: "2 supporting facts",
    3: "3 supporting facts; stories often longer than 70 statements",
    4: "2 statements, 1 question",
    5: "who gave / received what; answers are names or objects",
    6: "answers yes / no",
    7: "answers none / one / two / three",
    8: "answers `nothing` or a comma-joined list",
    9: "answers yes / no",
    10: "answers yes / no / maybe",
    11: "answers a place",
    12: "answers a place",
    13: "answers a place",
    14: "times yesterday, this morning, this afternoon, this evening; answers a place",
    15: "8 statements: 4 `are afraid of`, 4 `is a`",
    16: "9 statements",
    17: "2 statements; answers yes / no",
    18: "answers yes / no",
    19: "5 statements, 1 question; answers two comma-joined letters (`n,w`)",
    20: "answers a place or a motivation",
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
    examples = babi.parse_babi(text, task=task, max_sentences=10**9)  # untruncated stories
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
        "name": babi.TASK_NAMES[task],
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
        "vocabulary_size": len(babi.Vocabulary.from_examples(examples)),
        "stated_for_released_data": STATED[task],
    }


def markdown(results, joint_vocabulary, num_questions, seed):
    """The three tables of the results file."""
    lines = [
        f"{num_questions} generated training questions per task (seed {seed}). \"Stated\" quotes "
        f"the task definitions (Weston et al. 2015) for the released files, which this "
        f"repository does not ship; it is not measured. For every task they state: "
        f"{STATED_EVERY_TASK}. Joint vocabulary of the 20 generated tasks: "
        f"{joint_vocabulary} (PAD included).",
        "",
        "| Task | Name | Stories | Statements per story (mean / max) | Statements before a "
        "question (mean / max) | Supporting facts (% of questions) | Distinct answers | "
        "Top answer (%) | Vocabulary | Stated for the released data |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        story, before = r["statements_per_story"], r["statements_before_question"]
        facts = ", ".join(f"{k}: {v:g}" for k, v in sorted(r["supporting_facts_percent"].items()))
        top, share = next(iter(r["answers_percent"].items()))
        lines.append(
            f"| {r['task']} | {r['name']} | {r['stories']} | {story['mean']:.1f} / "
            f"{story['max']} | {before['mean']:.1f} / {before['max']} | {facts} | "
            f"{r['distinct_answers']} | `{top}` {share:g} | {r['vocabulary_size']} | "
            f"{r['stated_for_released_data']} |")
    lines += ["", "Question kinds (entities replaced by `_`), % of each task's questions:", "",
              "| Task | Question kinds |", "|---|---|"]
    for r in results:
        kinds = "; ".join(f"`{k}` {v:g}" for k, v in r["question_kinds_percent"].items())
        lines.append(f"| {r['task']} | {kinds} |")
    lines += ["", "Answer distribution (the 8 most frequent answers, % of each task's "
              "questions):", "", "| Task | Answers |", "|---|---|"]
    for r in results:
        top = list(r["answers_percent"].items())[:8]
        lines.append(f"| {r['task']} | " + "; ".join(f"`{k}` {v:g}" for k, v in top) + " |")
    return "\n".join(lines)


def main(argv):
    del argv
    texts = {task: babi.generate_task_text(task, FLAGS.questions,
                                           babi.split_seed(FLAGS.seed, task, "train"))
             for task in babi.GENERATED_TASKS}
    results = [task_statistics(task, text) for task, text in texts.items()]
    joint = babi.Vocabulary.from_examples(
        [ex for task, text in texts.items() for ex in babi.parse_babi(text, task=task)])
    body = markdown(results, len(joint), FLAGS.questions, FLAGS.seed)
    print(body)
    results_io.write_markdown(FLAGS.output, body)
    results_io.write_json(os.path.splitext(FLAGS.output)[0] + ".json",
                          {"questions_per_task": FLAGS.questions, "seed": FLAGS.seed,
                           "joint_vocabulary_size": len(joint),
                           "stated_for_every_task": STATED_EVERY_TASK, "tasks": results})


if __name__ == "__main__":
    app.run(main)
