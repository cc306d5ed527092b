"""The task registry of the bAbI generator: one story generator per task, and the tasks' names.

The generators follow the public task descriptions (Weston et al. 2015, "Towards AI-complete
question answering", Table 1 and the released v1.2 data): `world_tasks` holds the tasks about
people in a house (1-3, 5-13), `reasoning_tasks` those with small worlds of their own (4, 14-20).
"""

from . import reasoning_tasks, world_tasks

TASK_GENERATORS = {
    1: world_tasks.task_1, 2: world_tasks.task_2, 3: world_tasks.task_3,
    4: reasoning_tasks.task_4, 5: world_tasks.task_5, 6: world_tasks.task_6,
    7: world_tasks.task_7, 8: world_tasks.task_8, 9: world_tasks.task_9,
    10: world_tasks.task_10, 11: world_tasks.task_11, 12: world_tasks.task_12,
    13: world_tasks.task_13, 14: reasoning_tasks.task_14, 15: reasoning_tasks.task_15,
    16: reasoning_tasks.task_16, 17: reasoning_tasks.task_17, 18: reasoning_tasks.task_18,
    19: reasoning_tasks.task_19, 20: reasoning_tasks.task_20,
}
GENERATED_TASKS = tuple(sorted(TASK_GENERATORS))

# The names in the released v1.2 files: qa{N}_{name}_{split}.txt in en/ and en-10k/.
TASK_NAMES = {
    1: "single-supporting-fact", 2: "two-supporting-facts", 3: "three-supporting-facts",
    4: "two-arg-relations", 5: "three-arg-relations", 6: "yes-no-questions", 7: "counting",
    8: "lists-sets", 9: "simple-negation", 10: "indefinite-knowledge", 11: "basic-coreference",
    12: "conjunction", 13: "compound-coreference", 14: "time-reasoning", 15: "basic-deduction",
    16: "basic-induction", 17: "positional-reasoning", 18: "size-reasoning", 19: "path-finding",
    20: "agents-motivations",
}
