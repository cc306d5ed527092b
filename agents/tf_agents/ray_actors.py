"""A fleet of IMPALA actors running as Ray actors, feeding the TF-Agents learner.

Espeholt et al. (2018), "IMPALA: Scalable Distributed Deep-RL with Importance Weighted
Actor-Learner Architectures": many actors, each with its own environments and a local copy of the
policy, send trajectories to one learner and receive fresh weights from time to time; the learner
corrects for the policy lag with V-trace (the behaviour logits travel with every trajectory).

* :class:`BoxWorldActor` is one actor: a batched BoxWorld (:func:`make_boxworld_environment`) and
  the Keras 3 network built by the same ``model_fn`` as the learner's. Each :meth:`collect
  <BoxWorldActor.collect>` returns one ``[B, T+1]`` unroll with the structure of the agent's
  ``collect_data_spec`` and the semantics of the in-process path (``trajectory.from_transition``
  steps, consecutive unrolls sharing one step, auto-reset: the step after LAST is FIRST), the
  version (learner step) of the weights that chose its actions, and its finished episodes.
* :class:`RayActorFleet` is the learner side: it starts ``num_actors`` Ray actors (locally or on
  a cluster), keeps one ``collect`` call in flight per actor, feeds each finished unroll to the
  :class:`UnrollQueue` the ``Learner`` reads, broadcasts the weights (``ray.put``) every
  ``weight_sync_interval`` learner steps, records the policy lag (learner step minus the weight
  version of the unroll it trains on) and restarts an actor whose process died.

``train_eval(num_ray_actors=N, ray_address=...)`` (``python -m
keras_relational.experiments.train_boxworld --num_ray_actors=N``) uses it. Ray is an optional
dependency (``pip install "keras-relational[distributed]"``): importing
``keras_relational.agents`` never imports it.

Example (the learner side, as ``train_eval`` does it)::

    fleet = RayActorFleet(2, unrolls, network.keras_model, train_step, model_fn,
                          environment=environments.BoxWorldConfig(goal_length=1), num_envs=16,
                          unroll_length=20, data_spec=agent.collect_data_spec)
    while train_step.numpy() < num_iterations:
        fleet.run()                      # one unroll from whichever actor finished first
        learner.run(iterations=1)
    fleet.close()
"""

import collections
import math
import os

import numpy as np

from keras_relational import validation
from keras_relational.agents.config import TFAgentsConfig, environment_config

try:
    import ray
    import ray.exceptions
except ImportError:  # optional dependency: only the fleet needs it
    ray = None

INSTALL_HINT = 'pip install "keras-relational[distributed]"  (ray==2.60.0)'

ActorOutput = collections.namedtuple(
    "ActorOutput", ["unroll", "weights_version", "episodes", "actor_index", "pid", "node"])
ActorOutput.__doc__ = """What one :meth:`BoxWorldActor.collect` call returns.

unroll: a ``Trajectory`` of NumPy arrays ``[B, T+1, ...]``; weights_version: the learner step of
the weights that chose the new actions (None before any weights arrived); episodes: the
``EpisodeResult`` of every episode finished since the previous call; actor_index: the actor's
slot in its fleet; pid, node: its process id and node address.
"""


def require_ray():
    """Returns the ``ray`` module, or raises an ImportError that names the extra to install."""
    if ray is None:
        raise ImportError(
            "The Ray actor fleet (num_ray_actors > 0 / --num_ray_actors) needs the optional "
            f"dependency `ray`, which is not installed: {INSTALL_HINT}.")
    return ray


def actor_seed(seed, actor_index, incarnation):
    """A distinct environment / sampling seed per actor and per restart of that actor."""
    return int(np.random.SeedSequence([seed, actor_index, incarnation]).generate_state(1)[0])


