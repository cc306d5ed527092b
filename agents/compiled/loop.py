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
from keras_relational.agents.compiled.learning import LAST, Unroll, VTraceLearner

# dm_env.StepType.FIRST.
FIRST = 0

Metrics = collections.namedtuple("Metrics", [
    "loss", "policy_gradient_loss", "value_loss", "entropy", "gradient_norm",
    "episodes", "solved", "return_sum", "levels_started"])
Metrics.__doc__ = """Scalars of one update: the loss terms, and over the unroll's steps the
episodes finished, those solved, the sum of their returns and the bank levels started."""


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
        self._update = backend.compile_function(self._update_fn)
        self._collect = backend.compile_function(self._collect_fn)

    def initial_state(self, bank):
        """The loop state of a fresh run: the model's and optimizer's current values, bank
        levels ``0..num_envs-1`` started."""
        env_state, timestep = self.environment.reset(bank, self.config.num_envs)
        return dict(
            trainable=_copy(v.value for v in self.model.trainable_variables),
            non_trainable=_copy(v.value for v in self.model.non_trainable_variables),
            optimizer=_copy(v.value for v in self.optimizer.variables),
            env=env_state, timestep=timestep,
            seed=keras.ops.copy(self.seed_generator.state.value),
            episode_return=keras.ops.zeros((self.config.num_envs,), "float32"))

    def update(self, state, bank):
        """One compiled update: ``(state, Metrics)``. Use the returned state only."""
        return self._update(state, bank)

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
            actions, logits, seed = acting.act(self.model, params, timestep.observation,
                                               seed_generator, seed)
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

    def _update_fn(self, state, bank):
        state, unroll, episodes = self._unroll(state, bank)
        params, optimizer_variables, info = self.learner.update(
            (state["trainable"], state["non_trainable"]), state["optimizer"], unroll)
        state = dict(state, trainable=params[0], non_trainable=params[1],
                     optimizer=optimizer_variables)
        return state, Metrics(*info, *episodes)

    def _collect_fn(self, state, bank):
        state, _, episodes = self._unroll(state, bank)
        zero = keras.ops.zeros((), "float32")
        return state, Metrics(zero, zero, zero, zero, zero, *episodes)
