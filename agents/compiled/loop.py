"""The compiled actor-learner loop: environment steps, acting and learning in one function.

One call of :meth:`CompiledLoop.update` steps ``num_envs`` tensor BoxWorlds ``unroll_length``
times with actions sampled from the current policy (``keras.ops.scan``: ``jax.lax.scan`` under
JAX), then takes one V-trace gradient step on that unroll; the whole update is one
``jax.jit`` / ``tf.function(jit_compile=True)`` function of the loop state and the level bank
(the Podracer "Anakin" layout, Hessel et al. 2021, Sec. 3). Experience never leaves the device;
the host only receives a few scalars per update.

The loop state is a pytree (a dict of tensors): the model's trainable and non-trainable values,
the optimizer's variables, the environment state and its last time step, the sampling seed and
the running return of every episode. Consecutive unrolls overlap by one step, as TF-Agents'
``[B, T+1]`` trajectories: the bootstrap step of one update is the first step of the next.
"""

import collections

import keras

from keras_relational.agents.compiled import acting, backend
from keras_relational.agents.compiled.learning import LAST, LossInfo, Unroll, VTraceLearner

# dm_env.StepType.FIRST.
FIRST = 0

Metrics = collections.namedtuple("Metrics", [
    *LossInfo._fields, "episodes", "solved", "return_sum", "levels_started"])
Metrics.__doc__ = """Scalars of one update: the learner's ``LossInfo`` (loss terms, gradient
norms, value error, reward scale; :mod:`~keras_relational.agents.compiled.learning`), and over the
unroll's steps the episodes finished, those solved, the sum of their returns and the bank levels
started."""


# LossInfo fields that are sums over an unroll's transitions: summed over learner minibatches
# (and averaged over learner epochs, passes over the same transitions).
_SUMMED = ("loss", "policy_gradient_loss", "value_loss", "entropy", "reward_sum", "transitions")


def _copy(values):
    # Copies, so donating the loop state never frees a model variable's buffer.
    return [keras.ops.copy(v) for v in values]


