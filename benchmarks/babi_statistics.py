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

import os

import results_io  # benchmarks/results_io.py, beside this script
from absl import app, flags

from keras_relational.environments import babi
from keras_relational.environments.babi.statistics import STATED_EVERY_TASK, task_statistics

FLAGS = flags.FLAGS
flags.DEFINE_integer("questions", 1000, "Generated questions per task.", lower_bound=1)
flags.DEFINE_integer("seed", 0, "Generator seed (that of the train split is derived from it).")
flags.DEFINE_string("output", "benchmarks/results/babi_statistics.md",
                    "Markdown results file; the JSON goes beside it.")

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
