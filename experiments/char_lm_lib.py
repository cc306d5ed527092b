"""A causal character-level language model on generated bAbI stories: 2-simplicial vs dot-product.

``train_eval`` builds ``keras_relational.models.char_lm.char_lm`` once with each attention
(``SequenceSimplicialAttention``, Roy et al. 2025, and ``keras.layers.MultiHeadAttention``) at
the same parameter count, trains both with ``model.fit`` on the same characters and reports
each one's validation bits per character. The corpus is generated, never downloaded: stories of
the package's bAbI generator (``keras_relational.environments.babi``), one statement or
question a line, with each question's answer after it (``Where is Mary? bathroom``), stories
separated by blank lines. The answers are the characters a model can only predict by relating
earlier statements to the question.

Re-running resumes: ``root_dir/backup`` keeps each finished attention's result and the
unfinished one's last epoch (``safe_backup``); a finished run re-run with the same settings
(``results.json`` records them) is not trained again.
"""

import math
import os
import shutil
import time

import keras
import numpy as np

from keras_relational import json_files, run_settings, validation
from keras_relational.environments import babi
from keras_relational.experiments import safe_backup
from keras_relational.models import char_lm, precision

DEFAULT_TASKS = (1, 2)  # Weston et al. 2015: single and two supporting facts


def babi_corpus(tasks=DEFAULT_TASKS, num_questions=1000, seed=0):
    """Generated bAbI stories as plain text (``num_questions`` questions per task)."""
    lines = []
    for task in tasks:
        text = babi.generate_task_text(task, num_questions, seed)
        for line in text.splitlines():
            number, sentence = line.split(" ", 1)
            if number == "1" and lines:
                lines.append("")  # a new story
            if "\t" in sentence:  # "question? \tanswer\tsupporting facts"
                question, answer = sentence.split("\t")[:2]
                sentence = f"{question.strip()} {answer}"
            lines.append(sentence)
        lines.append("")
    return "\n".join(lines)


def encode(text, characters):
    """``text`` as ids into ``characters`` (a string of the vocabulary), int32."""
    index = {c: i for i, c in enumerate(characters)}
    return np.array([index[c] for c in text], np.int32)


def sequences(ids, sequence_length):
    """Non-overlapping ``(inputs, targets)`` of ``[S, L]``: targets are inputs shifted by one."""
    count = (len(ids) - 1) // sequence_length
    inputs = ids[:count * sequence_length].reshape(count, sequence_length)
    targets = ids[1:count * sequence_length + 1].reshape(count, sequence_length)
    return inputs, targets