class CompiledLoop:
    """Steps, acts and learns in one compiled function per update.

    Args:
        environment: a tensor BoxWorld (``keras_relational.environments.TensorBoxWorld`` or
            ``TensorBridgeBoxWorld``): pure ``reset(bank, num_envs)`` / ``step(state, actions,
            bank)``.
        model: the Keras 3 agent network (outputs ``(logits, value)``), built.
        optimizer: a Keras 3 optimizer.
        config: a :class:`~keras_relational.agents.compiled.config.CompiledConfig`.

    Example::

        loop = CompiledLoop(environment, model, optimizer, config)
        state = loop.initial_state(bank)
        state, metrics = loop.update(state, bank)   # metrics: Metrics of backend scalars
    """

    def __init__(self, environment, model, optimizer, config):
        backend.current_backend()
        self.environment = environment
        self.model = model
        self.optimizer = optimizer
        self.config = config
        optimizer.build(model.trainable_variables)
        self.seed_generator = keras.random.SeedGenerator(config.seed)
        self.learner = VTraceLearner(model, optimizer, config)
        self.data_parallel = backend.DataParallel(backend.local_devices(config.num_devices),
                                                  config.num_envs)
        devices = len(self.data_parallel.devices)
        if (config.num_envs // config.learner_minibatches) % devices:
            raise ValueError(
                f"The environments of a learner minibatch (num_envs / learner_minibatches = "
                f"{config.num_envs} / {config.learner_minibatches}) must split evenly across "
                f"the {devices} devices (--num_devices), received num_envs={config.num_envs}, "
                f"learner_minibatches={config.learner_minibatches}.")
        self._compiled_update = None  # set by `compile`
        self._bank = (None, None)  # the last bank and its copy on the devices
        self._update = backend.compile_function(
            self._update_fn if config.updates_per_call == 1 else self._updates_fn)
        self._collect = backend.compile_function(self._collect_fn)

    def initial_state(self, bank):
        """The loop state of a fresh run: the model's and optimizer's current values, bank
        levels ``0..num_envs-1`` started."""
        env_state, timestep = self.environment.reset(bank, self.config.num_envs)
        return self.data_parallel.place(dict(
            trainable=_copy(v.value for v in self.model.trainable_variables),
            non_trainable=_copy(v.value for v in self.model.non_trainable_variables),
            optimizer=_copy(v.value for v in self.optimizer.variables),
            env=env_state, timestep=timestep,
            seed=keras.ops.copy(self.seed_generator.state.value),
            episode_return=keras.ops.zeros((self.config.num_envs,), "float32")))

    def compile(self, state, bank):
        """Compiles the update for ``state`` and ``bank`` ahead of the first update (JAX):
        ``(state, seconds)``, the state placed on the devices with strong types (what the
        compiled update takes). Under TensorFlow ``(state, None)``: the first update compiles.
        """
        if backend.current_backend() != "jax":
            return state, None
        import time

        import jax

        state = self.data_parallel.place(
            jax.tree.map(lambda x: jax.lax.convert_element_type(x, x.dtype), state))
        start = time.perf_counter()
        self._compiled_update = self._update.lower(
            state, self.data_parallel.replicate(bank)).compile()
        return state, time.perf_counter() - start

    def update(self, state, bank):
        """One compiled call: ``(state, Metrics)``. Use the returned state only.

        With ``updates_per_call = K > 1`` the call runs K updates on ``bank`` and every field of
        the Metrics is ``[K]``, one row per update.
        """
        if bank is not self._bank[0]:  # a new bank: copied to every device once
            self._bank = (bank, self.data_parallel.replicate(bank))
        update = self._compiled_update or self._update
        return update(state, self._bank[1])

    def collect(self, state, bank):
        """The acting half alone (environment steps and sampling, no learning), compiled:
        ``(state, Metrics)`` with zero loss terms. For measuring where the time goes."""
        return self._collect(state, bank)

    def assign_to_model(self, state):
        """Writes the state's weights into the model and optimizer variables (for export,
        evaluation and ``model.save``)."""
        for name, variables in (("trainable", self.model.trainable_variables),
                                ("non_trainable", self.model.non_trainable_variables),
                                ("optimizer", self.optimizer.variables)):
            for variable, value in zip(variables, state[name], strict=True):
                variable.assign(keras.ops.copy(value))

    # The compiled functions.

    def _unroll(self, state, bank):
        """``unroll_length`` environment steps under the state's policy."""
        params = (state["trainable"], state["non_trainable"])
        seed_generator, environment = self.seed_generator, self.environment

        def env_step(carry, _):
            env_state, timestep, seed, episode_return = carry
            with backend.named_scope("acting"):
                actions, logits, seed = acting.act(self.model, params, timestep.observation,
                                                   seed_generator, seed)
            with backend.named_scope("environment"):
                env_state, following = environment.step(env_state, actions, bank)
            first = following.step_type == FIRST
            last = following.step_type == LAST
            episode_return = keras.ops.where(first, 0.0, episode_return + following.reward)
            outputs = (timestep.observation, timestep.step_type, actions, logits,
                       following.reward, following.discount,
                       keras.ops.cast(last, "float32"),
                       keras.ops.cast(last & env_state["solved"], "float32"),
                       keras.ops.where(last, episode_return, 0.0),
                       keras.ops.cast(first, "float32"))
            return (env_state, following, seed, episode_return), outputs

        carry = (state["env"], state["timestep"], state["seed"], state["episode_return"])
        carry, outputs = backend.scan(env_step, carry, self.config.unroll_length)
        env_state, timestep, seed, episode_return = carry
        (observations, step_types, actions, logits, rewards, discounts, last, solved,
         returns, first) = outputs
        unroll = Unroll(
            keras.ops.concatenate([observations, timestep.observation[None]], axis=0),
            keras.ops.concatenate([step_types, timestep.step_type[None]], axis=0),
            actions, logits, rewards, discounts)
        state = dict(state, env=env_state, timestep=timestep, seed=seed,
                     episode_return=episode_return)
        episodes = (keras.ops.sum(last), keras.ops.sum(solved), keras.ops.sum(returns),
                    keras.ops.sum(first))
        return state, unroll, episodes

    def learn(self, params, optimizer_variables, unroll):
        """The update's learning: ``(params, optimizer_variables, LossInfo)``.

        With ``learner_minibatches = K > 1`` K gradient steps, one after the other, each on the
        trajectories of every K-th environment (minibatch ``i``: environments ``i, i + K, ...``,
        so each spreads across the devices); with ``learner_epochs = E > 1`` those K steps E
        times over, the same minibatches in the same order. The LossInfo sums the minibatches'
        sums (averaged over the epochs), takes the largest reward and the smallest
        ``finite_parameters`` and averages the rest over every step.
        """
        minibatches, epochs = self.config.learner_minibatches, self.config.learner_epochs
        if minibatches == 1 and epochs == 1:
            return self.learner.update(params, optimizer_variables, unroll)

        def split(x):  # [T(+1), B, ...] -> [K, T(+1), B / K, ...]: every K-th environment
            x = keras.ops.reshape(x, (x.shape[0], x.shape[1] // minibatches, minibatches,
                                      *x.shape[2:]))
            return keras.ops.moveaxis(x, 2, 0)

        minibatched = tuple(split(x) for x in unroll)

        def step(carry, minibatch):
            params, optimizer_variables = carry
            params, optimizer_variables, info = self.learner.update(
                params, optimizer_variables, Unroll(*minibatch))
            return (params, optimizer_variables), tuple(info)

        def one_pass(carry, _):  # the K steps, one over each minibatch
            return backend.scan_over(step, carry, minibatched)

        if epochs == 1:
            (params, optimizer_variables), infos = one_pass((params, optimizer_variables), None)
        else:
            # E passes: a scan over the passes of the scan over the minibatches, so the unroll
            # stays in memory once (not E copies); the steps' scalars come stacked [E, K].
            (params, optimizer_variables), infos = backend.scan(
                one_pass, (params, optimizer_variables), epochs)
            infos = tuple(keras.ops.reshape(value, (-1,)) for value in infos)
        infos = LossInfo(*infos)
        combined = {name: (keras.ops.sum(value, axis=0) / epochs if name in _SUMMED else
                           keras.ops.max(value, axis=0) if name == "reward_max" else
                           keras.ops.min(value, axis=0) if name == "finite_parameters" else
                           keras.ops.mean(value, axis=0))
                    for name, value in infos._asdict().items()}
        return params, optimizer_variables, LossInfo(**combined)

    def _update_fn(self, state, bank):
        state, unroll, episodes = self._unroll(state, bank)
        with backend.named_scope("learning"):
            params, optimizer_variables, info = self.learn(
                (state["trainable"], state["non_trainable"]), state["optimizer"], unroll)
        state = dict(state, trainable=params[0], non_trainable=params[1],
                     optimizer=optimizer_variables)
        return self.data_parallel.constrain(state), Metrics(*info, *episodes)

    def _updates_fn(self, state, bank):
        # K updates in one call: a scan over updates, their metrics stacked [K] (one transfer).
        def one(state, _):
            return self._update_fn(state, bank)

        return backend.scan(one, state, self.config.updates_per_call)

    def _collect_fn(self, state, bank):
        state, _, episodes = self._unroll(state, bank)
        zero = keras.ops.zeros((), "float32")
        return self.data_parallel.constrain(state), Metrics(
            *(zero for _ in LossInfo._fields), *episodes)