class BoxWorldActor:
    """One IMPALA actor: a batched BoxWorld and a local copy of the policy network.

    Runs as a Ray actor (``ray.remote(BoxWorldActor)``, see :class:`RayActorFleet`) but is a plain
    class, usable in-process too. It acts exactly as the in-process actor does: through
    :class:`keras_relational.agents.tf_agents.acting.UnrollActor` (the V-trace collect policy,
    ``Categorical(logits)`` of the local network, the logits recorded as
    ``policy_info["logits"]`` for V-trace), sampling with its own seed.

    Args:
        environment: an environment config (``keras_relational.environments.BoxWorldConfig``
            or ``BridgeConfig``), or ``"original"`` / ``"bridge"`` with ``env_kwargs`` (see
            :func:`make_boxworld_environment`).
        num_envs: B, levels stepped together.
        unroll_length: T; every unroll has T+1 steps, the first shared with the previous unroll.
        model_fn: zero-argument builder of the Keras 3 network (picklable, e.g. the
            ``functools.partial`` of ``networks.agent_model_fn``); it must build the same
            architecture as the learner's, so that the weight lists match.
        seed: seeds the levels and the action sampling.
        env_kwargs: with an environment name: level parameters (e.g. ``dict(goal_length=1)``).
        num_threads: TensorFlow intra-op threads of this process (None: TensorFlow's default);
            one per CPU Ray reserved for the actor keeps actors from oversubscribing a node.
        actor_index: the actor's slot in its fleet, returned with every unroll.
        jit_compile: act through an XLA-compiled forward pass; with the same seed and weights
            the actions are the same as without.

    Example::

        actor = BoxWorldActor("original", 4, 5, model_fn, seed=1, env_kwargs=dict(goal_length=1))
        output = actor.collect(weights=model.get_weights(), weights_version=0)
        output.unroll.observation.shape   # (4, 6, H, W, 3)
    """

    def __init__(self, environment, num_envs, unroll_length, model_fn, seed=0, env_kwargs=None,
                 num_threads=1, actor_index=None, jit_compile=False):
        import tensorflow as tf
        from tf_agents.specs import tensor_spec

        from keras_relational.agents.tf_agents.acting import UnrollActor
        from keras_relational.agents.tf_agents.boxworld_environment import make_boxworld_environment
        from keras_relational.agents.tf_agents.keras3_network import Keras3Network

        if num_threads:
            # Before any op runs in this process; ignored (with an error) afterwards.
            try:
                tf.config.threading.set_intra_op_parallelism_threads(num_threads)
                tf.config.threading.set_inter_op_parallelism_threads(1)
            except RuntimeError:
                pass
        self._actor_index = actor_index
        env = make_boxworld_environment(environment, num_envs=num_envs, seed=seed,
                                        **(env_kwargs or {}))
        self._network = Keras3Network(tensor_spec.from_spec(env.observation_spec()), model_fn)
        self._actor = UnrollActor(env, self._network, unroll_length, jit_compile=jit_compile,
                                  seed=seed)
        self._weights_version = None

    def info(self):
        """``(pid, node address)`` of this actor's process."""
        return os.getpid(), _node_address()

    def set_weights(self, weights, weights_version):
        """Loads ``weights`` (``model.get_weights()`` of the learner's network)."""
        self._network.keras_model.set_weights(list(weights))
        self._weights_version = weights_version

    def collect(self, weights=None, weights_version=None):
        """Steps the environments for one unroll and returns an :class:`ActorOutput`.

        Args:
            weights: new weights (a list of arrays), or a 1-tuple holding the ``ObjectRef`` of
                that list: Ray does not resolve a nested reference, so the actor fetches the
                weights only when ``weights_version`` is new. None keeps the current weights.
            weights_version: the learner step the weights come from.
        """
        if weights is not None and weights_version != self._weights_version:
            if isinstance(weights, tuple) and len(weights) == 1:
                weights = require_ray().get(weights[0])
            self.set_weights(weights, weights_version)
        unroll = self._actor.collect()
        env = self._actor.env
        episodes, env.finished_episodes = env.finished_episodes, []
        return ActorOutput(unroll, self._weights_version, episodes, self._actor_index,
                           os.getpid(), _node_address())


def _node_address():
    if ray is not None and ray.is_initialized():
        return ray.util.get_node_ip_address()
    return "local"