@run_settings.resumable(optimizer=("learning_rate",), free=("epochs", "jit_compile", "verbose"))
def train_eval(root_dir, attentions=char_lm.ATTENTIONS, tasks=DEFAULT_TASKS,
               train_questions=1000, valid_questions=200, sequence_length=128, width=64,
               num_layers=2, num_heads=4, key_dim=16, num_key_value_heads=2, window=(32, 8),
               query_chunk_size=None, epochs=3, batch_size=32, learning_rate=3e-3, seed=0,
               jit_compile=True, verbose=0, dtype_policy=validation.DEFAULT_DTYPE_POLICY):
    """Trains one ``char_lm`` per attention with ``model.fit`` and evaluates bits per character.

    The training text is ``train_questions`` questions per task of stories generated with
    ``seed``, the validation text ``valid_questions`` per task with ``seed + 1``; both models
    see the same batches in the same order (Adam, ``learning_rate``, ``epochs`` passes).
    Writes ``root_dir/results.json`` and ``root_dir/results.md``; an interrupted call resumes
    with the same arguments (``seconds`` then counts the last process only). The models are
    built under the Keras ``dtype_policy`` (``"float32"``, ``"mixed_bfloat16"`` or
    ``"mixed_float16"``, the last with loss scaling by ``compile``), recorded in the results.

    Returns:
        dict: per attention ``parameters``, ``train_bpc`` (last epoch), ``valid_bpc`` and
        ``seconds``; and the corpus sizes under ``"data"``.
    """
    owner = "char_lm_lib.train_eval"
    for attention in attentions:
        validation.check_choice(owner, "attentions", attention, char_lm.ATTENTIONS)
    validation.check_positive_int(owner, "epochs", epochs)
    validation.check_positive_int(owner, "batch_size", batch_size)
    validation.check_dtype_policy(owner, dtype_policy)
    settings = dict(
        tasks=tasks, train_questions=train_questions, valid_questions=valid_questions,
        sequence_length=sequence_length, width=width, num_layers=num_layers,
        num_heads=num_heads, key_dim=key_dim, num_key_value_heads=num_key_value_heads,
        window=window, query_chunk_size=query_chunk_size, epochs=epochs, batch_size=batch_size,
        learning_rate=learning_rate, seed=seed, dtype_policy=dtype_policy)
    results_path = os.path.join(root_dir, "results.json")
    backup_dir = os.path.join(root_dir, "backup")
    finished_settings = dict(settings, attentions=list(attentions))  # what results.json records
    finished = None if os.path.exists(backup_dir) else safe_backup.read_finished(
        results_path, finished_settings)
    if finished is not None:
        print(f"{root_dir} finished earlier with these settings ({results_path}): not trained "
              f"again")
        del finished["settings"]
        return finished
    train_text = babi_corpus(tasks, train_questions, seed)
    valid_text = babi_corpus(tasks, valid_questions, validation.offset_seed("seed", seed, 1))
    characters = "".join(sorted(set(train_text) | set(valid_text)))
    train = sequences(encode(train_text, characters), sequence_length)
    valid = sequences(encode(valid_text, characters), sequence_length)
    results = {"data": {"tasks": list(tasks), "train_characters": int(train[0].size),
                        "valid_characters": int(valid[0].size),
                        "vocabulary_size": len(characters)}, "dtype_policy": dtype_policy}
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    state = safe_backup.RunState(backup_dir, settings)
    for attention in attentions:
        if state.get(attention) is not None:  # finished before an interruption
            results[attention] = state.get(attention)
            continue
        keras.utils.set_random_seed(seed)
        with precision.dtype_policy_scope(dtype_policy):
            model = char_lm.char_lm(len(characters), sequence_length, attention=attention,
                                    width=width, num_layers=num_layers, num_heads=num_heads,
                                    key_dim=key_dim, num_key_value_heads=num_key_value_heads,
                                    window=window, query_chunk_size=query_chunk_size)
        model.compile(optimizer=keras.optimizers.Adam(learning_rate), loss=loss,
                      jit_compile=jit_compile)
        start = time.time()
        backup = safe_backup.SafeBackupAndRestore(os.path.join(backup_dir, attention),
                                                  delete_checkpoint=False)
        history = model.fit(*train, batch_size=batch_size, epochs=epochs, shuffle=True,
                            verbose=verbose, callbacks=[backup])
        # A run resumed after its last epoch trains none: that epoch's loss is in the backup.
        train_loss = (history.history["loss"][-1] if history.history.get("loss")
                      else backup.restored_logs.get("loss", math.nan))
        valid_loss = model.evaluate(*valid, batch_size=batch_size, verbose=0)
        results[attention] = {
            "parameters": int(model.count_params()),
            "train_bpc": float(train_loss) / math.log(2),
            "valid_bpc": float(valid_loss) / math.log(2),
            "seconds": time.time() - start,
        }
        state.set(attention, results[attention])
        shutil.rmtree(backup.backup_dir)
    os.makedirs(root_dir, exist_ok=True)
    # NaN as null; a re-run with the same settings re-uses the file.
    json_files.write_json(results_path, dict(results, settings=finished_settings))
    json_files.write_text(os.path.join(root_dir, "results.md"), results_table(results))
    state.clear()
    return results


def results_table(results):
    """The bits-per-character table of ``train_eval``'s results, as markdown."""
    rows = ["| attention | parameters | train bits/char (last epoch) | validation bits/char "
            "| seconds |", "|---|---|---|---|---|"]
    for attention in char_lm.ATTENTIONS:
        if attention in results:
            r = results[attention]
            rows.append(f"| {attention} | {r['parameters']:,} | {r['train_bpc']:.3f} | "
                        f"{r['valid_bpc']:.3f} | {r['seconds']:.0f} |")
    return "\n".join(rows) + "\n"

