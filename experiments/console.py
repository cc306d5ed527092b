"""The binaries' console scripts print the same ``--help`` as ``python -m`` does.

absl's ``--help`` prints ``__main__``'s docstring and key flags. Under ``python -m
keras_relational.experiments.train_boxworld`` the binary is ``__main__``; under the installed
``train_boxworld`` console script ``__main__`` is a generated wrapper with neither, so each
binary's ``run()`` calls ``adopt_main_help(__name__)`` before ``absl.app.run(main)``.
"""

import sys

from absl import flags


def adopt_main_help(module_name):
    """Gives ``__main__`` the docstring and key flags of the binary ``module_name``.

    A no-op when the binary itself is ``__main__`` (``python -m``).
    """
    main_module = sys.modules["__main__"]
    binary = sys.modules[module_name]
    if binary is main_module:
        return
    main_module.__doc__ = binary.__doc__
    for flag in flags.FLAGS.get_key_flags_for_module(module_name):
        flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