class RayActorFleet:
    """The learner side of an IMPALA actor fleet on Ray.

    Starts ``num_actors`` :class:`BoxWorldActor` processes, each with its own levels and seed,
    keeps one ``collect`` call in flight per actor and, on every :meth:`run`, puts the first
    finished unroll into ``unroll_queue`` (the ``Learner``'s ``experience_dataset_fn``). The
    weights of ``keras_model`` are broadcast with ``ray.put`` every ``weight_sync_interval``
    learner steps (the next call of every actor carries them). The policy lag of each unroll
    (learner step minus the version of the weights that collected it) goes to :attr:`policy_lags`
    and, as ``policy_lag``, to TensorBoard under ``summary_dir``; V-trace corrects for it.

    An actor whose process dies (``ray.exceptions.RayActorError``: killed, out of memory, node
    lost) is replaced by a new one with a new seed and training continues; an actor slot that
    fails ``max_consecutive_failures`` times in a row without delivering an unroll raises.

    Args:
        num_actors: N, Ray actors (each reserves ``actor_num_cpus`` CPUs).
        unroll_queue: the :class:`UnrollQueue` the learner reads.
        keras_model: the learner's Keras 3 network (``Keras3Network.keras_model``).
        train_step: the learner's train-step variable (the weight version).
        model_fn: the picklable builder of that network, rebuilt in every actor.
        environment: each actor's levels: an environment config, or ``"original"`` /
            ``"bridge"`` with ``env_kwargs``.
        num_envs, unroll_length: each actor's batch of levels and unroll size.
        data_spec: the agent's ``collect_data_spec``; the first unroll is checked against it.
        seed: base seed; actor i's k-th incarnation uses :func:`actor_seed` (seed, i + 1, k).
        weight_sync_interval: K, learner steps between weight broadcasts.
        ray_address: None starts a local Ray instance (unless Ray is already initialised in this
            process); ``"auto"`` joins the cluster started on this machine with ``ray start``;
            ``"host:6379"`` joins that cluster.
        actor_num_cpus: CPUs reserved per actor, also its TensorFlow thread count.
        actor_jit_compile: every actor runs its network's forward pass XLA-compiled (see
            :class:`BoxWorldActor`; ``train_eval`` turns it on for V-trace by default).
        summary_dir: where ``policy_lag`` / ``actor_restarts`` summaries go (None: nowhere).
        print_fn: receives the fleet's status lines (actors started, restarts).
        max_consecutive_failures: see above.
    """

    def __init__(self, num_actors, unroll_queue, keras_model, train_step, model_fn,
                 environment="original", env_kwargs=None, num_envs=TFAgentsConfig.num_envs,
                 unroll_length=TFAgentsConfig.unroll_length,
                 data_spec=None, seed=0, weight_sync_interval=TFAgentsConfig.weight_sync_interval,
                 ray_address=None,
                 actor_num_cpus=1, summary_dir=None, print_fn=print, max_consecutive_failures=3,
                 actor_jit_compile=False):
        require_ray()
        validation.check_positive_int("RayActorFleet", "num_actors", num_actors)
        validation.check_positive_int("RayActorFleet", "weight_sync_interval", weight_sync_interval)
        import tensorflow as tf

        self._queue = unroll_queue
        self._keras_model = keras_model
        self._train_step = train_step
        self._data_spec = data_spec
        self._seed = seed
        self._weight_sync_interval = weight_sync_interval
        self._print = print_fn
        self._max_failures = max_consecutive_failures
        if isinstance(environment, str):
            environment = environment_config(environment, **(env_kwargs or {}))
        self._actor_kwargs = dict(environment=environment, num_envs=num_envs,
                                  unroll_length=unroll_length, model_fn=model_fn,
                                  num_threads=max(1, int(math.ceil(actor_num_cpus))),
                                  jit_compile=bool(actor_jit_compile))
        self._shape = (num_envs, unroll_length + 1)
        self._owns_ray = False
        if not ray.is_initialized():
            if ray_address:
                ray.init(address=ray_address)
            else:
                # Local: never fewer Ray CPUs than actors, or the extra actors would wait forever
                # for a free CPU; the OS shares the real cores among them.
                cpus = max(os.cpu_count() or 1, int(math.ceil(num_actors * actor_num_cpus)))
                ray.init(address="local", num_cpus=cpus, include_dashboard=False)
            self._owns_ray = True
        available = ray.cluster_resources().get("CPU", 0)
        if num_actors * actor_num_cpus > available:
            print_fn(f"warning: {num_actors} Ray actors x {actor_num_cpus} CPUs exceed the "
                     f"{available:g} CPUs of the Ray cluster; some actors wait for free CPUs.")
        self._actor_class = ray.remote(num_cpus=actor_num_cpus)(BoxWorldActor)
        self._writer = tf.summary.create_file_writer(summary_dir) if summary_dir else None
        self._actors = [None] * num_actors
        self._incarnations = [0] * num_actors
        self._failures = [0] * num_actors
        self._in_flight = {}  # ObjectRef of a collect call -> actor index
        self._weights_ref = None
        self._weights_version = None
        self._checked = False
        self.pids = [None] * num_actors
        self.nodes = [None] * num_actors
        self.finished_episodes = []
        self.policy_lags = []
        self._lag_mark = 0
        self.restarts = 0
        self._restarted = set()
        self.unrolls_received = 0
        try:
            for index in range(num_actors):
                self._start(index)
            infos = ray.get([actor.info.remote() for actor in self._actors])
        except ray.exceptions.RayError as error:
            self.close()
            raise RuntimeError(f"The Ray actors failed to start: {error}") from error
        for index, (pid, node) in enumerate(infos):
            self.pids[index], self.nodes[index] = pid, node
        print_fn(f"Ray actor fleet: {num_actors} actor{'s' if num_actors > 1 else ''} x "
                 f"{num_envs} envs, weights every "
                 f"{weight_sync_interval} learner steps; "
                 + ", ".join(f"actor {i} pid {p} on {n}" for i, (p, n) in enumerate(infos)))
        self._sync_weights(int(train_step.numpy()))
        for index in range(num_actors):
            self._submit(index)

    @property
    def num_actors(self):
        return len(self._actors)

    @property
    def weights_version(self):
        """The learner step of the weights last broadcast."""
        return self._weights_version

    def actor_handle(self, index):
        """The Ray actor handle of actor ``index`` (e.g. to query or kill it in tests)."""
        return self._actors[index]

    def run(self):
        """Puts one unroll into the queue (from whichever actor finished first); returns it.

        Broadcasts the weights first when ``weight_sync_interval`` learner steps have passed,
        and gives the actor that delivered a new ``collect`` call before returning, so actors
        keep collecting while the learner trains.
        """
        step = int(self._train_step.numpy())
        if step - self._weights_version >= self._weight_sync_interval:
            self._sync_weights(step)
        while True:
            (ready,), _ = ray.wait(list(self._in_flight), num_returns=1)
            index = self._in_flight.pop(ready)
            try:
                output = ray.get(ready)
            except ray.exceptions.RayActorError as error:
                self._restart(index, error)
                continue
            break
        self._failures[index] = 0
        self.pids[index], self.nodes[index] = output.pid, output.node
        if index in self._restarted:
            self._restarted.discard(index)
            self._print(f"Ray actor {index} is back (pid {output.pid} on {output.node})")
        self._submit(index)
        if not self._checked:
            if self._data_spec is not None:
                from keras_relational.agents.tf_agents.unroll_queue import check_unroll

                check_unroll(output.unroll, self._data_spec, self._shape, "A Ray actor's unroll")
            self._checked = True
        self._queue.put(output.unroll)
        self.unrolls_received += 1
        lag = step - output.weights_version
        self.policy_lags.append(lag)
        self.finished_episodes.extend(output.episodes)
        if self._writer is not None:
            with self._writer.as_default(step=step):
                import tensorflow as tf

                tf.summary.scalar("policy_lag", lag)
        return output

    def mean_policy_lag(self):
        """Mean policy lag (learner steps) of the unrolls received since the previous call."""
        lags = self.policy_lags[self._lag_mark:]
        self._lag_mark = len(self.policy_lags)
        return float(np.mean(lags)) if lags else float("nan")

    def close(self):
        """Kills the actors; shuts Ray down if this fleet started it."""
        for actor in self._actors:
            if actor is not None:
                try:
                    ray.kill(actor)
                except Exception:  # already dead or Ray already down
                    pass
        self._actors = [None] * len(self._actors)
        self._in_flight.clear()
        if self._writer is not None:
            self._writer.flush()
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()
            self._owns_ray = False

    def _start(self, index):
        seed = actor_seed(self._seed, index + 1, self._incarnations[index])
        self._incarnations[index] += 1
        self._actors[index] = self._actor_class.remote(seed=seed, actor_index=index,
                                                       **self._actor_kwargs)

    def _submit(self, index):
        ref = self._actors[index].collect.remote((self._weights_ref,), self._weights_version)
        self._in_flight[ref] = index

    def _sync_weights(self, step):
        self._weights_ref = ray.put([np.asarray(w) for w in self._keras_model.get_weights()])
        self._weights_version = step

    def _restart(self, index, error):
        self._failures[index] += 1
        reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
        if self._failures[index] >= self._max_failures:
            raise RuntimeError(
                f"Ray actor {index} died {self._failures[index]} times in a row without "
                f"delivering an unroll (max_consecutive_failures={self._max_failures}); last "
                f"error: {type(error).__name__}: {reason}") from error
        self.restarts += 1
        try:
            ray.kill(self._actors[index])
        except Exception:  # its process is gone already
            pass
        self._print(f"Ray actor {index} (pid {self.pids[index]} on {self.nodes[index]}) died "
                    f"({type(error).__name__}: {reason}); restarting it, training continues "
                    f"({self.restarts} restarts so far)")
        self._restarted.add(index)
        self._start(index)
        self._submit(index)
        if self._writer is not None:
            import tensorflow as tf

            with self._writer.as_default(step=int(self._train_step.numpy())):
                tf.summary.scalar("actor_restarts", self.restarts)
