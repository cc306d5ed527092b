"""bAbI question answering: a reader for the real v1.2 files and a procedural generator. NumPy only.

* **Reader** (`reader`: :func:`parse_babi`, :func:`read_file`, :func:`load_task`): the bAbI
  v1.2 text files that users download themselves; one example per question, stories truncated
  to the last 70 statements (130 for task 3), as in Schlag & Schmidhuber (2018)'s code; an
  empty, truncated or malformed file raises an error naming the file and line.
* **Tensors** (`vocabulary`: :class:`Vocabulary`, :func:`vectorize`): id 0 = PAD, the other
  tokens and answers sorted; ``story [N, S, W]``, ``story_len [N]``, ``query [N, W]``,
  ``answer [N]`` int32 arrays.
* **Generator** (`generator`: :func:`generate_story_lines`, :func:`generate_task_text`,
  :func:`write_task_files`): simulates a small world (`world`) and writes stories in exactly the
  file format above, one story generator per task (`tasks`), for all 20 tasks
  (:data:`GENERATED_TASKS`); :data:`TASK_NAMES` are the released files' names.
* **Statistics** (`statistics`: :func:`task_statistics`, :func:`question_kind`): question
  kinds, story lengths, supporting facts and answers of a task's text, generated or released.
* **Systematic split** (`systematic`: :func:`systematic_split`): the systematic-generalisation
  data of Schlag & Schmidhuber (2018, Sec. 7): five new names seen in training only with some
  tasks.

The generator follows the public task descriptions (Weston et al. 2015); it is not the Facebook
generator, so vocabulary and phrasing frequencies differ a little.
"""

from .files import write_text_atomically
from .generator import (
    generate_story_lines,
    generate_task,
    generate_task_text,
    split_seed,
    write_task_files,
)
from .reader import (
    Example,
    load_task,
    max_story_sentences,
    parse_babi,
    read_file,
    task_files,
    tokenize,
)
from .statistics import question_kind, task_statistics
from .systematic import NEW_NAMES, SYSTEMATIC_COVERAGE, SYSTEMATIC_TASKS, systematic_split
from .tasks import GENERATED_TASKS, TASK_NAMES
from .vocabulary import Vocabulary, dimensions, vectorize
from .world import DROP_VERBS, GIVE_VERBS, LOCATIONS, MOVE_VERBS, OBJECTS, PERSONS, PICK_VERBS

__all__ = [
    "DROP_VERBS", "GENERATED_TASKS", "GIVE_VERBS", "LOCATIONS", "MOVE_VERBS", "NEW_NAMES",
    "OBJECTS", "PERSONS", "PICK_VERBS", "SYSTEMATIC_COVERAGE", "SYSTEMATIC_TASKS", "TASK_NAMES",
    "Example", "Vocabulary", "dimensions", "generate_story_lines", "generate_task",
    "generate_task_text", "load_task", "max_story_sentences", "parse_babi", "question_kind",
    "read_file",
    "split_seed", "systematic_split", "task_files", "task_statistics", "tokenize", "vectorize",
    "write_task_files", "write_text_atomically",
]
